"""A user's first script, as docs/source.md writes it, run from a directory outside the checkout with the
interpreter of a venv that has the project installed editable (as ``make setup`` installs it into ``.venv``).

    python editable_app.py <stream> <endpoint> <metadata dir>

Prints ``RESULT {"connector": <file pyspark_aws_kinesis was imported from>, "rows": [...]}``: a batch read of the stream
through ``format("aws-kinesis")``, found by pyspark itself (no registration call), with the Python workers on this
interpreter because the script sets PYSPARK_PYTHON as the docs say.
"""

import json
import os
import sys

# As docs/source.md says: Spark starts its Python workers with PYSPARK_PYTHON (default: `python3` on PATH, which
# lacks pyarrow and this project); point it at the interpreter running this script.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession

import pyspark_aws_kinesis

stream, endpoint, metadata = sys.argv[1:4]
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
rows = (
    spark.read.format("aws-kinesis")
    .option("kinesis.streamName", stream)
    .option("kinesis.endpointUrl", endpoint)
    .option("kinesis.startingPosition", "TRIM_HORIZON")
    .option("kinesis.metadataPath", metadata)
    .load()
    .selectExpr("CAST(data AS STRING) AS data")
    .collect()
)
print("RESULT " + json.dumps({"connector": pyspark_aws_kinesis.__file__, "rows": sorted(row.data for row in rows)}))
spark.stop()
