"""Run settings: one frozen object merged from config file < environment < flags.

This module is the only reader of ``os.environ`` (passed in as a mapping) and of the config
file. Every option is declared once in ``OPTIONS``: its type, its environment variable, its
default and whether it is secret. ``load_settings`` records where each value came from, so
``kafka-archive plan`` can show it.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kafka_archive.archiver.errors import ConfigError
from kafka_archive.archiver.positions import StartPosition, parse_start, parse_timestamp
from kafka_archive.secrets import REDACTED, has_userinfo, is_secret, redact_value, remember

ENV_PREFIX = "KAFKA_ARCHIVE_"
# Offsets per Spark task at most where a partition can be split (archiver.subunits).
DEFAULT_MAX_RECORDS_PER_UNIT = 250_000

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Option:
    name: str
    kind: type
    default: Any = None
    help: str = ""

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option("bootstrap_servers", str, None, "Kafka brokers, HOST:PORT[,HOST:PORT]"),
    Option(
        "endpoint_url", str, None, "S3-compatible endpoint URL (MinIO, Ceph, …); absent means AWS"
    ),
    Option("region", str, None, "S3 region; absent means the standard AWS settings"),
    Option("master", str, "local[*]", "Spark master"),
    Option(
        "job_name",
        str,
        None,
        "names the run: the consumer group kafka-archive.<job>, the Spark application, reports "
        "and metrics; default derived from the topics and targets. The archive's state belongs "
        "to each route (target + topic), not to the job: renaming a job, or adding or removing "
        "a statement, keeps every route's progress",
    ),
    Option(
        "spool_dir",
        str,
        None,
        "local directory for spool files, on the driver and every executor (default: the "
        "system's temporary directory)",
    ),
    Option(
        "schema_registry_url",
        str,
        None,
        "Confluent Schema Registry: values in its Avro wire format are decoded with their "
        "writer schema",
    ),
    Option(
        "s3_max_attempts",
        int,
        8,
        "attempts per S3 request: retries with exponential backoff and full jitter (base 1 s, "
        "cap 20 s) on throttling (503 SlowDown), 5xx and connection errors; past the budget the "
        "run fails (exit 5 or 12) with nothing uncommitted counted as archived",
    ),
    Option(
        "s3_stream_part_mb",
        int,
        None,
        "the part size (N MiB, at least 5; default 16) of objects written in memory, which are "
        "uploaded in parts while they are written (routes without PARTITIONBY or time in the "
        "layout); set, spooled objects (the other routes) stream their parts too instead of "
        "uploading at roll",
    ),
    Option(
        "s3_sse",
        str,
        None,
        "server-side encryption of every object: SSE-S3 (AES256), "
        "SSE-KMS (aws:kms) or DSSE-KMS (aws:kms:dsse); absent means the bucket's default",
    ),
    Option(
        "s3_sse_kms_key_id",
        str,
        None,
        "with SSE-KMS: the KMS key id, alias or ARN (absent: the AWS managed key aws/s3)",
    ),
    Option("s3_bucket_key", bool, None, "with SSE-KMS: use an S3 Bucket Key (fewer KMS calls)"),
    Option(
        "s3_storage_class",
        str,
        None,
        "storage class of archived objects (STANDARD, "
        "STANDARD_IA, ONEZONE_IA, INTELLIGENT_TIERING, GLACIER_IR, GLACIER, DEEP_ARCHIVE, "
        "…); kafka-archive's own small objects stay STANDARD",
    ),
    Option(
        "s3_addressing_style",
        str,
        None,
        "path (https://host/bucket/key), virtual "
        "(https://bucket.host/key) or auto (boto3's choice, the default)",
    ),
    Option(
        "s3_checksum",
        str,
        None,
        "checksum sent with every upload: CRC32 (boto3's "
        "default), CRC32C, CRC64NVME, SHA1, SHA256, or off (only where S3 requires one, "
        "for stores that refuse the others)",
    ),
    Option(
        "s3_acl",
        str,
        None,
        "canned ACL of every object, e.g. bucket-owner-full-control "
        "for a bucket of another account",
    ),
    Option(
        "s3_role_arn",
        str,
        None,
        "assume this IAM role (with the credentials of the "
        "standard AWS chain) for every S3 request, on the driver and every executor",
    ),
    Option(
        "s3_external_id",
        str,
        None,
        "with s3_role_arn: the external id the role's trust policy asks for",
    ),
    Option(
        "s3_role_session_name",
        str,
        "kafka-archive",
        "with s3_role_arn: the session name (shown in CloudTrail)",
    ),
    Option(
        "sts_endpoint_url",
        str,
        None,
        "with s3_role_arn: the STS endpoint (absent: AWS's regional one)",
    ),
    Option(
        "max_open_writers",
        int,
        64,
        "open objects per Spark task at most (PARTITIONBY with many values): past it the least "
        "recently written one is rolled (uploaded) early",
    ),
    Option(
        "max_records_per_unit",
        int,
        DEFAULT_MAX_RECORDS_PER_UNIT,
        "split a partition with more pending offsets than this into Spark tasks of that many, "
        "rounded down to a multiple of flush.count, run in parallel and committed in offset "
        "order; set it above your largest partition's backlog to keep one task per partition",
    ),
    Option(
        "lock_ttl_seconds",
        int,
        900,
        "the target prefix's lease: a dead run's lock expires after it, and a run that cannot "
        "renew it for two thirds of it stops with exit 18",
    ),
    Option(
        "read_timeout_seconds",
        int,
        60,
        "fail a partition read (exit 11) after this long without data",
    ),
    Option(
        "start",
        str,
        "earliest",
        "where a route with no state begins: earliest, latest, an ISO-8601 time, or "
        "group:<consumer-group> (adopt a group's committed offsets). A route with state "
        "(written as its first run starts archiving a partition) ignores it and says so, and a "
        "partition added to a topic after its route began is archived from offset 0, whatever "
        "--start says (what retention deleted of it before it was archived is a gap: exit 16, "
        "--allow-gaps). It applies to what a statement's first run finds: that run pins every "
        "partition it finds (an empty one at 0), so with latest every record produced after it "
        "is archived; a topic that FROM `*` matches after its first run has no pin and begins "
        "at its first record under latest (under a time or a group, where those say). To leave "
        "out an existing topic's history, give it a statement of its own",
    ),
    Option(
        "max_records_per_partition",
        int,
        None,
        "bound a run (backfills): archive at most this many offsets of each partition; the next "
        "run resumes where it stopped",
    ),
    Option(
        "until",
        str,
        None,
        "bound a run (backfills): stop each partition at its first record at or after this "
        "ISO-8601 time; the next run resumes where it stopped",
    ),
    Option(
        "topics",
        str,
        None,
        "for FROM `*`: the topics to archive, comma-separated (fixed at the start of a --follow "
        "session)",
    ),
    Option(
        "topics_regex",
        str,
        None,
        "for FROM `*`: every non-internal topic whose whole name matches (checked at each run "
        "and every 10 s of a --follow session, so new topics join the job)",
    ),
    Option(
        "unsafe_single_writer_without_conditional_writes",
        bool,
        False,
        "run against an S3 endpoint that ignores If-None-Match/If-Match (exit 19 otherwise): no "
        "fencing, so overlapping runs writing a prefix can lose or duplicate records; a warning "
        "per run",
    ),
    Option(
        "jvm_class_cache",
        bool,
        True,
        "local master: start Spark's JVM from a class-data-sharing archive kept in the user's "
        "cache directory (made by the first run, ~70 MB), so that later runs start it at about "
        "half the CPU; submit and non-local masters never use it",
    ),
    Option(
        "allow_gaps",
        bool,
        False,
        "continue past records Kafka deleted before they were archived (the gap is still "
        "reported once and recorded in the partition's state, exit 0) instead of leaving those "
        "partitions where they were and exiting 16",
    ),
)
_BY_NAME = {option.name: option for option in OPTIONS}
# Options kept in S3Settings under another name.
_S3_FIELDS = {
    "s3_sse": "sse",
    "s3_sse_kms_key_id": "sse_kms_key_id",
    "s3_bucket_key": "bucket_key",
    "s3_storage_class": "storage_class",
    "s3_addressing_style": "addressing_style",
    "s3_checksum": "checksum",
    "s3_acl": "acl",
    "s3_role_arn": "role_arn",
    "s3_external_id": "external_id",
    "s3_role_session_name": "role_session_name",
    "sts_endpoint_url": "sts_endpoint_url",
}
_FILE_ONLY = ("kcql", "kafka")


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    bootstrap_servers: str
    properties: tuple[tuple[str, str], ...] = ()

    def client_config(
        self, defaults: Mapping[str, Any], fixed: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A librdkafka config: our defaults, the user's ``-X`` properties over them, and
        last the properties the runtime's correctness depends on (offsets, EOF events)."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers, **defaults}
        config.update(dict(self.properties))
        config.update(fixed)
        return config


SSE_MODES = {
    "SSE-S3": "AES256",
    "AES256": "AES256",
    "SSE-KMS": "aws:kms",
    "AWS:KMS": "aws:kms",
    "DSSE-KMS": "aws:kms:dsse",
    "AWS:KMS:DSSE": "aws:kms:dsse",
}
STORAGE_CLASSES = (
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "DEEP_ARCHIVE",
    "GLACIER_IR",
    "OUTPOSTS",
    "SNOW",
    "EXPRESS_ONEZONE",
)
CHECKSUMS = ("CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256", "OFF")
CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "aws-exec-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
)
ADDRESSING_STYLES = ("auto", "path", "virtual")


@dataclass(frozen=True, slots=True)
class S3Settings:
    endpoint_url: str | None = None
    region: str | None = None
    max_attempts: int = 8
    stream_part_bytes: int | None = None
    sse: str | None = None  # AES256, aws:kms or aws:kms:dsse
    sse_kms_key_id: str | None = None
    bucket_key: bool | None = None
    storage_class: str | None = None
    addressing_style: str | None = None
    checksum: str | None = None  # an algorithm, "OFF", or None for boto3's default
    acl: str | None = None
    role_arn: str | None = None
    external_id: str | None = None
    role_session_name: str = "kafka-archive"
    sts_endpoint_url: str | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a run needs besides the plan. Picklable: it travels to Spark executors."""

    kafka: KafkaSettings
    s3: S3Settings = S3Settings()
    master: str = "local[*]"
    job_name: str | None = None
    spool_dir: str | None = None
    schema_registry_url: str | None = None
    lock_ttl_seconds: int = 900
    read_timeout_seconds: int = 60
    max_open_writers: int = 64
    max_records_per_unit: int = DEFAULT_MAX_RECORDS_PER_UNIT
    start: StartPosition = field(default_factory=StartPosition)
    max_records_per_partition: int | None = None
    until_ms: int | None = None
    topics: str | None = None
    topics_regex: str | None = None
    unsafe_single_writer_without_conditional_writes: bool = False
    allow_gaps: bool = False
    jvm_class_cache: bool = True
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def given(self, name: str) -> bool:
        """Whether the user set an option (anywhere), rather than it taking its default."""
        return any(key == name for key, _ in self.sources)

    def redacted(self) -> dict[str, Any]:
        """The settings for display, with secret values replaced and each value's source."""
        origin = dict(self.sources)
        shown: dict[str, Any] = {}
        for option in OPTIONS:
            value = self._value(option.name)
            if isinstance(value, str):
                value = redact_value(option.name, value)
            shown[option.name] = {"value": value, "source": origin.get(option.name, "default")}
        shown["kafka_properties"] = {
            "value": {k: redact_value(k, v) for k, v in self.kafka.properties},
            "source": origin.get("kafka_properties", "default"),
        }
        return shown

    def secret_values(self) -> tuple[str, ...]:
        """Every secret value these settings hold, for :func:`kafka_archive.secrets.scrub`."""
        values = [v for k, v in self.kafka.properties if is_secret(k)]
        for url in (self.schema_registry_url, self.s3.endpoint_url):
            if url and "@" in url:
                userinfo = url.split("://", 1)[-1].rpartition("@")[0]
                values += [userinfo, userinfo.partition(":")[2]]
        return tuple(v for v in values if v and v != REDACTED)

    def _value(self, name: str) -> Any:
        if name == "bootstrap_servers":
            return self.kafka.bootstrap_servers or None
        if name in ("endpoint_url", "region"):
            return getattr(self.s3, name)
        if name == "s3_max_attempts":
            return self.s3.max_attempts
        if name in _S3_FIELDS:
            return getattr(self.s3, _S3_FIELDS[name])
        if name == "s3_stream_part_mb":
            part = self.s3.stream_part_bytes
            return None if part is None else part // MIB
        if name == "start":
            return str(self.start)
        if name == "until":
            return self.until_ms
        return getattr(self, name)


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """The settings plus the KCQL statements found in the config file (text is the CLI's)."""

    settings: Settings
    statements: tuple[str, ...]


