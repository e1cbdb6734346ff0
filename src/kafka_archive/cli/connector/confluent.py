"""A Confluent S3 sink (``s3.bucket.name`` set): one statement per topic (or ``FROM `*``` for
``topics.regex``), its storage, format, rolling, compression, partitioner and schema
settings carried into a run option or the statement's PROPERTIES, or warned about."""

from __future__ import annotations

import math
import re

from kafka_archive.cli.connector.common import Imported, carry_common, carry_tolerance, warn_rest

_CONFLUENT_FORMATS = {
    "io.confluent.connect.s3.format.json.JsonFormat": "JSON",
    "io.confluent.connect.s3.format.avro.AvroFormat": "AVRO",
    "io.confluent.connect.s3.format.parquet.ParquetFormat": "PARQUET",
    "io.confluent.connect.s3.format.bytearray.ByteArrayFormat": "BYTES",
}
_HIVE_PATH = "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"
_TIME_PARTITIONERS = ("TimeBasedPartitioner", "HourlyPartitioner", "DailyPartitioner")

# The S3 settings that are run options here, under another name.
_STORAGE = (
    ("s3.region", "region"),
    ("store.url", "endpoint_url"),
    ("s3.ssea.name", "s3_sse"),
    ("s3.sse.kms.key.id", "s3_sse_kms_key_id"),
    ("s3.acl.canned", "s3_acl"),
    ("sts.role.arn", "s3_role_arn"),
    ("sts.role.external.id", "s3_external_id"),
    ("sts.role.session.name", "s3_role_session_name"),
)

_JODA = {"YYYY": "year", "yyyy": "year", "MM": "month", "dd": "day", "HH": "hour"}
_JODA.update({"mm": "minute", "ss": "second"})


def confluent(settings: dict[str, str]) -> Imported:
    """The config file of a Confluent S3 sink (``settings`` is consumed)."""
    result = Imported()
    carry_common(settings, result)
    bucket = settings.pop("s3.bucket.name")
    prefix = settings.pop("topics.dir", "topics").strip("/")
    _storage(settings, result)
    fmt = _format(settings, result)
    # Confluent pads the offset in <topic>+<partition>+<offset> to 10 digits by default.
    props: dict[str, str] = {
        "layout": "'confluent'",
        "padding.length.offset": settings.pop("filename.offset.zero.pad.width", "10").strip(),
    }
    _rolling(settings, result, props)
    _compression(settings, result, props, fmt)
    partition_by = _partitioning(settings, result, props)
    _compatibility(settings, result, props, fmt)
    carry_tolerance(settings, props, result)
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
    _statements(result, target, tail)
    warn_rest(settings, result)
    return result


def _storage(settings: dict[str, str], result: Imported) -> None:
    """Region, endpoint, encryption, ACL, role and addressing: run options."""
    for source, target in _STORAGE:
        if settings.get(source):
            result.config[target] = settings.pop(source)
        settings.pop(source, None)  # empty: Confluent's "not set"
    if settings.pop("s3.path.style.access.enabled", "").lower() == "true":
        result.config["s3_addressing_style"] = "path"


def _format(settings: dict[str, str], result: Imported) -> str:
    """``format.class`` as the STOREAS format (JSON, Confluent's default, for one unknown)."""
    fmt_class = settings.pop("format.class", "io.confluent.connect.s3.format.json.JsonFormat")
    fmt = _CONFLUENT_FORMATS.get(fmt_class)
    if fmt is None:
        result.warnings.append(f"format.class={fmt_class}: unknown; JSON is used")
        fmt = "JSON"
    return fmt


def _rolling(settings: dict[str, str], result: Imported, props: dict[str, str]) -> None:
    """``flush.size`` and ``rotate.interval.ms`` as flush.count and flush.interval."""
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


def _compression(
    settings: dict[str, str], result: Imported, props: dict[str, str], fmt: str
) -> None:
    """``s3.compression.type`` (gzip of JSON and BYTES objects) and the Avro and Parquet
    codecs."""
    codec = settings.pop("s3.compression.type", "none")
    if codec == "gzip" and fmt in ("JSON", "BYTES"):
        props["store.compression"] = "'gzip'"
    elif codec not in ("none", ""):
        result.warnings.append(f"s3.compression.type={codec}: not carried over for {fmt}")
    for source, target in (("avro.codec", "avro.codec"), ("parquet.codec", "parquet.codec")):
        if source in settings:
            props[target] = f"'{settings.pop(source)}'"


def _partitioning(settings: dict[str, str], result: Imported, props: dict[str, str]) -> list[str]:
    """``partitioner.class``: a FieldPartitioner's fields (the PARTITIONBY returned), a
    time-based partitioner's folders as the layout, the default layout for the rest."""
    partitioner = settings.pop(
        "partitioner.class", "io.confluent.connect.storage.partitioner.DefaultPartitioner"
    ).rsplit(".", 1)[-1]
    if partitioner == "FieldPartitioner":
        fields = settings.pop("partition.field.name", "")
        return [f"_value.{f.strip()}" for f in fields.split(",") if f.strip()]
    if partitioner in _TIME_PARTITIONERS:
        _time_partitioning(settings, result, props, partitioner)
    elif partitioner != "DefaultPartitioner":
        result.warnings.append(
            f"partitioner.class={partitioner}: not supported; the default layout is used"
        )
    return []


def _time_partitioning(
    settings: dict[str, str], result: Imported, props: dict[str, str], partitioner: str
) -> None:
    """``path.format`` as the hive layout or a layout template, the time extractor's field
    and the timezone."""
    path = settings.pop(
        "path.format",
        _HIVE_PATH if partitioner != "DailyPartitioner" else "'year'=YYYY/'month'=MM/'day'=dd",
    )
    middle = template_of(path)
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


def template_of(path: str) -> str | None:
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


def _compatibility(
    settings: dict[str, str], result: Imported, props: dict[str, str], fmt: str
) -> None:
    """``schema.compatibility``: the schema evolution AVRO and PARQUET objects allow."""
    compatibility = settings.pop("schema.compatibility", "NONE").upper()
    if compatibility in ("BACKWARD", "FORWARD", "FULL") and fmt in ("AVRO", "PARQUET"):
        props["schema.compatibility"] = f"'{compatibility}'"
    elif compatibility != "NONE":
        result.warnings.append(
            f"schema.compatibility={compatibility}: applies to AVRO and "
            f"PARQUET; {fmt} objects have no schema to evolve"
        )


def _statements(result: Imported, target: str, tail: str) -> None:
    """One statement per topic of ``topics``, else ``FROM `*``` (``topics.regex``)."""
    topics = result.config.get("topics")
    if topics and "topics_regex" not in result.config:
        names = [t.strip() for t in topics.split(",") if t.strip()]
        del result.config["topics"]
        result.config["kcql"] = [f"INSERT INTO {target} SELECT * FROM `{t}`{tail}" for t in names]
    else:
        result.config["kcql"] = [f"INSERT INTO {target} SELECT * FROM `*`{tail}"]
