"""The read quota of one GetRecords a second per shard, for the tests behind a strict quota proxy."""

from __future__ import annotations

from localaws.quota_model import Quotas

ONE_CALL_A_SECOND = Quotas(get_records_calls=1)
