"""A proxy whose every GET burns a known CPU time in its handler, for the tests of what the proxies' CPU counts."""

from __future__ import annotations

import time
import urllib.request
from http.server import BaseHTTPRequestHandler

from localaws.fault_proxy import FaultHandler, FaultProxy, serving_cpu_s

BURN_S = 0.3


class _BurningHandler(FaultHandler):
    def do_GET(self) -> None:
        end = time.thread_time() + BURN_S
        while time.thread_time() < end:
            pass
        self._reply(200, [("Content-Type", "text/plain")], b"burnt")


class BurningProxy(FaultProxy):
    """Nothing upstream: its GETs are answered by the proxy itself after ``BURN_S`` of CPU."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9")

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_BurningHandler,), {"proxy": self})

    def get(self) -> bytes:
        """A GET's answer, once the handler's CPU is counted: the handler adds it after the answer has gone out."""
        before = serving_cpu_s()
        with urllib.request.urlopen(self.endpoint_url + "/", timeout=30) as answer:
            body = answer.read()
        deadline = time.monotonic() + 10
        while serving_cpu_s() - before < BURN_S and time.monotonic() < deadline:
            time.sleep(0.01)
        return body
