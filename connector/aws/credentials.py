"""Credentials: the base ones (explicit keys or boto3's default chain) and the assumed role, refreshed.

Who calls it: ``clients`` when it builds a client (``credentials_provider``, ``role_session``); error messages
about credentials (``explain_assume_role_failure``, ``redact``) never carry a secret. See the package doc for
the layers.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .. import options as opts
from ..errors import KinesisConnectorError
from ..retry import error_code
from .settings import ClientSettings


def credentials_provider(settings: ClientSettings) -> dict[str, str | None]:
    """Session keyword arguments for the base credentials: explicit keys, or none (boto3's default chain)."""
    if settings.access_key_id is None:
        return {}
    return {
        "aws_access_key_id": settings.access_key_id,
        "aws_secret_access_key": settings.secret_key,
        "aws_session_token": settings.session_token,
    }


# --- the assumed role: once per process and settings, refreshed before it expires ---------------------------

# Overrides the advisory refresh window (``refresh_windows``) for tests that watch a refresh; not a user setting.
REFRESH_WINDOW_ENV = "AWS_KINESIS_STS_REFRESH_WINDOW_S"
ROLE_METHOD = "aws-kinesis-assume-role"


class AssumeRoleError(KinesisConnectorError, RuntimeError):
    """AssumeRole failed: names the role and what failed, never a secret."""


def redact(text: str, settings: ClientSettings) -> str:
    """``text`` with every secret value of ``settings`` replaced by ``<secret>``."""
    for value in settings.secret_values():
        text = text.replace(value, "<secret>")
    return text


def refresh_windows(duration_s: int) -> tuple[float, float]:
    """(advisory, mandatory) seconds before expiry: from the advisory one on, one thread refreshes while others
    keep the current keys; from the mandatory one on, every call waits for fresh keys.

    botocore's defaults (15 and 10 min) would refresh a 15-minute session on every call.
    """
    override = os.environ.get(REFRESH_WINDOW_ENV)
    advisory = float(override) if override else min(15 * 60.0, duration_s / 3)
    return advisory, min(10 * 60.0, advisory / 2)


_role_credentials: dict[tuple[Any, ...], Any] = {}
_role_lock = threading.Lock()


def role_credentials(settings: ClientSettings) -> Any:
    """The process's refreshable credentials of ``settings.role``, shared by every client of these settings.

    Deferred: the first signed request assumes the role, later ones reuse the keys until the advisory window.
    """
    assert settings.role is not None
    key = (settings.region, settings.role, *credentials_provider(settings).values())
    with _role_lock:
        if key not in _role_credentials:
            _role_credentials[key] = _new_role_credentials(settings)
        return _role_credentials[key]


def _new_role_credentials(settings: ClientSettings) -> Any:
    from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

    role = settings.role
    assert role is not None
    advisory, mandatory = refresh_windows(role.duration_s)
    extra: dict[str, Any] = {"RoleSessionName": role.session_name, "DurationSeconds": role.duration_s}
    if role.external_id is not None:
        extra["ExternalId"] = role.external_id
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=lambda service, **keys: _sts_client(settings, **keys),
        source_credentials=_base_credentials(settings),
        role_arn=role.role_arn,
        extra_args=extra,
        expiry_window_seconds=advisory,  # the fetcher's cache must not hand back keys the refresh wants replaced
    )

    def fetch() -> dict[str, Any]:
        try:
            return fetcher.fetch_credentials()
        except Exception as exc:  # botocore and STS errors alike: explain them without any secret
            raise AssumeRoleError(explain_assume_role_failure(settings, exc)) from None

    credentials = DeferredRefreshableCredentials(refresh_using=fetch, method=ROLE_METHOD)
    # botocore reads its refresh windows from these attributes (class defaults 15 / 10 min).
    credentials._advisory_refresh_timeout = advisory
    credentials._mandatory_refresh_timeout = mandatory
    return credentials


def _base_credentials(settings: ClientSettings) -> Any:
    """The credentials the role is assumed from: the explicit keys, else boto3's default chain."""
    import botocore.session
    from botocore.credentials import Credentials

    if settings.access_key_id is not None:
        return Credentials(settings.access_key_id, settings.secret_key, settings.session_token)
    found = botocore.session.get_session().get_credentials()
    if found is None:
        assert settings.role is not None
        raise AssumeRoleError(
            f"cannot assume {settings.role.describe()}: no base credentials (set {opts.ACCESS_KEY_ID.name} and "
            f"{opts.SECRET_KEY.name}, or give the process credentials through the AWS SDK's default chain)"
        )
    return found


def _sts_client(settings: ClientSettings, **keys: Any) -> Any:
    """An STS client signed with the base ``keys``; botocore retries its throttling (nothing else wraps it)."""
    import botocore.session
    from botocore.config import Config

    assert settings.role is not None
    config = Config(
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        retries={"total_max_attempts": settings.retry.max_retries + 1, "mode": "standard"},
    )
    return botocore.session.get_session().create_client(
        "sts", region_name=settings.region, endpoint_url=settings.role.sts_endpoint_url, config=config, **keys
    )


# What an AssumeRole error code means for the user, beyond AWS's own message.
_ASSUME_ROLE_HINTS = {
    "AccessDenied": (
        "the base credentials may not call sts:AssumeRole on it, or its trust policy refuses them or the "
        f"external ID ({opts.STS_EXTERNAL_ID.name}: a wrong or missing one also answers AccessDenied)"
    ),
    "ExpiredToken": "the base credentials' session token has expired",
    "ExpiredTokenException": "the base credentials' session token has expired",
    "InvalidClientTokenId": "the base credentials' access key id is not valid",
    "SignatureDoesNotMatch": "the base credentials' secret key does not match its access key id",
    "ValidationError": f"AWS refused a parameter ({opts.STS_DURATION_SEC.name} above the role's maximum session "
    f"duration, or {opts.STS_SESSION_NAME.name})",
    "RegionDisabledException": f"STS is not activated in region {{region}} ({opts.REGION.name})",
}


def explain_assume_role_failure(settings: ClientSettings, exc: BaseException) -> str:
    """One line naming the role, what failed and why it may have, with AWS's message redacted."""
    assert settings.role is not None
    code = error_code(exc)
    hint = _ASSUME_ROLE_HINTS.get(code, "").format(region=settings.region)
    detail = redact(str(exc), settings)
    return f"AssumeRole of {settings.role.describe()} failed: {code}" + (f" ({hint})" if hint else "") + f": {detail}"


def role_session(settings: ClientSettings) -> Any:
    """A botocore session whose credentials are the process's shared assumed-role credentials."""
    import botocore.session
    from botocore.credentials import CredentialProvider

    shared = role_credentials(settings)

    class SharedRole(CredentialProvider):
        METHOD = ROLE_METHOD

        def load(self) -> Any:
            return shared

    botocore_session = botocore.session.get_session()
    botocore_session.get_component("credential_provider").insert_before("env", SharedRole())
    return botocore_session
