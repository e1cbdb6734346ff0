"""Settings loaded: the config file, the environment and the flags merged (file <
environment < flags) into :class:`.settings.Settings`, each value checked and its source
recorded, so ``kafka-archive plan`` can show it.

This module is the only reader of ``os.environ`` (passed in as a mapping) and of the config
file.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import math
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kafka_archive.archiver.config.options import (
    ADDRESSING_STYLES,
    BY_NAME,
    CANNED_ACLS,
    CHECKSUMS,
    COMMIT_PROTOCOLS,
    ENV_PREFIX,
    FILE_ONLY,
    OPTIONS,
    SSE_MODES,
    STORAGE_CLASSES,
    Option,
)
from kafka_archive.archiver.config.positions import parse_start, parse_timestamp
from kafka_archive.archiver.config.secrets import has_userinfo, is_secret, remember
from kafka_archive.archiver.config.settings import MIB, KafkaSettings, S3Settings, Settings
from kafka_archive.archiver.core.errors import ConfigError

log = logging.getLogger(__name__)


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
    if option.kind is float:
        return _price(option, value, source)
    if not isinstance(value, str):
        raise ConfigError(f"{option.name} from {source} must be a string, not {value!r}")
    return value


def _price(option: Option, value: Any, source: str) -> float:
    """A number of zero or more (a price), from a number or its text."""
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise ConfigError(
            f"{option.name} from {source} must be a number of zero or more, not {value!r}",
            hint="A price in USD per 1,000 requests, e.g. 0.005",
        )
    return number


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
    value under a secret-looking name (:mod:`.secrets`), or a URL with a password."""
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
    given = _Given()
    if config_path is not None:
        given.read_file(config_path)
    given.read_environment(environ)
    given.read_flags(flags)
    settings = given.settings()
    remember(settings.secret_values())
    return LoadedConfig(settings=settings, statements=given.statements)


@dataclass
class _Given:
    """What the user gave, merged so far: each option's value and its source, the KCQL
    statements (file only) and the librdkafka properties."""

    values: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    statements: tuple[str, ...] = ()
    kafka_props: dict[str, str] = field(default_factory=dict)

    def read_file(self, config_path: Path) -> None:
        source = f"config file {config_path}"
        data = read_config_file(config_path)
        known = tuple(BY_NAME) + FILE_ONLY
        for name, value in data.items():
            if name == "kcql":
                self.statements = _statements(value, source)
            elif name == "kafka":
                self.kafka_props.update(_kafka_properties(value, source))
                self.origin["kafka_properties"] = source
            elif name in BY_NAME:
                self.values[name] = _coerce(BY_NAME[name], value, source)
                self.origin[name] = source
            else:
                raise _unknown(name, source, known)

    def read_environment(self, environ: Mapping[str, str]) -> None:
        for option in OPTIONS:
            if option.env in environ and environ[option.env] != "":
                source = f"environment {option.env}"
                self.values[option.name] = _coerce(option, environ[option.env], source)
                self.origin[option.name] = source

    def read_flags(self, flags: Mapping[str, Any]) -> None:
        for name, value in flags.items():
            if value is None:
                continue
            if name == "kafka_properties":
                if value:
                    self.kafka_props.update(value)
                    self.origin["kafka_properties"] = "flag -X"
                continue
            if name not in BY_NAME:
                raise _unknown(name, "flags", tuple(BY_NAME))
            source = f"flag --{name.replace('_', '-')}"
            self.values[name] = _coerce(BY_NAME[name], value, source)
            self.origin[name] = source

    def get(self, name: str) -> Any:
        """The option's value as given, else its default."""
        value = self.values.get(name)
        return BY_NAME[name].default if value is None else value

    def settings(self) -> Settings:
        """The settings, each checked (and normalized) before anything runs."""
        get, origin = self.get, self.origin
        _check_bootstrap(get("bootstrap_servers") or "", origin.get("bootstrap_servers", ""))
        return Settings(
            kafka=KafkaSettings(
                bootstrap_servers=get("bootstrap_servers") or "",
                properties=tuple(sorted(self.kafka_props.items())),
            ),
            s3=_s3_settings(get, origin),
            master=get("master"),
            job_name=get("job_name"),
            spool_dir=get("spool_dir"),
            schema_registry_url=get("schema_registry_url"),
            lock_ttl_seconds=get("lock_ttl_seconds"),
            commit_protocol=_commit_protocol(get("commit_protocol"), origin),
            log_vacuum_grace_seconds=get("log_vacuum_grace_seconds"),
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
            s3_price_put_per_1000=get("s3_price_put_per_1000"),
            s3_price_get_per_1000=get("s3_price_get_per_1000"),
            sources=tuple(sorted(origin.items())),
        )


def _commit_protocol(value: str, origin: Mapping[str, str]) -> str:
    """``commit_protocol``, one of :data:`.options.COMMIT_PROTOCOLS` (case and spaces aside)."""
    folded = value.strip().lower()
    if folded not in COMMIT_PROTOCOLS:
        raise ConfigError(
            f"commit_protocol from {origin.get('commit_protocol')} is {value!r}, not one of: "
            + ", ".join(COMMIT_PROTOCOLS)
        )
    return folded


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
