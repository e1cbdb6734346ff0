"""``kafka-archive import-connector``: an existing Kafka Connect S3 sink configuration (Lenses
stream-reactor or Confluent) as the equivalent kafka-archive config file.

Every setting is either carried over (into KCQL or a run option) or named in a warning that
says why not — nothing is dropped silently. Credentials are never carried over: kafka-archive
takes them only from the AWS credential chain. The KCQL produced is parsed before it is
returned, so an import never yields a config that ``run`` would refuse for its syntax.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from kafka_archive import kcql
from kafka_archive.archiver.config.secrets import has_userinfo, is_secret, strip_userinfo
from kafka_archive.kcql.render import render

# Connect framework settings that need no counterpart (one Spark task per partition, Kafka
# read by librdkafka, values read as bytes).
_CONNECT_NOISE = {
    "connector.class",
    "key.converter",
    "value.converter",
    "header.converter",
    "key.converter.schemas.enable",
    "value.converter.schemas.enable",
    "value.converter.schema.registry.url",
    "key.converter.schema.registry.url",
    "errors.log.enable",
    "errors.log.include.messages",
    "storage.class",
    "schema.generator.class",
    "locale",
}

_CONFLUENT_FORMATS = {
    "io.confluent.connect.s3.format.json.JsonFormat": "JSON",
    "io.confluent.connect.s3.format.avro.AvroFormat": "AVRO",
    "io.confluent.connect.s3.format.parquet.ParquetFormat": "PARQUET",
    "io.confluent.connect.s3.format.bytearray.ByteArrayFormat": "BYTES",
}
_HIVE_PATH = "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"


class ImportError_(ValueError):  # ImportError is a builtin
    """The connector configuration cannot be read or converted."""


@dataclass
class Imported:
    """The config file to write, and what could not be carried over."""

    config: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def yaml(self) -> str:
        return yaml.safe_dump(self.config, sort_keys=False, width=1_000_000, allow_unicode=True)


def load(text: str) -> dict[str, str]:
    """The connector settings from a Connect REST body: ``{"name", "config": {…}}`` or the
    bare config object; or from a Java ``.properties`` file, as connect-standalone takes
    them (any text that does not start with ``{``)."""
    if not text.lstrip().startswith(("{", "[")):
        settings = _properties(text)
        if not settings:
            raise ImportError_("neither a JSON connector config nor a .properties file")
        return settings
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ImportError_(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ImportError_("expected a JSON object of connector settings")
    settings = document.get("config", document)
    if not isinstance(settings, dict):
        raise ImportError_("'config' must be an object of settings")
    out = {str(k): str(v) for k, v in settings.items()}
    if "name" in document and "name" not in out:
        out["name"] = str(document["name"])
    return out


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[str]:
    """The logical lines of a .properties text: comments and blank lines dropped, a line
    ending in an odd number of backslashes joined with the next (its leading blanks
    dropped)."""
    lines: list[str] = []
    pending: str | None = None
    for natural in text.splitlines():
        line = natural.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        joined = line[:-1] if trailing % 2 else line
        pending = joined if pending is None else pending + joined
        if not trailing % 2:
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            escaped = text[i + 1]
            if escaped == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(escaped, escaped))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _properties(text: str) -> dict[str, str]:
    """The settings of a Java .properties text, read as ``java.util.Properties.load`` reads
    them: ``key=value``, ``key: value`` or ``key value``; escapes; continued lines."""
    settings: dict[str, str] = {}
    for line in _logical_lines(text):
        # The key ends at the first unescaped '=', ':' or blank.
        match = re.match(r"((?:\\.|[^=:\s\\])*)[ \t\f]*[=:]?[ \t\f]*(.*)\Z", line, re.S)
        assert match is not None  # the pattern matches any text
        settings[_unescape(match.group(1))] = _unescape(match.group(2))
    return settings


def convert(settings: Mapping[str, str]) -> Imported:
    """Lenses when ``connect.s3.kcql`` is set, Confluent when ``s3.bucket.name`` is."""
    if "connect.s3.kcql" in settings:
        result = _lenses(dict(settings))
    elif "s3.bucket.name" in settings:
        result = _confluent(dict(settings))
    else:
        raise ImportError_(
            "neither a Lenses S3 sink (connect.s3.kcql) nor a Confluent S3 sink "
            "(s3.bucket.name) configuration"
        )
    statements = result.config.get("kcql", [])
    try:
        kcql.parse(";\n".join(statements))
    except kcql.KcqlError as exc:
        raise ImportError_(f"the converted KCQL is not valid: {exc}") from None
    return result


def _common(settings: dict[str, str], result: Imported) -> None:
    name = settings.pop("name", None)
    if name:
        job = re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip("._-")[:128]
        if job:
            result.config["job_name"] = job
    if settings.get("topics", "").strip() and settings.get("topics.regex", "").strip():
        # Connect's SinkConnectorConfig.validate refuses a connector with both.
        raise ImportError_(
            "topics and topics.regex are both set: Kafka Connect refuses such a connector "
            "(keep one)"
        )
    for key in ("topics", "topics.regex"):
        if key in settings:
            result.config[key.replace(".", "_")] = settings.pop(key)
    _registry(settings, result)
    tasks = settings.pop("tasks.max", None)
    if tasks is not None:
        result.warnings.append(
            f"tasks.max={tasks}: not needed; a run has one Spark task per "
            "topic-partition (use --master for more cores)"
        )
    for key in sorted(settings):
        if key in _CONNECT_NOISE:
            settings.pop(key)
        elif is_secret(key):
            settings.pop(key)
            result.warnings.append(f"{key}: credentials are not carried over; {_where(key)}")
        elif _kafka_property(key) in _KAFKA_CARRIED:
            # The connector's own Kafka client (a worker that allows overrides): librdkafka
            # reads these under the same names.
            kafka = result.config.setdefault("kafka", {})
            kafka[_kafka_property(key)] = settings.pop(key)


# Properties of a connector's Kafka consumer that librdkafka takes under the same name.
_KAFKA_CARRIED = {"security.protocol", "sasl.mechanism"}


def _kafka_property(key: str) -> str:
    """``consumer.override.x`` (the connector's consumer, where the worker allows overrides)
    as the client property ``x``; other keys as they are."""
    return key.removeprefix("consumer.override.")


def _where(key: str) -> str:
    """Where a credential the import leaves out goes instead, by what it is for."""
    if key.startswith("consumer.") or key.startswith(("sasl.", "ssl.")):
        return (
            "put the Kafka client's credentials in the config file's kafka: section as "
            "librdkafka properties (sasl.username, sasl.password, ssl.key.password; the file "
            "mode 0600)"
        )
    if "converter" in key or "schema.registry" in key:
        return (
            "the Schema Registry's go in schema_registry_url as https://user:password@host "
            "in the config file (mode 0600)"
        )
    return "kafka-archive uses the AWS credential chain (environment, profile, role)"


def _registry(settings: dict[str, str], result: Imported) -> None:
    """The value converter's Schema Registry: values in Confluent's Avro wire format are
    decoded with it (--schema-registry-url); other registry formats stay bytes."""
    url = settings.pop("value.converter.schema.registry.url", None)
    converter = settings.get("value.converter", "")
    if url is None:
        return
    if not converter.endswith(".AvroConverter"):
        result.warnings.append(
            f"value.converter={converter}: values in its Schema Registry wire format are "
            "archived as bytes (only Avro is decoded): use STOREAS BYTES or the envelope"
        )
        return
    if has_userinfo(url):
        result.warnings.append(
            "value.converter.schema.registry.url: its user:password@ is not carried over; "
            "put the URL with them in the config file yourself (mode 0600)"
        )
        url = strip_userinfo(url)
    result.config["schema_registry_url"] = url


def _rest(settings: dict[str, str], result: Imported) -> None:
    for key in sorted(settings):
        value = settings[key]
        shown = value if value.isprintable() else repr(value)  # one warning, one line
        result.warnings.append(f"{key}={shown}: not carried over (no equivalent)")


_JODA = {"YYYY": "year", "yyyy": "year", "MM": "month", "dd": "day", "HH": "hour"}
_JODA.update({"mm": "minute", "ss": "second"})


def _template_of(path: str) -> str | None:
    """A Confluent ``path.format`` (a Joda pattern: quoted literal text, ``YYYY`` ``MM``
    ``dd`` ``HH`` ``mm`` ``ss``, separators) as the time folders of a layout template
    (``year={year}/month={month}``), or None when it holds anything else."""
    parts: list[str] = []
    for quoted, token, other in re.findall(
        r"'([A-Za-z0-9_=.-]*)'|(YYYY|yyyy|MM|dd|HH|mm|ss)|(.)", path.strip()
    ):
        if token:
            parts.append("{" + _JODA[token] + "}")
        elif other:
            if other not in "/-_=.":
                return None
            parts.append(other)
        else:
            parts.append(quoted)
    middle = "".join(parts).strip("/")
    return middle if middle and "{" in middle else None


def _tolerance(settings: dict[str, str], props: dict[str, str], result: Imported) -> None:
    """Connect's ``errors.tolerance=all`` (records that fail conversion are dropped, or sent
    to ``errors.deadletterqueue.topic.name``) as the route's error policy, said aloud."""
    tolerance = settings.pop("errors.tolerance", None)
    queue = settings.pop("errors.deadletterqueue.topic.name", "").strip()
    for key in [k for k in settings if k.startswith("errors.deadletterqueue.")]:
        settings.pop(key)
    if tolerance != "all":
        return
    if queue:
        props["error.policy"] = "'dead-letter'"
        result.warnings.append(
            f"errors.deadletterqueue.topic.name={queue}: records that cannot be stored go to "
            "dead letters in S3 under the prefix (_dead-letter/), not to a Kafka topic "
            "('error.policy'='dead-letter')"
        )
    else:
        props["error.policy"] = "'skip'"
        result.warnings.append(
            "errors.tolerance=all: records that cannot be stored are skipped and counted "
            "('error.policy'='skip'), as Connect drops them; 'error.policy'='dead-letter' "
            "keeps them in S3 instead"
        )


def _lenses(settings: dict[str, str]) -> Imported:
    result = Imported()
    _common(settings, result)
    text = settings.pop("connect.s3.kcql")
    result.config["kcql"] = [s.strip() for s in _split(text) if s.strip()]
    if not any("`*`" in statement for statement in result.config["kcql"]):
        result.config.pop("topics", None)  # FROM names them; Connect needed them to subscribe
    for source, target in (
        ("connect.s3.aws.region", "region"),
        ("aws.region", "region"),
        ("connect.s3.custom.endpoint", "endpoint_url"),
    ):
        if source in settings:
            result.config[target] = settings.pop(source)
    # Lenses addresses buckets by path unless connect.s3.vhost.bucket=true (stated, as boto3
    # picks per endpoint).
    vhost = settings.pop("connect.s3.vhost.bucket", None)
    if vhost is not None or "endpoint_url" in result.config:
        virtual = (vhost or "false").strip().lower() == "true"
        result.config["s3_addressing_style"] = "virtual" if virtual else "path"
    for key in ("connect.s3.aws.auth.mode",):
        if key in settings:
            result.warnings.append(
                f"{key}={settings.pop(key)}: not needed; boto3 chooses credentials and addressing"
            )
    _lenses_codec(settings, result)
    _lenses_padding(settings, result)
    _lenses_interval(result)
    policy = settings.pop("connect.s3.error.policy", None)
    if policy is not None:
        mapped = {"THROW": "fail", "NOOP": "skip", "RETRY": "fail"}.get(policy.upper(), "fail")
        result.warnings.append(
            f"connect.s3.error.policy={policy}: add "
            f"PROPERTIES('error.policy'='{mapped}') to the statements"
        )
    _rest(settings, result)
    return result


# connect.s3.compression.codec, as Lenses' format writers take it (AvroFormatWriter,
# ParquetFormatWriter, JsonFormatWriter; any other codec of those formats fails its task,
# and its CSV, TEXT and BYTES writers do not compress): per STOREAS, the property that means
# the same here and its value for each codec.
_LENSES_CODECS: dict[str, tuple[str, dict[str, str]]] = {
    "AVRO": (
        "avro.codec",
        {
            "UNCOMPRESSED": "null",
            "SNAPPY": "snappy",
            "BZIP2": "bzip2",
            "ZSTD": "zstandard",
            "DEFLATE": "deflate",
            "XZ": "xz",
        },
    ),
    "PARQUET": (
        "parquet.codec",
        {
            "UNCOMPRESSED": "none",
            "SNAPPY": "snappy",
            "GZIP": "gzip",
            "LZ4": "lz4",
            "BROTLI": "brotli",
            "ZSTD": "zstd",
        },
    ),
    "JSON": ("store.compression", {"UNCOMPRESSED": "none", "GZIP": "gzip"}),
}
# What a statement without the property gets here (nothing to add to say the same).
_CODEC_DEFAULTS = {"avro.codec": "null", "parquet.codec": "snappy", "store.compression": "none"}


def _lenses_codec(settings: dict[str, str], result: Imported) -> None:
    """``connect.s3.compression.codec`` (one for the connector) into each statement's
    PROPERTIES, by its STOREAS; ``connect.s3.compression.level`` has no counterpart."""
    level = settings.pop("connect.s3.compression.level", None)
    if level is not None:
        result.warnings.append(
            f"connect.s3.compression.level={level}: not carried over; the codec's default "
            "level is used"
        )
    codec = settings.pop("connect.s3.compression.codec", None)
    if codec is None:
        return
    name = codec.strip().upper()
    statements: list[str] = result.config["kcql"]
    for i, statement in enumerate(statements):
        try:
            (route,) = kcql.parse(statement).routes
        except (kcql.KcqlError, ValueError):
            continue  # the whole converted text is checked (and its error reported) later
        fmt = route.format.value
        if fmt not in _LENSES_CODECS:
            result.warnings.append(
                f"connect.s3.compression.codec={codec}: Lenses does not compress {fmt}; "
                f"not carried over for {route.topic}"
            )
            continue
        key, values = _LENSES_CODECS[fmt]
        value = values.get(name)
        stated = dict(route.properties)
        if value is None:
            result.warnings.append(
                f"connect.s3.compression.codec={codec}: Lenses refuses it for {fmt} "
                f"(supported: {', '.join(values)}); not carried over for {route.topic}"
            )
        elif key in stated:
            if stated[key] != value:
                result.warnings.append(
                    f"connect.s3.compression.codec={codec}: the statement of {route.topic} "
                    f"states '{key}'='{stated[key]}', which is kept"
                )
        elif value != _CODEC_DEFAULTS[key]:
            props = (*route.properties, (key, value))
            statements[i] = render(dataclasses.replace(route, properties=props))
            if key == "store.compression":
                result.warnings.append(
                    f"connect.s3.compression.codec={codec}: JSON objects of {route.topic} are "
                    "gzipped as Lenses does, named <offset>.json.gz (Lenses names them "
                    "<offset>.gz)"
                )


def _lenses_interval(result: Imported) -> None:
    """Lenses' flush.interval (stated, or its default of 3600 s) is the wall clock: a backfill
    read in seconds rolls on count and size alone. ``'flush.interval.time'='arrival'`` is
    that here, deterministically: no roll by record time inside a read; --follow holds an
    object back until its first record is an interval old (record time would cut a backfill
    with PARTITIONBY into an object per interval per group: 2,176 for 3,000 records)."""
    statements: list[str] = result.config["kcql"]
    for i, statement in enumerate(statements):
        try:
            (route,) = kcql.parse(statement).routes
        except (kcql.KcqlError, ValueError):
            continue  # the whole converted text is checked (and its error reported) later
        if any(key == "flush.interval.time" for key, _ in route.properties):
            continue
        props = (*route.properties, ("flush.interval.time", "arrival"))
        statements[i] = render(dataclasses.replace(route, properties=props))


_PADDING_TYPES = {p.value.lower(): p.value for p in kcql.Padding}


def _lenses_padding(settings: dict[str, str], result: Imported) -> None:
    """``connect.s3.padding.strategy`` (and ``.length``, default 12) into each statement's
    ``padding.*``, as stream-reactor's PaddingService reads them: the connector's strategy
    pads the offset alone, with '0'; without a strategy the length does nothing; a statement
    with ``padding.*`` properties beside the connector's strategy stops the connector."""
    strategy = settings.pop("connect.s3.padding.strategy", "").strip()
    length = settings.pop("connect.s3.padding.length", "").strip()
    chosen = _PADDING_TYPES.get(strategy.lower()) if strategy else None
    if strategy and chosen is None:
        result.warnings.append(
            f"connect.s3.padding.strategy={strategy}: not LeftPad, RightPad or NoOp, which "
            "Lenses ignores; offsets are padded to 12 digits (the default)"
        )
    if chosen is None:
        if length and int(length) >= 0:
            result.warnings.append(
                f"connect.s3.padding.length={length}: no effect without "
                "connect.s3.padding.strategy (as in Lenses); offsets are padded to 12 digits"
            )
        return
    width = int(length) if length and int(length) >= 0 else 12
    statements: list[str] = result.config["kcql"]
    for i, statement in enumerate(statements):
        try:
            (route,) = kcql.parse(statement).routes
        except (kcql.KcqlError, ValueError):
            continue  # the whole converted text is checked (and its error reported) later
        stated = [key for key, _ in route.properties if key.startswith("padding.")]
        if stated:
            raise ImportError_(
                f"connect.s3.padding.strategy={strategy} and the statement of {route.topic}'s "
                f"{stated[0]}: Lenses refuses both (use one or the other)"
            )
        props = (
            *route.properties,
            ("padding.type", chosen),
            ("padding.length.offset", str(width)),
        )
        statements[i] = render(dataclasses.replace(route, properties=props))


def _split(text: str) -> list[str]:
    """KCQL statements split at ``;`` outside quotes and back-ticks."""
    out: list[str] = []
    current: list[str] = []
    quote = ""
    for char in text:
        if quote:
            if char == quote:
                quote = ""
        elif char in "'`":
            quote = char
        elif char == ";":
            out.append("".join(current))
            current = []
            continue
        current.append(char)
    out.append("".join(current))
    return out


def _confluent(settings: dict[str, str]) -> Imported:
    result = Imported()
    _common(settings, result)
    bucket = settings.pop("s3.bucket.name")
    prefix = settings.pop("topics.dir", "topics").strip("/")
    for source, target in (
        ("s3.region", "region"),
        ("store.url", "endpoint_url"),
        ("s3.ssea.name", "s3_sse"),
        ("s3.sse.kms.key.id", "s3_sse_kms_key_id"),
        ("s3.acl.canned", "s3_acl"),
        ("sts.role.arn", "s3_role_arn"),
        ("sts.role.external.id", "s3_external_id"),
        ("sts.role.session.name", "s3_role_session_name"),
    ):
        if settings.get(source):
            result.config[target] = settings.pop(source)
        settings.pop(source, None)  # empty: Confluent's "not set"
    if settings.pop("s3.path.style.access.enabled", "").lower() == "true":
        result.config["s3_addressing_style"] = "path"
    fmt_class = settings.pop("format.class", "io.confluent.connect.s3.format.json.JsonFormat")
    fmt = _CONFLUENT_FORMATS.get(fmt_class)
    if fmt is None:
        result.warnings.append(f"format.class={fmt_class}: unknown; JSON is used")
        fmt = "JSON"
    # Confluent pads the offset in <topic>+<partition>+<offset> to 10 digits by default.
    props: dict[str, str] = {
        "layout": "'confluent'",
        "padding.length.offset": settings.pop("filename.offset.zero.pad.width", "10").strip(),
    }
    partition_by: list[str] = []
    if "flush.size" in settings:
        props["flush.count"] = settings.pop("flush.size")
    if "rotate.interval.ms" in settings:
        props["flush.interval"] = str(
            max(1, math.ceil(int(settings.pop("rotate.interval.ms")) / 1000))
        )
    if "rotate.schedule.interval.ms" in settings:
        result.warnings.append(
            f"rotate.schedule.interval.ms={settings.pop('rotate.schedule.interval.ms')}"
            ": wall-clock rotation is not deterministic; flush.interval (record "
            "time) and --follow cover it"
        )
    codec = settings.pop("s3.compression.type", "none")
    if codec == "gzip" and fmt in ("JSON", "BYTES"):
        props["store.compression"] = "'gzip'"
    elif codec not in ("none", ""):
        result.warnings.append(f"s3.compression.type={codec}: not carried over for {fmt}")
    for source, target in (("avro.codec", "avro.codec"), ("parquet.codec", "parquet.codec")):
        if source in settings:
            props[target] = f"'{settings.pop(source)}'"
    partitioner = settings.pop(
        "partitioner.class", "io.confluent.connect.storage.partitioner.DefaultPartitioner"
    ).rsplit(".", 1)[-1]
    if partitioner == "FieldPartitioner":
        fields = settings.pop("partition.field.name", "")
        partition_by = [f"_value.{f.strip()}" for f in fields.split(",") if f.strip()]
    elif partitioner in ("TimeBasedPartitioner", "HourlyPartitioner", "DailyPartitioner"):
        path = settings.pop(
            "path.format",
            _HIVE_PATH if partitioner != "DailyPartitioner" else "'year'=YYYY/'month'=MM/'day'=dd",
        )
        middle = _template_of(path)
        if path.replace(" ", "") == _HIVE_PATH:
            props["layout"] = "'hive'"
        elif middle is not None:  # Confluent's keys: <dir>/<topic>/<path>/<topic>+<p>+<offset>
            props["layout"] = "'template'"
            props["layout.template"] = (
                f"'{{topic}}/{middle}/{{topic}}+{{partition}}+{{offset}}.{{ext}}'"
            )
        else:
            result.warnings.append(
                f"path.format={path}: only quoted text and YYYY, MM, dd, HH, mm, ss map to a "
                "layout; the layout is hive (year=/month=/day=/hour=) instead: set "
                "'layout.template' by hand to keep the connector's keys"
            )
            props["layout"] = "'hive'"
        settings.pop("partition.duration.ms", None)
        extractor = settings.pop("timestamp.extractor", "Wallclock")
        field = settings.pop("timestamp.field", None)
        if extractor == "RecordField" and field:
            props["partition.time.field"] = f"'_value.{field.strip()}'"
        elif extractor != "Record":
            result.warnings.append(
                f"timestamp.extractor={extractor}: kafka-archive partitions by "
                "the record timestamp (Record), which makes re-runs "
                "deterministic"
            )
        if "timezone" in settings:
            props["partition.timezone"] = f"'{settings.pop('timezone')}'"
    elif partitioner != "DefaultPartitioner":
        result.warnings.append(
            f"partitioner.class={partitioner}: not supported; the default layout is used"
        )
    compatibility = settings.pop("schema.compatibility", "NONE").upper()
    if compatibility in ("BACKWARD", "FORWARD", "FULL") and fmt in ("AVRO", "PARQUET"):
        props["schema.compatibility"] = f"'{compatibility}'"
    elif compatibility != "NONE":
        result.warnings.append(
            f"schema.compatibility={compatibility}: applies to AVRO and "
            f"PARQUET; {fmt} objects have no schema to evolve"
        )
    _tolerance(settings, props, result)
    behavior = settings.pop("behavior.on.null.values", None)
    if behavior is not None and behavior != "fail":
        result.warnings.append(
            f"behavior.on.null.values={behavior}: tombstones follow "
            "error.policy (or are kept with 'store.envelope'=true)"
        )
    target = f"`{bucket}:{prefix}`" if prefix else f"`{bucket}`"
    tail = ""
    if partition_by:
        tail += " PARTITIONBY " + ", ".join(partition_by)
    tail += f" STOREAS `{fmt}`"
    tail += " PROPERTIES(" + ", ".join(f"'{k}'={v}" for k, v in props.items()) + ")"
    topics = result.config.get("topics")
    if topics and "topics_regex" not in result.config:
        names = [t.strip() for t in topics.split(",") if t.strip()]
        del result.config["topics"]
        result.config["kcql"] = [f"INSERT INTO {target} SELECT * FROM `{t}`{tail}" for t in names]
    else:
        result.config["kcql"] = [f"INSERT INTO {target} SELECT * FROM `*`{tail}"]
    _rest(settings, result)
    return result
