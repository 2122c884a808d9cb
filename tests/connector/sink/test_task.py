"""One Spark task's write (``pyspark_aws_kinesis.sink.task``), run in this process: a stream that keeps resharding
fails the task naming the stream. A split between listing and writing in a Spark write:
tests/connector/queries/test_sink_reshard.py."""

from __future__ import annotations

import pytest

import pyspark_aws_kinesis.sink.task as task
from localaws import LocalServer
from tests.connector.support.sink_util import rows, split_after_listing, write
from tests.connector.support.source_util import source_options


@pytest.mark.slow
def test_a_stream_that_keeps_resharding_fails_the_task_naming_the_stream(
    kinesis_mock: LocalServer, mock_stream, monkeypatch, tmp_path
) -> None:
    stream = mock_stream(shards=1)
    kinesis = kinesis_mock.client("kinesis")
    handed = split_after_listing(monkeypatch, kinesis, stream, stale_forever=True)
    with pytest.raises(task.ReshardResendError, match=f"Kinesis stream '{stream}' kept resharding") as failure:
        write(source_options(kinesis_mock, stream, tmp_path), rows(30))
    assert f"after {task.MAX_RESEND_ROUNDS} re-sends" in str(failure.value)
    assert len(handed) == task.MAX_RESEND_ROUNDS + 2  # the first listing, then one per round
