"""Another application reading a stream beside the one under test, as AWS Lambda does: every shard polled once a
second with plain boto3, each refusal waited out until the next round. Tests and benchmarks put it beside a query
behind ``localaws.quota_proxy`` and compare what it was refused (``QuotaReport``, grouped by its User-Agent token)
with what it saw itself.
"""

from __future__ import annotations

import threading

from botocore.config import Config
from botocore.exceptions import ClientError

from localaws.servers import aws_client
from localaws.streams import QUOTA_REFUSALS, list_shard_ids, patiently

NEIGHBOUR_TOKEN = "localaws-neighbour"  # appended to its User-Agent: ``groups={"neighbour": NEIGHBOUR_TOKEN}``


class Neighbour(threading.Thread):
    """``with Neighbour(proxy.endpoint_url, stream) as neighbour: ...``; then ``neighbour.read`` (the data of every
    record it read, in shard order), ``neighbour.calls`` and ``neighbour.refused`` (its GetRecords calls and the
    ones refused for a quota). It reads from TRIM_HORIZON, the shards open when it starts."""

    def __init__(self, endpoint_url: str, stream: str, interval_s: float = 1.0, token: str = NEIGHBOUR_TOKEN):
        super().__init__(name=f"neighbour-{stream}", daemon=True)
        config = Config(retries={"total_max_attempts": 1}, user_agent_extra=token)  # it sees every refusal
        self.kinesis = aws_client("kinesis", endpoint_url, config=config)
        self.stream, self.interval_s = stream, interval_s
        self.read: list[bytes] = []
        self.calls = self.refused = 0
        self.error: BaseException | None = None
        self._stopping = threading.Event()
        start = {"StreamName": stream, "ShardIteratorType": "TRIM_HORIZON"}
        self._iterators = {
            shard: patiently(self.kinesis.get_shard_iterator, ShardId=shard, **start)["ShardIterator"]
            for shard in list_shard_ids(self.kinesis, stream)
        }

    def run(self) -> None:
        try:
            while not self._stopping.wait(self.interval_s):
                for shard, iterator in list(self._iterators.items()):
                    self._poll(shard, iterator)
        except BaseException as error:  # reported by stop(), never lost in a thread
            self.error = error

    def _poll(self, shard: str, iterator: str) -> None:
        self.calls += 1
        try:
            answer = self.kinesis.get_records(ShardIterator=iterator)
        except ClientError as error:
            if error.response["Error"]["Code"] not in QUOTA_REFUSALS:
                raise
            self.refused += 1
            return
        self.read += [record["Data"] for record in answer["Records"]]
        self._iterators[shard] = answer["NextShardIterator"]

    def stop(self) -> None:
        """End the polling; raises what ended it early, if anything did."""
        self._stopping.set()
        self.join()
        if self.error is not None:
            raise self.error

    def __enter__(self) -> Neighbour:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
