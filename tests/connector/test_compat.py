"""``pyspark_aws_kinesis.compat``: one code base on pyspark 4.0.2 and newer. Runs on both venvs (make test): each
checks the branch its pyspark takes."""

from __future__ import annotations

import inspect

import pyspark
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter

from pyspark_aws_kinesis import compat
from pyspark_aws_kinesis.compat import (
    HAS_READ_LIMITS,
    PYSPARK_VERSION,
    STREAM_ARROW_WRITER_BASES,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)


def test_the_version_is_the_installed_pyspark_major_and_minor() -> None:
    assert tuple(int(part) for part in pyspark.__version__.split(".")[:2]) == PYSPARK_VERSION
    assert PYSPARK_VERSION >= (4, 0)


def test_read_limits_are_pysparks_own_from_4_2_and_stand_ins_before() -> None:
    assert (PYSPARK_VERSION >= (4, 2)) == HAS_READ_LIMITS
    own = ReadMaxRows.__module__.startswith("pyspark.")
    assert own == HAS_READ_LIMITS
    assert ReadMaxRows(7).max_rows == 7  # the field the reader reads, either way


def test_available_now_can_be_declared_on_every_pyspark() -> None:
    assert callable(SupportsTriggerAvailableNow.prepareForTriggerAvailableNow)
    if not HAS_READ_LIMITS:
        assert SupportsTriggerAvailableNow().prepareForTriggerAvailableNow() is None


def test_a_stream_arrow_writer_gets_record_batches_on_every_pyspark() -> None:
    if PYSPARK_VERSION >= (4, 1):
        from pyspark.sql.datasource import DataSourceStreamArrowWriter

        assert (DataSourceStreamArrowWriter,) == STREAM_ARROW_WRITER_BASES
    else:
        assert (DataSourceStreamWriter, DataSourceArrowWriter) == STREAM_ARROW_WRITER_BASES
    assert all(inspect.isclass(base) for base in STREAM_ARROW_WRITER_BASES)


def test_everything_it_exports_exists() -> None:
    assert all(hasattr(compat, name) for name in compat.__all__)
