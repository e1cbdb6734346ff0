"""Run settings: one frozen object, merged from config file < environment < flags by
:func:`.load.load_settings`. Each option's default is the option table's
(:mod:`.options`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_archive.archiver.config.options import OPTIONS, S3_FIELDS, default
from kafka_archive.archiver.config.positions import StartPosition, parse_start
from kafka_archive.archiver.config.secrets import REDACTED, is_secret, redact_value
from kafka_archive.archiver.core.model import S3Requests

MIB = 1024 * 1024


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


@dataclass(frozen=True, slots=True)
class S3Settings:
    endpoint_url: str | None = default("endpoint_url")
    region: str | None = default("region")
    max_attempts: int = default("s3_max_attempts")
    stream_part_bytes: int | None = None  # s3_stream_part_mb, in bytes
    sse: str | None = default("s3_sse")  # AES256, aws:kms or aws:kms:dsse
    sse_kms_key_id: str | None = default("s3_sse_kms_key_id")
    bucket_key: bool | None = default("s3_bucket_key")
    storage_class: str | None = default("s3_storage_class")
    addressing_style: str | None = default("s3_addressing_style")
    checksum: str | None = default("s3_checksum")  # an algorithm, "OFF", or None: boto3's
    acl: str | None = default("s3_acl")
    role_arn: str | None = default("s3_role_arn")
    external_id: str | None = default("s3_external_id")
    role_session_name: str = default("s3_role_session_name")
    sts_endpoint_url: str | None = default("sts_endpoint_url")


@dataclass(frozen=True, slots=True)
class S3Prices:
    """USD per 1,000 S3 requests of each price (s3_price_put_per_1000 and
    s3_price_get_per_1000), for cost estimates."""

    put_per_1000: float = default("s3_price_put_per_1000")
    get_per_1000: float = default("s3_price_get_per_1000")

    def cost(self, requests: S3Requests) -> float:
        """The estimated price of ``requests`` in USD."""
        return requests.cost(self.put_per_1000, self.get_per_1000)


LIST_PRICES = S3Prices()


def requests_json(requests: S3Requests, prices: S3Prices) -> dict[str, Any]:
    """``s3_requests`` (every type's count, as AWS bills them) and ``s3_cost_usd`` (their
    estimated price) of a JSON document: every command's (run's ``--report``, ``status`` and
    ``verify --output json``)."""
    return {"s3_requests": requests.by_type(), "s3_cost_usd": round(prices.cost(requests), 9)}


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a run needs besides the plan. Picklable: it travels to Spark executors.
    Each option's field takes its default from the option table."""

    kafka: KafkaSettings
    s3: S3Settings = S3Settings()
    master: str = default("master")
    job_name: str | None = default("job_name")
    spool_dir: str | None = default("spool_dir")
    schema_registry_url: str | None = default("schema_registry_url")
    lock_ttl_seconds: int = default("lock_ttl_seconds")
    commit_protocol: str = default("commit_protocol")
    log_vacuum_grace_seconds: int = default("log_vacuum_grace_seconds")
    read_timeout_seconds: int = default("read_timeout_seconds")
    max_open_writers: int = default("max_open_writers")
    max_records_per_unit: int = default("max_records_per_unit")
    start: StartPosition = field(default_factory=lambda: parse_start(default("start")))
    max_records_per_partition: int | None = default("max_records_per_partition")
    until_ms: int | None = None  # until, in ms
    topics: str | None = default("topics")
    topics_regex: str | None = default("topics_regex")
    unsafe_single_writer_without_conditional_writes: bool = default(
        "unsafe_single_writer_without_conditional_writes"
    )
    allow_gaps: bool = default("allow_gaps")
    jvm_class_cache: bool = default("jvm_class_cache")
    s3_price_put_per_1000: float = default("s3_price_put_per_1000")
    s3_price_get_per_1000: float = default("s3_price_get_per_1000")
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def prices(self) -> S3Prices:
        return S3Prices(self.s3_price_put_per_1000, self.s3_price_get_per_1000)

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
        """Every secret value these settings hold, for :func:`.secrets.scrub`."""
        values = [v for k, v in self.kafka.properties if is_secret(k)]
        for url in (self.schema_registry_url, self.s3.endpoint_url):
            if url and "@" in url:
                userinfo = url.split("://", 1)[-1].rpartition("@")[0]
                values += [userinfo, userinfo.partition(":")[2]]
        return tuple(v for v in values if v and v != REDACTED)

    def _value(self, name: str) -> Any:
        if name == "bootstrap_servers":
            return self.kafka.bootstrap_servers or None
        if name in S3_FIELDS:
            return getattr(self.s3, S3_FIELDS[name])
        if name == "s3_stream_part_mb":
            part = self.s3.stream_part_bytes
            return None if part is None else part // MIB
        if name == "start":
            return str(self.start)
        if name == "until":
            return self.until_ms
        return getattr(self, name)
