"""The README's first command: run the pipeline on local servers, no AWS account needed.

For now (foundation): start the local servers, create the demo source and sink streams, write a few records
with boto3, read them back and check them, then stop everything.
"""

from __future__ import annotations

import argparse
import sys

from localaws import KINESIS_MOCK, MOTO, LocalAws
from localaws.streams import create_stream, put_records, read_stream


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20, help="records to write into the source stream")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with LocalAws([KINESIS_MOCK, MOTO]) as aws:
        kinesis = aws.kinesis_mock.client("kinesis")
        print(f"kinesis-mock at {aws.kinesis_mock.endpoint_url}, moto at {aws.moto.endpoint_url}")
        for name, shards in (("demo-source", 2), ("demo-sink", 1)):
            create_stream(kinesis, name, shards)
            print(f"created stream {name} with {shards} shard(s)")
        sent = [(f'{{"id": {i}}}'.encode(), f"key-{i}") for i in range(args.records)]
        put_records(kinesis, "demo-source", sent)
        received = read_stream(kinesis, "demo-source")
        ok = sorted((r["Data"], r["PartitionKey"]) for r in received) == sorted(sent)
        print(f"wrote {len(sent)} records, read back {len(received)}: {'OK' if ok else 'MISMATCH'}")
    print("local servers stopped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
