"""Helpers for the credential tests: recording proxies in front of kinesalite (Kinesis) and moto (STS), and the
options of a read or write through an assumed role."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localaws import LocalServer
from localaws.fault_proxy import FaultProxy, SignedRequest

BASE_KEY_ID = "AKIABASEKEY0000TEST1"  # the application's own (base) key: Kinesis must never see it
BASE_SECRET = "base-secret-key"
ROLE_ARN = "arn:aws:iam::210987654321:role/stream-owner/kinesis-reader"
EXTERNAL_ID = "external-id-for-tests"


@dataclass
class Proxies:
    """A recording proxy in front of the Kinesis server and one in front of moto's STS."""

    kinesis: FaultProxy
    sts: FaultProxy

    def kinesis_requests(self) -> list[SignedRequest]:
        return self.kinesis.requests()

    def assume_roles(self) -> list[SignedRequest]:
        return self.sts.requests("AssumeRole")


@contextmanager
def recording_proxies(kinesis_server: LocalServer, moto: LocalServer) -> Iterator[Proxies]:
    with (
        FaultProxy(kinesis_server.endpoint_url, record=True) as kinesis,
        FaultProxy(moto.endpoint_url, record=True) as sts,
    ):
        yield Proxies(kinesis, sts)


def role_options(proxies: Proxies, **extra: str) -> dict[str, str]:
    """Endpoint, base keys and the role with its external ID, all through the recording proxies."""
    return {
        "kinesis.endpointUrl": proxies.kinesis.endpoint_url,
        "kinesis.awsAccessKeyId": BASE_KEY_ID,
        "kinesis.awsSecretKey": BASE_SECRET,
        "kinesis.stsRoleArn": ROLE_ARN,
        "kinesis.stsExternalId": EXTERNAL_ID,
        "kinesis.stsEndpointUrl": proxies.sts.endpoint_url,
        **extra,
    }


def signing_keys(requests: list[SignedRequest]) -> set[Any]:
    return {request.access_key_id for request in requests}


def _is_assumed_role_key(key_id: str | None) -> bool:
    return bool(key_id) and key_id.startswith("ASIA") and key_id != BASE_KEY_ID


def _base_source_options(tmp_path: Path) -> dict[str, str]:
    return {
        "kinesis.streamName": "s",
        "kinesis.endpointUrl": "http://127.0.0.1:1",
        "kinesis.awsAccessKeyId": BASE_KEY_ID,
        "kinesis.awsSecretKey": "s",
        "kinesis.metadataPath": str(tmp_path),
    }
