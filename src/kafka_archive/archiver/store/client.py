"""The S3 client of a process: botocore sessions by credentials source (an assumed role
included), the client's options, and what goes wrong before any request (a profile that
does not exist, a region that is not one), as the runtime's errors."""

from __future__ import annotations

import datetime
import email.utils
import hashlib
import os
import threading
from typing import Any, cast

import botocore.session
import botocore.utils
from botocore.config import Config
from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials
from botocore.exceptions import BotoCoreError, ClientError, InvalidRegionError, ProfileNotFound

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import AccessDeniedError, ConfigError, S3UnavailableError
from kafka_archive.archiver.store.translate import error_code, error_status

# Assumed-role credentials per process (driver, executor), refreshed before they expire.
_ROLE_CREDENTIALS: dict[tuple[str | None, ...], Any] = {}
_ROLE_LOCK = threading.Lock()


# One botocore session per process and credentials source: a client of a warm one costs
# ~5 ms. A Spark worker runs many short tasks, each with its own S3Store. Sessions are not
# thread-safe: clients are made under the lock. botocore's own sessions, not boto3's: the
# clients are the same (boto3 adds only its resources and managed transfers, unused here),
# and importing boto3 (with s3transfer) costs ~0.1 CPU-s in every process that does.
_SESSIONS: dict[str, Any] = {}
_SESSION_LOCK = threading.Lock()
CREDENTIAL_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)


def _client(settings: S3Settings, **kwargs: Any) -> Any:
    """An S3 client of the process's session for ``settings``' credentials."""
    source = [
        settings.role_arn,
        settings.external_id,
        settings.role_session_name,
        settings.sts_endpoint_url,
        settings.region,
        *(os.environ.get(name) for name in CREDENTIAL_ENV),
    ]
    key = hashlib.sha256(repr(source).encode()).hexdigest()
    with _SESSION_LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            session = _SESSIONS[key] = _session(settings)
        return session.create_client("s3", **kwargs)


def open_client(settings: S3Settings) -> Any:
    """The S3 client of ``settings``: its endpoint, region, retries, timeouts and checksums."""
    config = Config(
        # botocore's standard mode: exponential backoff with full jitter (base 1 s,
        # at most 20 s) on throttling (503 SlowDown), 5xx and connection errors.
        retries={"mode": "standard", "max_attempts": settings.max_attempts},
        connect_timeout=10,
        read_timeout=60,
        s3=cast(Any, s3_options(settings)),
        request_checksum_calculation=(
            "when_required" if settings.checksum == "OFF" else "when_supported"
        ),
    )
    try:
        return _client(
            settings,
            endpoint_url=settings.endpoint_url,
            region_name=settings.region,
            config=config,
        )
    except ProfileNotFound as exc:
        raise S3UnavailableError(
            f"no AWS credentials found: {exc}",
            hint="Fix AWS_PROFILE (a profile of ~/.aws/config or ~/.aws/credentials), or "
            "unset it to use the environment or an instance or container role",
        ) from None
    except InvalidRegionError:
        named = repr(settings.region) if settings.region else "of AWS_DEFAULT_REGION"
        raise ConfigError(
            f"the AWS region {named} is not a region name",
            hint="Fix region (--region, KAFKA_ARCHIVE_REGION) or AWS_DEFAULT_REGION, "
            "e.g. eu-west-1",
        ) from None


def s3_options(settings: S3Settings) -> dict[str, Any]:
    """botocore's ``s3`` client options: addressing style, and payload signing.

    Over plain http botocore signs every body with its SHA-256 (a second pass over each
    upload, ~1.5 CPU-s per GB) even when the request carries a checksum; over https it does
    not. Where a checksum goes with every upload (CRC32 by default, ``s3_checksum``), S3
    verifies it and refuses a corrupted body: that checksum is the integrity check, over
    http as over https, and the body is sent unsigned. With ``s3_checksum`` off, botocore's
    default stays (signed over http).
    """
    config: dict[str, Any] = {"addressing_style": settings.addressing_style or "auto"}
    if settings.checksum != "OFF":
        config["payload_signing_enabled"] = False
    return config


