"""What the subscription broker's wire format costs: one page of 10,000 records (200-byte payloads) encoded, framed
and decoded with all its checks (``fetch.fanout.protocol``), beside a pickle round trip of the same page (the format
before protocol 3, for scale). No server, no socket: the CPU per page at both ends together.

Run: ``.venv/bin/python -m bench.efo_wire [--records 10000] [--size 200] [--repeat 20]``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
from collections.abc import Callable

from pyspark_aws_kinesis.fetch.decode import Page
from pyspark_aws_kinesis.fetch.fanout.protocol import page_from_wire, page_to_wire


def _page(records: int, size: int) -> Page:
    first = 49600000000000000000000000000000000000000000000000000000
    return Page(
        data=[b"x" * size] * records,
        keys=[f"key-{i}" for i in range(records)],
        sequences=[str(first + i) for i in range(records)],
        subs=[0] * records,
        arrivals_us=[1_700_000_000_000_000 + i for i in range(records)],
        record_ends=[True] * records,
        kinesis_records=records,
        last_sequence=str(first + records - 1),
        next_iterator="continuation",
        millis_behind_latest=0,
    )


def _ms(action: Callable[[], object], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        action()
    return (time.perf_counter() - start) / repeat * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    page = _page(args.records, args.size)

    def wire() -> Page:
        message, blob = page_to_wire(page)
        body = json.dumps({"kind": "page", "page": message}, separators=(",", ":")).encode()
        return page_from_wire(json.loads(body)["page"], blob)

    assert wire() == page
    framed = _ms(wire, args.repeat)
    pickled = _ms(lambda: pickle.loads(pickle.dumps(page, protocol=pickle.HIGHEST_PROTOCOL)), args.repeat)
    print(f"{args.records} records of {args.size} B per page: JSON frame {framed:.1f} ms, pickle {pickled:.1f} ms")


if __name__ == "__main__":
    main()