def _coerce(option: Option, value: Any, source: str) -> Any:
    if value is None:
        return None
    if option.kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "yes", "1", "on"):
            return True
        if text in ("false", "no", "0", "off"):
            return False
        raise ConfigError(f"{option.name} from {source} must be true or false, not {value!r}")
    if option.kind is int:
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"{option.name} from {source} must be a whole number, not {value!r}"
            ) from None
        if number <= 0:
            raise ConfigError(f"{option.name} from {source} must be positive, not {number}")
        return number
    if not isinstance(value, str):
        raise ConfigError(f"{option.name} from {source} must be a string, not {value!r}")
    return value


def _unknown(name: str, source: str, known: tuple[str, ...]) -> ConfigError:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"Did you mean {close[0]!r}?" if close else f"Known keys: {', '.join(known)}"
    return ConfigError(f"unknown setting {name!r} in {source}", hint=hint)


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a YAML config file into a mapping; errors name the file and what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.start})",
            hint="Pass the YAML config file (kcql:, bootstrap_servers:, …)",
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    _check_mode(path, data)
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def _holds_secret(data: Mapping[Any, Any]) -> bool:
    """Whether a config file's mapping (its ``kafka:`` section included) holds a secret: a
    value under a secret-looking name (``kafka_archive.secrets``), or a URL with a password."""
    for name, value in data.items():
        if isinstance(value, Mapping):
            if _holds_secret(value):
                return True
        elif value not in (None, "") and is_secret(str(name)):
            return True
        elif isinstance(value, str) and has_userinfo(value):
            userinfo = value.split("://", 1)[-1].split("@", 1)[0]
            if userinfo.partition(":")[2]:
                return True
    return False


