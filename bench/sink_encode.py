"""PutRecords encoding: the sink's ``put_all`` (msgspec body and answer) against botocore's own, in one thread's CPU.

Run: ``.venv/bin/python -m bench.sink_encode [--records N] [--size BYTES] [--repeats N] [--no-quotas]``

Two tables, every row taking turns with the others, median of ``--repeats`` runs, in records per second of this
thread's CPU time (not wall time: the machine may be shared, and kinesalite's own time is not ours); ratio = the
row's rate over the first row's. Nothing is asserted.

1. Whole calls into kinesalite, ``--records`` records (default 5,000 x 1 KiB) in calls of 500 entries, each on its
   own client: botocore's path (``client.put_records`` with the entries: botocore validates them, base64-encodes
   and serializes each, parses the answer) against ``pyspark_aws_kinesis.sink.put_records.put_all`` (msgspec encodes the
   body and reads the answer; botocore signs and sends). This counts what a sink task's thread pays per record,
   signing and HTTP included. Through the quotas (1,000 records/s per shard) unless ``--no-quotas``: a
   refused entry is sent again, by both; the stream has enough shards for the default not to be refused.
2. The encoding alone for one call of 500 entries: botocore's parameter validation + JSON serializer + parser of
   an answer against msgspec's encoder + decoder (the part that changed).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

import botocore.parsers
import botocore.serialize
import botocore.validate

from bench.common import add_quota_flag, local_aws, median_rates, print_quotas, print_rate_table
from localaws.servers import DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY, KINESALITE
from localaws.streams import create_stream, unique_name
from pyspark_aws_kinesis.aws.clients import client
from pyspark_aws_kinesis.aws.settings import ClientSettings
from pyspark_aws_kinesis.retry import RetryPolicy
from pyspark_aws_kinesis.sink.encoded_body import decode_answer, encode_body
from pyspark_aws_kinesis.sink.entries import Entry
from pyspark_aws_kinesis.sink.put_records import put_all

CALL = 500
RETRY = RetryPolicy(max_retries=10, initial_interval_ms=100, max_interval_ms=1000)
Run = Callable[[], object]


def botocore_put(kinesis, stream: str, entries: list[Entry]) -> None:
    """botocore's own path, 500 entries a call, failed entries sent again (as the boto3 loop of sink_throughput)."""
    for start in range(0, len(entries), CALL):
        pending = [entry.to_request() for entry in entries[start : start + CALL]]
        while pending:
            answer = kinesis.put_records(StreamName=stream, Records=pending)
            pending = [entry for entry, result in zip(pending, answer["Records"], strict=True) if "ErrorCode" in result]
            if pending:
                time.sleep(0.1)


def encode_runs(entries: list[Entry], kinesis) -> dict[str, Run]:
    """Table 2: one call's encoding, both ways (the answer is a made-up one of the same size as Kinesis')."""
    model = kinesis.meta.service_model.operation_model("PutRecords")
    serializer, validator = botocore.serialize.create_serializer("json"), botocore.validate.ParamValidator()
    parser = botocore.parsers.create_parser("json")
    batch = entries[:CALL]
    sequence = "49680589027508487007318316770931536223566464343661871106"
    results = [{"SequenceNumber": sequence, "ShardId": "shardId-000000000003"}] * len(batch)
    answer = json.dumps({"FailedRecordCount": 0, "Records": results}).encode()

    def botocore_encoding() -> None:
        params = {"StreamName": "s", "Records": [entry.to_request() for entry in batch]}
        validator.validate(params, model.input_shape)
        serializer.serialize_to_request(params, model)
        parser.parse({"body": answer, "headers": {}, "status_code": 200}, model.output_shape)

    def msgspec_encoding() -> None:
        encode_body("s", batch)
        decode_answer(answer)

    return {
        "botocore validate + serialize + parse": botocore_encoding,
        "msgspec encode + decode (ours)": msgspec_encoding,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    add_quota_flag(parser)
    args = parser.parse_args(argv)
    payload = os.urandom(args.size * 2)
    entries = [Entry(payload[i % args.size : i % args.size + args.size], f"key-{i}") for i in range(args.records)]
    with local_aws(args, KINESALITE) as aws:
        server = aws.kinesalite
        # enough shards that the default run stays under the write quota of 1,000 records/s per shard
        stream = create_stream(server.direct.client("kinesis"), unique_name("bench-sink-encode"), 8)
        plain = server.client("kinesis")
        settings = ClientSettings("us-east-1", server.endpoint_url, DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY)
        connector = client("kinesis", settings)
        calls = {
            "botocore put_records (baseline)": lambda: botocore_put(plain, stream, entries),
            "put_all, msgspec (ours)": lambda: put_all(connector, stream, entries, RETRY),
        }
        print(f"records per second of this thread's CPU time, median of {args.repeats} runs taking turns\n")
        print(f"1. {args.records:,} records x {args.size} B into kinesalite, {CALL} entries a call")
        print_rate_table(median_rates(args.records, args.repeats, calls))
        print(f"2. the encoding of one call of {CALL} entries x {args.size} B, and its answer")
        print_rate_table(median_rates(CALL, args.repeats * 4, encode_runs(entries, plain)))
    print_quotas(aws)


if __name__ == "__main__":
    main()
