"""``pyspark_aws_kinesis.worker_daemon``: Spark forks the session's Python workers from it, with every connector
module of a read's path already loaded."""

from __future__ import annotations

import json
import os
import sys

from pyspark_aws_kinesis.worker_daemon import DAEMON_CONF, preload
from tests.connector.source.test_stream_reader import WORKER_PATH
from tests.connector.support.fresh_process import fresh_modules

PRELOADED_MODULES = """
import json, sys
from pyspark_aws_kinesis.worker_daemon import preload
print(json.dumps({"meta": preload(), "modules": sorted(sys.modules)}))
"""


def test_preload_covers_the_read_path_of_a_fresh_worker() -> None:
    _service, read_path = fresh_modules(WORKER_PATH)
    failed, preloaded = fresh_modules(PRELOADED_MODULES)
    assert failed == []
    ours = {name for name in read_path if name.split(".")[0] in {"pyspark_aws_kinesis", "botocore", "pyarrow"}}
    assert ours - preloaded == set()


def test_a_module_that_fails_to_import_is_named_and_the_rest_still_load() -> None:
    failed = preload(("no_such_module_here", "json"))
    assert len(failed) == 1
    assert "not preloaded: no_such_module_here: ModuleNotFoundError" in failed[0]


def test_the_sessions_python_workers_fork_from_it(spark) -> None:
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == DAEMON_CONF["spark.python.daemon.module"]

    def parent_and_modules(_rows):
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
            parent = cmdline.read().replace(b"\0", b" ").decode()
        loaded = {"pyspark_aws_kinesis.fetch.range", "pandas"} <= sys.modules.keys()  # pandas: installed here
        yield json.dumps({"parent": parent, "loaded": loaded})

    answers = [
        json.loads(line)
        for line in spark.sparkContext.parallelize([0, 1], 2).mapPartitions(parent_and_modules).collect()
    ]
    assert len(answers) == 2
    for answer in answers:
        assert "-m pyspark_aws_kinesis.worker_daemon" in answer["parent"]
        assert answer["loaded"]