def _check_mode(path: Path, data: Mapping[Any, Any]) -> None:
    """Warn (one line) when a config file that holds a secret can be read by its group or
    by everyone: the README asks for mode 0600."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return
    if mode & 0o044 and _holds_secret(data):
        log.warning(
            "config file %s holds a secret and is readable by %s (mode %04o): chmod 600 %s",
            path,
            "everyone" if mode & 0o004 else "its group",
            mode,
            path,
        )


def _statements(value: Any, source: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ConfigError(f"kcql in {source} must be a string or a list of strings")


def _kafka_properties(value: Any, source: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"kafka in {source} must be a mapping of librdkafka properties")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}


def load_settings(
    config_path: Path | None,
    environ: Mapping[str, str],
    flags: Mapping[str, Any],
) -> LoadedConfig:
    """Merge file < environment < flags into Settings, recording each value's source.

    ``flags`` holds only the options the user gave (None means "not given"); the special
    flag ``kafka_properties`` is a mapping of ``-X`` properties, merged over the file's
    ``kafka:`` section.
    """
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    statements: tuple[str, ...] = ()
    kafka_props: dict[str, str] = {}

    if config_path is not None:
        source = f"config file {config_path}"
        data = read_config_file(config_path)
        known = tuple(_BY_NAME) + _FILE_ONLY
        for name, value in data.items():
            if name == "kcql":
                statements = _statements(value, source)
            elif name == "kafka":
                kafka_props.update(_kafka_properties(value, source))
                origin["kafka_properties"] = source
            elif name in _BY_NAME:
                values[name] = _coerce(_BY_NAME[name], value, source)
                origin[name] = source
            else:
                raise _unknown(name, source, known)

    for option in OPTIONS:
        if option.env in environ and environ[option.env] != "":
            source = f"environment {option.env}"
            values[option.name] = _coerce(option, environ[option.env], source)
            origin[option.name] = source

    for name, value in flags.items():
        if value is None:
            continue
        if name == "kafka_properties":
            if value:
                kafka_props.update(value)
                origin["kafka_properties"] = "flag -X"
            continue
        if name not in _BY_NAME:
            raise _unknown(name, "flags", tuple(_BY_NAME))
        values[name] = _coerce(_BY_NAME[name], value, f"flag --{name.replace('_', '-')}")
        origin[name] = f"flag --{name.replace('_', '-')}"

    def get(name: str) -> Any:
        value = values.get(name)
        return _BY_NAME[name].default if value is None else value

    _check_bootstrap(get("bootstrap_servers") or "", origin.get("bootstrap_servers", ""))
    settings = Settings(
        kafka=KafkaSettings(
            bootstrap_servers=get("bootstrap_servers") or "",
            properties=tuple(sorted(kafka_props.items())),
        ),
        s3=_s3_settings(get, origin),
        master=get("master"),
        job_name=get("job_name"),
        spool_dir=get("spool_dir"),
        schema_registry_url=get("schema_registry_url"),
        lock_ttl_seconds=get("lock_ttl_seconds"),
        max_open_writers=get("max_open_writers"),
        max_records_per_unit=get("max_records_per_unit"),
        read_timeout_seconds=get("read_timeout_seconds"),
        start=parse_start(get("start")),
        max_records_per_partition=get("max_records_per_partition"),
        until_ms=parse_timestamp(get("until"), "--until") if get("until") else None,
        topics=get("topics"),
        topics_regex=get("topics_regex"),
        unsafe_single_writer_without_conditional_writes=bool(
            get("unsafe_single_writer_without_conditional_writes")
        ),
        allow_gaps=get("allow_gaps"),
        jvm_class_cache=get("jvm_class_cache"),
        sources=tuple(sorted(origin.items())),
    )
    remember(settings.secret_values())
    return LoadedConfig(settings=settings, statements=statements)


MIB = 1024 * 1024


def _s3_settings(get: Any, origin: Mapping[str, str]) -> S3Settings:
    """The S3 settings, each checked (and normalized) before anything runs."""

    def pick(
        name: str,
        allowed: tuple[str, ...] | dict[str, str],
        value: str | None,
        fold: Any = str.upper,
    ) -> str | None:
        if value is None:
            return None
        key = fold(value.strip())
        if key in allowed:
            return allowed[key] if isinstance(allowed, dict) else str(key)
        choices = ", ".join(dict.fromkeys(allowed))
        raise ConfigError(f"{name} from {origin.get(name)} is {value!r}, not one of: {choices}")

    sse = pick("s3_sse", SSE_MODES, get("s3_sse"))
    key_id, bucket_key = get("s3_sse_kms_key_id"), get("s3_bucket_key")
    if (key_id is not None or bucket_key is not None) and sse not in ("aws:kms", "aws:kms:dsse"):
        given = "s3_sse_kms_key_id" if key_id is not None else "s3_bucket_key"
        raise ConfigError(
            f"{given} from {origin.get(given)} needs s3_sse SSE-KMS",
            hint="Set s3_sse: SSE-KMS (KAFKA_ARCHIVE_S3_SSE=SSE-KMS)",
        )
    role, external = get("s3_role_arn"), get("s3_external_id")
    if role is not None and not re.fullmatch(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+", role):
        raise ConfigError(
            f"s3_role_arn from {origin.get('s3_role_arn')} is not an IAM role ARN",
            hint="Expected arn:aws:iam::<12-digit account>:role/<name>",
        )
    if external is not None and role is None:
        raise ConfigError(f"s3_external_id from {origin.get('s3_external_id')} needs s3_role_arn")
    checksum = pick("s3_checksum", CHECKSUMS, get("s3_checksum"))
    if checksum in ("CRC32C", "CRC64NVME") and importlib.util.find_spec("awscrt") is None:
        raise ConfigError(
            f"s3_checksum {checksum} from {origin.get('s3_checksum')} needs the awscrt package",
            hint="pip install 'botocore[crt]' (on the driver and executors), or use CRC32 or "
            "SHA256",
        )
    for name in ("endpoint_url", "sts_endpoint_url"):
        _check_url(name, get(name), origin.get(name, ""))
    return S3Settings(
        endpoint_url=get("endpoint_url"),
        region=get("region"),
        max_attempts=get("s3_max_attempts"),
        stream_part_bytes=_part_bytes(get("s3_stream_part_mb"), origin),
        sse=sse,
        sse_kms_key_id=key_id,
        bucket_key=bucket_key,
        storage_class=pick("s3_storage_class", STORAGE_CLASSES, get("s3_storage_class")),
        addressing_style=pick(
            "s3_addressing_style", ADDRESSING_STYLES, get("s3_addressing_style"), str.lower
        ),
        checksum=checksum,
        acl=pick("s3_acl", CANNED_ACLS, get("s3_acl"), str.lower),
        role_arn=role,
        external_id=external,
        role_session_name=get("s3_role_session_name"),
        sts_endpoint_url=get("sts_endpoint_url"),
    )


def _check_url(name: str, url: str | None, source: str) -> None:
    """An endpoint must be an http(s) URL with a host (``minio:9000`` without its scheme
    reached botocore, which raised on it)."""
    if url is None:
        return
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = "" if "@" in url else f": {url!r}"  # a password is never quoted
        raise ConfigError(
            f"{name} from {source} is not an http:// or https:// URL with a host{shown}",
            hint="For example http://minio:9000 or https://s3.eu-west-1.amazonaws.com",
        )


def _part_bytes(mb: int | None, origin: Mapping[str, str]) -> int | None:
    if mb is None:
        return None
    if mb < 5:
        raise ConfigError(
            f"s3_stream_part_mb from {origin.get('s3_stream_part_mb')} must be at least 5, "
            f"not {mb}",
            hint="S3 refuses multipart parts smaller than 5 MiB",
        )
    return mb * MIB


def _check_bootstrap(servers: str, source: str) -> None:
    """Refuse a user or password in the bootstrap servers (``user:pass@host:9092``, pasted
    from a URL): Kafka takes none there, and the value would be shown in every error about
    reaching Kafka. The value itself is not quoted."""
    if "@" in servers:
        raise ConfigError(
            f"the bootstrap servers ({source}) hold a user or password (an '@'); Kafka "
            "takes HOST:PORT[,HOST:PORT] there",
            hint="Give the credentials as librdkafka properties, in the config file's kafka: "
            "section (sasl.username, sasl.password; mode 0600) or with -X",
        )


def require_bootstrap(settings: Settings, config_path: Path | None) -> None:
    """Fail, naming every source consulted, when no Kafka bootstrap servers were given."""
    if settings.kafka.bootstrap_servers:
        return
    consulted = ["flag --bootstrap-servers", f"environment {ENV_PREFIX}BOOTSTRAP_SERVERS"]
    if config_path is not None:
        consulted.append(f"config file {config_path} (key bootstrap_servers)")
    raise ConfigError(
        "no Kafka bootstrap servers given",
        hint="Looked in: " + ", ".join(consulted),
    )
