"""A Lenses stream-reactor S3 sink (``connect.s3.kcql`` set): its KCQL kept, its connector
settings carried into each statement's PROPERTIES or a run option, or warned about."""

from __future__ import annotations

from kafka_archive import kcql
from kafka_archive.cli.connector.common import (
    Imported,
    ImportError_,
    Properties,
    carry_common,
    rewrite_properties,
    warn_rest,
)

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

_PADDING_TYPES = {p.value.lower(): p.value for p in kcql.Padding}


def lenses(settings: dict[str, str]) -> Imported:
    """The config file of a Lenses S3 sink (``settings`` is consumed)."""
    result = Imported()
    carry_common(settings, result)
    text = settings.pop("connect.s3.kcql")
    result.config["kcql"] = [s.strip() for s in split_statements(text) if s.strip()]
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
    _codec(settings, result)
    _padding(settings, result)
    _interval(result)
    policy = settings.pop("connect.s3.error.policy", None)
    if policy is not None:
        mapped = {"THROW": "fail", "NOOP": "skip", "RETRY": "fail"}.get(policy.upper(), "fail")
        result.warnings.append(
            f"connect.s3.error.policy={policy}: add "
            f"PROPERTIES('error.policy'='{mapped}') to the statements"
        )
    warn_rest(settings, result)
    return result


def _codec(settings: dict[str, str], result: Imported) -> None:
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

    def change(route: kcql.Route) -> Properties | None:
        fmt = route.format.value
        if fmt not in _LENSES_CODECS:
            result.warnings.append(
                f"connect.s3.compression.codec={codec}: Lenses does not compress {fmt}; "
                f"not carried over for {route.topic}"
            )
            return None
        key, values = _LENSES_CODECS[fmt]
        value = values.get(name)
        stated = dict(route.properties)
        if value is None:
            result.warnings.append(
                f"connect.s3.compression.codec={codec}: Lenses refuses it for {fmt} "
                f"(supported: {', '.join(values)}); not carried over for {route.topic}"
            )
            return None
        if key in stated:
            if stated[key] != value:
                result.warnings.append(
                    f"connect.s3.compression.codec={codec}: the statement of {route.topic} "
                    f"states '{key}'='{stated[key]}', which is kept"
                )
            return None
        if value == _CODEC_DEFAULTS[key]:
            return None
        if key == "store.compression":
            result.warnings.append(
                f"connect.s3.compression.codec={codec}: JSON objects of {route.topic} are "
                "gzipped as Lenses does, named <offset>.json.gz (Lenses names them "
                "<offset>.gz)"
            )
        return (*route.properties, (key, value))

    rewrite_properties(result.config["kcql"], change)


def _interval(result: Imported) -> None:
    """Lenses' flush.interval (stated, or its default of 3600 s) is the wall clock: a backfill
    read in seconds rolls on count and size alone. ``'flush.interval.time'='arrival'`` is
    that here, deterministically: no roll by record time inside a read; --follow holds an
    object back until its first record is an interval old (record time would cut a backfill
    with PARTITIONBY into an object per interval per group: 2,176 for 3,000 records)."""

    def change(route: kcql.Route) -> Properties | None:
        if any(key == "flush.interval.time" for key, _ in route.properties):
            return None
        return (*route.properties, ("flush.interval.time", "arrival"))

    rewrite_properties(result.config["kcql"], change)


def _padding(settings: dict[str, str], result: Imported) -> None:
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

    def change(route: kcql.Route) -> Properties:
        stated = [key for key, _ in route.properties if key.startswith("padding.")]
        if stated:
            raise ImportError_(
                f"connect.s3.padding.strategy={strategy} and the statement of {route.topic}'s "
                f"{stated[0]}: Lenses refuses both (use one or the other)"
            )
        return (*route.properties, ("padding.type", chosen), ("padding.length.offset", str(width)))

    rewrite_properties(result.config["kcql"], change)


def split_statements(text: str) -> list[str]:
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
