"""The quota proxy's tests: a proxy in front of the session's kinesalite, on a clock moved by hand."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localaws import LocalServer
from localaws.quota_model import ManualClock
from localaws.quota_proxy import QuotaProxy


@pytest.fixture
def proxy(kinesalite: LocalServer) -> Iterator[QuotaProxy]:
    with QuotaProxy(kinesalite.endpoint_url, clock=ManualClock()) as running:
        yield running