# botocore's loader of its data files (service models, endpoint rules: ~0.09 CPU-s of JSON
# to parse), shared by the process's sessions; the Spark worker daemon fills it before it
# forks (preload_models), so a worker's first client costs ~0.01 s.
_LOADER: list[Any] = []


def parse_timestamp(value: Any) -> Any:
    """botocore's timestamp parser, without dateutil for the two forms S3 sends: ISO 8601
    (``2026-11-24T12:17:01.000Z``, every key of a listing: dateutil took ~0.2 ms each, two
    CPU-seconds per 10,000 keys listed) and RFC 1123 headers (``Last-Modified`` of a GET).
    The same instant, timezone-aware; anything else goes to botocore's parser."""
    if isinstance(value, str):
        try:
            if value.endswith("Z"):
                return datetime.datetime.fromisoformat(value[:-1]).replace(tzinfo=datetime.UTC)
            if value.endswith(" GMT"):
                return email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            pass
    return botocore.utils.parse_timestamp(value)


def _botocore_session() -> Any:
    core = botocore.session.Session()
    core.get_component("response_parser_factory").set_parser_defaults(
        timestamp_parser=parse_timestamp
    )
    if _LOADER:
        core.register_component("data_loader", _LOADER[0])
    else:
        _LOADER.append(core.get_component("data_loader"))
    return core


def preload_models() -> None:
    """Load what an S3 client needs of botocore's data into the process's loader (no
    credentials looked up, no request, no thread)."""
    _botocore_session().create_client(
        "s3",
        region_name="us-east-1",
        aws_access_key_id="preload",
        aws_secret_access_key="preload",
    )


def _session(settings: S3Settings) -> Any:
    """The default credential chain, or with ``role_arn`` a role assumed with it."""
    if settings.role_arn is None:
        return _botocore_session()
    cache = (
        settings.role_arn,
        settings.external_id,
        settings.role_session_name,
        settings.sts_endpoint_url,
        settings.region,
    )
    with _ROLE_LOCK:
        credentials = _ROLE_CREDENTIALS.get(cache)
        if credentials is None:
            credentials = _assume_role(settings)
            _ROLE_CREDENTIALS[cache] = credentials
    session = _botocore_session()
    session._credentials = credentials  # botocore's way to hand a session refreshable ones
    return session


def credentials(settings: S3Settings) -> Any:
    """botocore's credentials of the chain (or the assumed role), or None: refreshable ones
    renew themselves when :meth:`get_frozen_credentials` is asked near their expiry."""
    return _session(settings).get_credentials()


def _assume_role(settings: S3Settings) -> Any:
    assert settings.role_arn is not None
    base = botocore.session.Session()
    source = base.get_credentials()
    if source is None:
        raise S3UnavailableError(
            f"no AWS credentials found to assume {settings.role_arn}",
            hint="Set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an "
            "instance or container role",
        )

    def sts_client(service: str, **kwargs: Any) -> Any:
        return base.create_client(
            service, endpoint_url=settings.sts_endpoint_url, region_name=settings.region, **kwargs
        )

    extra: dict[str, Any] = {"RoleSessionName": settings.role_session_name}
    if settings.external_id:
        extra["ExternalId"] = settings.external_id
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=sts_client,
        source_credentials=source,
        role_arn=settings.role_arn,
        extra_args=extra,
    )
    credentials = DeferredRefreshableCredentials(
        refresh_using=fetcher.fetch_credentials, method="assume-role"
    )
    try:
        credentials.get_frozen_credentials()  # fail here, naming the role, not at a PUT
    except ClientError as exc:
        raise AccessDeniedError(
            f"cannot assume role {settings.role_arn}: {error_code(exc) or error_status(exc)}",
            hint="Check the role's trust policy (the principal of your credentials, "
            "sts:ExternalId) and s3_external_id",
        ) from None
    except BotoCoreError as exc:
        raise S3UnavailableError(
            f"cannot reach STS to assume role {settings.role_arn}: {type(exc).__name__}",
            hint="Check sts_endpoint_url and the network",
        ) from None
    return credentials
