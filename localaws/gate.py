"""Catch a client in the middle of a call: kinesalite's request gate (``localaws/kinesalite_loopback.js``).

A test that kills a client (a SIGKILLed driver, a stopped query) wants the kill to land while a call is under way
at the server, every time, not when the timing happens to allow it: ``held_calls(kinesalite, "GetRecords")``
holds every GetRecords request the server receives, unanswered, until the block ends; ``gate.held`` counts the
held requests whose client is still connected, ``gate.hung_up`` the clients that hung up mid-request since the
server started.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlencode

from localaws.servers import KINESALITE, LocalServer


@dataclass(frozen=True)
class GateState:
    held: int
    hung_up: int


def gate(server: LocalServer, **query: str) -> GateState:
    """Ask (and with ``close=ACTION`` or ``open=""``, set) the gate of a kinesalite started by ``localaws``."""
    if server.spec is not KINESALITE:
        raise ValueError(f"only kinesalite has a request gate, not {server.name}")
    url = f"{server.endpoint_url}/__localaws/gate" + (f"?{urlencode(query)}" if query else "")
    with urllib.request.urlopen(url, timeout=10) as answer:
        state = json.load(answer)
    return GateState(state["held"], state["hungUp"])


@contextmanager
def held_calls(server: LocalServer, action: str) -> Iterator[None]:
    """Within the block, ``action`` requests reach ``server`` and wait there, unanswered; after it they go on."""
    gate(server, close=action)
    try:
        yield
    finally:
        gate(server, open="")
