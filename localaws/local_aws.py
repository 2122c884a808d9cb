"""``LocalAws``: a set of local servers started, used and stopped together, with AWS's Kinesis quotas in front of
the Kinesis servers when asked (``localaws.quota_proxy``).

Who calls it: the tests' session fixtures, the demo and the benchmarks (``from localaws import LocalAws``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from localaws.quota_model import AWS_QUOTAS, Quotas
from localaws.quota_proxy import QuotaProxy, QuotaServer
from localaws.servers import ALL_SERVERS, KINESALITE, KINESIS_MOCK, MOTO, LocalServer, ServerSpec, start_server


class LocalAws:
    """Start a set of servers, use them, stop them all: ``with LocalAws() as aws: aws.kinesalite.endpoint_url``.

    ``quotas=True`` (or a ``localaws.quota_model.Quotas``) puts a ``localaws.quota_proxy.QuotaProxy`` with AWS's
    Kinesis quotas in front of each Kinesis server: ``aws.kinesalite`` and ``aws["kinesalite"]`` are then a
    ``QuotaServer`` whose ``endpoint_url`` and ``client()`` go through it, and ``.direct`` the server itself.
    ``aws.servers`` always holds the servers themselves.
    """

    def __init__(
        self,
        specs: Iterable[ServerSpec] = ALL_SERVERS,
        log_dir: Path | str | None = None,
        quotas: Quotas | bool = False,
    ):
        self.specs = tuple(specs)
        # A directory made here goes at stop(); pass ``log_dir`` to keep the servers' logs.
        self._made_log_dir = not log_dir
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="localaws-"))
        self.servers: dict[str, LocalServer] = {}
        self.quotas = quotas
        self.fronts: dict[str, QuotaServer] = {}

    def start(self) -> LocalAws:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for spec in self.specs:
                self.servers[spec.name] = start_server(spec, self.log_dir)
            for server in self.servers.values():
                server.wait_until_ready()
            if self.quotas:
                self._start_quota_proxies()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_quota_proxies(self) -> None:
        quotas = self.quotas if isinstance(self.quotas, Quotas) else AWS_QUOTAS
        for name, server in self.servers.items():
            if server.spec.probe_service == "kinesis":
                self.fronts[name] = QuotaServer(server, QuotaProxy(server.endpoint_url, quotas).start())

    def stop(self) -> None:
        for front in self.fronts.values():
            front.quota_proxy.stop()
        for server in self.servers.values():
            server.stop()
        if self._made_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def quota_summary(self) -> str:
        """What each quota proxy counted and refused (``QuotaReport.summary``), "" without quotas."""
        return "\n".join(f"{name}: {front.quota_proxy.report().summary()}" for name, front in self.fronts.items())

    def __enter__(self) -> LocalAws:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __getitem__(self, name: str) -> LocalServer | QuotaServer:
        """The server, or what is in front of it (its ``QuotaServer``, with quotas)."""
        return self.fronts.get(name) or self.servers[name]

    @property
    def kinesis_mock(self) -> LocalServer | QuotaServer:
        return self[KINESIS_MOCK.name]

    @property
    def kinesalite(self) -> LocalServer | QuotaServer:
        return self[KINESALITE.name]

    @property
    def moto(self) -> LocalServer:
        return self.servers[MOTO.name]

    def restart_dead(self) -> list[str]:
        """Restart every server that exited by itself, on its own port; one report (``death_report``) each."""
        reports = []
        for server in self.servers.values():
            if server.exit_code() is not None:
                reports.append(server.death_report())
                server.restart()
        return reports

    def pids(self) -> list[int]:
        return [server.pid for server in self.servers.values()]

    def log_tails(self, lines: int = 20) -> str:
        return "\n".join(f"--- {s.name} ({s.log_path})\n{s.log_tail(lines)}" for s in self.servers.values())
