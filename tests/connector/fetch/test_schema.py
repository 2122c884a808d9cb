"""``pyspark_aws_kinesis.fetch.schema``: the DDL ``load()`` answers is the schema the decoded pages carry."""

from __future__ import annotations

import pyarrow as pa

from pyspark_aws_kinesis.fetch.decode import ARROW_SCHEMA
from pyspark_aws_kinesis.fetch.schema import SCHEMA_DDL

# Spark's Arrow form of each DDL type (what a Python data source's batches must carry).
ARROW_OF_DDL = {
    "BINARY": pa.binary(),
    "STRING": pa.string(),
    "BIGINT": pa.int64(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
}


def test_the_ddl_names_and_types_the_arrow_schema_columns_in_order() -> None:
    columns = [column.split() for column in SCHEMA_DDL.split(", ")]
    assert [name for name, _type in columns] == ARROW_SCHEMA.names
    assert [ARROW_OF_DDL[ddl] for _name, ddl in columns] == ARROW_SCHEMA.types
