"""``pyspark_aws_kinesis.datasource``: ``load()`` checks the options without botocore's parsers or pyarrow, in a
short-lived process that never calls AWS (what a fresh process imports on that path)."""

from __future__ import annotations

from tests.connector.support.fresh_process import fresh_modules

# load(): the source's schema() checks every option, in a short-lived process that never calls AWS.
LOAD_PATH = """
import json, sys
from pyspark_aws_kinesis.datasource import KinesisDataSource
options = {"kinesis.streamName": "s", "kinesis.endpointUrl": "http://127.0.0.1:9"}
print(json.dumps({"meta": KinesisDataSource(options).schema(), "modules": sorted(sys.modules)}))
"""


def test_load_checks_options_without_botocores_parsers() -> None:
    schema, modules = fresh_modules(LOAD_PATH)
    assert schema.startswith("data BINARY")
    # botocore.parsers (and urllib3's connection stack behind it) is only needed where answers are parsed.
    assert "botocore.parsers" not in modules
    # Nor the read path: Spark's planning workers run schema() in a fresh process each (docs/source.md).
    assert {"pyarrow", "msgspec", "urllib3", "ssl"}.isdisjoint(name.split(".")[0] for name in modules)
