"""Canonical rendering: the identity fixture, a hypothesis round trip, and the JSON contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.kcql import Format, Route, Source

FIXTURE = Path(__file__).parent / "fixtures" / "identity.kcql"
IDENTITY = [
    line for line in FIXTURE.read_text().splitlines() if line.strip() and not line.startswith("--")
]


def test_identity_fixture_has_lines() -> None:
    assert len(IDENTITY) >= 30


@pytest.mark.parametrize("line", IDENTITY)
def test_identity(line: str) -> None:
    (route,) = kcql.parse(line).routes
    assert kcql.render(route) == line


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        (
            "insert into my-bucket:archive select * from orders storeas avro "
            "with_flush_count = 5000",
            "INSERT INTO my-bucket:archive SELECT * FROM orders STOREAS `AVRO` "
            "PROPERTIES('flush.count'=5000)",
        ),
        (
            "INSERT INTO `bkt`:`p` SELECT a AS a, b FROM `orders` NOPARTITION",
            "INSERT INTO bkt:p SELECT _value.a AS a, _value.b FROM orders STOREAS `JSON`",
        ),
        (
            "INSERT INTO bkt SELECT * FROM t PARTITIONBY x WITHPARTITIONER = KeysAndValues "
            "PROPERTIES('padding.type'=noop, 'padding.char'='x')",
            "INSERT INTO bkt SELECT * FROM t PARTITIONBY _value.x STOREAS `JSON` "
            "PROPERTIES('padding.char'='x', 'padding.type'='NoOp', 'partition.include.keys'=true)",
        ),
    ],
)
def test_render_is_canonical(text: str, canonical: str) -> None:
    (route,) = kcql.parse(text).routes
    assert kcql.render(route) == canonical


def test_plan_to_dict_contract() -> None:
    plan = kcql.parse(
        "INSERT INTO my-bucket:archive SELECT id, _header.country AS c FROM orders "
        "PARTITIONBY _header.country STOREAS `AVRO` WITH_FLUSH_COUNT = 5000;"
        "INSERT INTO my-bucket SELECT * FROM `*`"
    )
    data = kcql.plan_to_dict(plan)
    assert json.loads(json.dumps(data)) == data
    first, second = data["routes"]
    assert first == {
        "topic": "orders",
        "bucket": "my-bucket",
        "prefix": "archive",
        "fields": [
            {"path": "_value.id", "alias": "id"},
            {"path": "_header.country", "alias": "c"},
        ],
        "partition_by": ["_header.country"],
        "include_keys": True,
        "format": "AVRO",
        "flush": {"count": 5000, "size": 500000000, "interval_seconds": 3600},
        "padding": {"type": "LeftPad", "char": "0", "offset": 12, "partition": 0},
        "envelope": None,
        "compression": "none",
        "gzip_block_bytes": None,
        "avro_codec": "null",
        "parquet_codec": "snappy",
        "parquet_row_group_records": 10000,
        "avro_schema_file": None,
        "avro_schema_subject": None,
        "avro_schema_version": None,
        "schema_compatibility": "NONE",
        "transform": None,
        "error_policy": "fail",
        "layout": {
            "kind": "lenses",
            "template": None,
            "key_suffix": "",
            "timezone": "UTC",
            "time_field": None,
        },
        "iceberg": None,
        "properties": {"flush.count": "5000"},
        "kcql": "INSERT INTO my-bucket:archive SELECT _value.id, _header.country AS c FROM orders "
        "PARTITIONBY _header.country STOREAS `AVRO` PROPERTIES('flush.count'=5000)",
    }
    assert second["fields"] == "*"
    assert second["topic"] == "*"
    assert second["prefix"] == ""
    assert kcql.parse(second["kcql"]).routes == (plan.routes[1],)


def test_plan_to_dict_shows_compiled_values() -> None:
    (route,) = kcql.plan_to_dict(
        kcql.parse(
            "INSERT INTO bkt SELECT * FROM t PARTITIONBY _header.c STOREAS JSON "
            "PROPERTIES('layout.template'='{prefix}/{field:c}/{topic}/{partition}-{offset}.{ext}', "
            "'store.compression'='GZIP', 'error.policy'='skip', 'padding.length.partition'='12', "
            "'partition.time.field'='created', 'store.envelope'=true)"
        )
    )["routes"]
    assert route["layout"] == {
        "kind": "template",
        "template": "{field:_header.c}/{topic}/{partition}-{offset}.{ext}",
        "key_suffix": "",
        "timezone": "UTC",
        "time_field": "_value.created",
    }
    assert route["padding"] == {"type": "LeftPad", "char": "0", "offset": 0, "partition": 12}
    assert (route["compression"], route["error_policy"]) == ("gzip", "skip")
    assert route["envelope"] == {"key": True, "value": True, "headers": True, "metadata": True}


# -- hypothesis: any statement parse accepts renders to one that parses back the same --------

KEYWORDS = ("select", "from", "as", "into", "insert", "storeas", "properties", "nopartition")
_SIMPLE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

names = st.one_of(
    st.text(alphabet=_SIMPLE, min_size=1, max_size=8).filter(lambda s: not s[0].isdigit()),
    st.sampled_from(KEYWORDS),
    st.text(
        alphabet=st.characters(blacklist_characters="`\n", blacklist_categories=("Cs",)),
        min_size=1,
        max_size=8,
    ),
)


@st.composite
def written_name(draw: st.DrawFn, name: str | None = None) -> str:
    """A name as a user might write it: bare when the simple form allows, else back-ticked."""
    text = draw(names) if name is None else name
    simple = all(c in _SIMPLE for c in text) and not text[0].isdigit()
    if simple and text.lower() not in KEYWORDS and not draw(st.booleans()):
        return text
    return f"`{text}`"


@st.composite
def value_path(draw: st.DrawFn) -> str:
    segments = draw(st.lists(written_name(), min_size=1, max_size=3))
    first = segments[0]
    if first.startswith("_") or first.startswith("`") or draw(st.booleans()):
        return ".".join(["_value", *segments])
    return ".".join(segments)


@st.composite
def select_path(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["value", "key", "header", "meta", "whole"]))
    if kind == "value":
        return draw(value_path())
    if kind == "key":
        return ".".join(["_key", *draw(st.lists(written_name(), max_size=2))])
    if kind == "header":
        return ".".join(["_header", *draw(st.lists(written_name(), min_size=1, max_size=2))])
    if kind == "meta":
        return draw(st.sampled_from(["_topic", "_partition", "_offset", "_timestamp"]))
    return "_value"


def _partition_source(path: str) -> str:
    """What a PARTITIONBY entry names: ``A`` and ``_value.A`` are one entry (the compiler
    refuses the second as a duplicate)."""
    plain = path.replace("`", "")
    return plain[len("_value.") :] if plain.lower().startswith("_value.") else plain


@st.composite
def partition_path(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["select", "date"]))
    if kind == "date":
        # Runs of letters Java allows (at most 2 of M, d, H, …), joined by separators.
        runs = st.sampled_from(
            ["uuuu", "yyyy", "uu", "MM", "M", "LL", "dd", "d", "HH", "h", "mm", "ss", "Q", "DDD"]
        )
        pieces = draw(st.lists(runs, min_size=1, max_size=3))
        seps = [draw(st.sampled_from(["-", "_", "."])) for _ in pieces[1:]]
        joined = zip(seps, pieces[1:], strict=True)
        pattern = pieces[0] + "".join(sep + piece for sep, piece in joined)
        return "_date." + draw(written_name(pattern))
    path = draw(select_path())
    return "_key" if path in ("_offset", "_timestamp") else path


buckets = st.from_regex(r"[a-z0-9]([a-z0-9]|-(?!-)){1,20}[a-z0-9]", fullmatch=True).filter(
    lambda b: not b.startswith(("xn-", "sthree-", "amzn-")) and not b.endswith("-s3alias")
)
prefix_segments = st.text(
    alphabet=st.characters(
        blacklist_characters="`/\n", blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn")
    ),
    min_size=1,
    max_size=6,
).filter(lambda s: s not in (".", ".."))
topics = st.one_of(
    st.just("*"),
    st.text(alphabet=_SIMPLE + ".-+", min_size=1, max_size=12),
    st.text(
        alphabet=st.characters(
            blacklist_characters="`", blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Z")
        ),
        min_size=1,
        max_size=12,
    ),
).filter(lambda t: t not in (".", "..") and not any(c.isspace() for c in t))
# In Lenses' order of the WITH_FLUSH_* clauses.
FLUSH = {
    "flush.size": "WITH_FLUSH_SIZE",
    "flush.interval": "WITH_FLUSH_INTERVAL",
    "flush.count": "WITH_FLUSH_COUNT",
}


def quote(text: str) -> str:
    escaped = text.replace("'", "''")
    return f"'{escaped}'"


@st.composite
def statements(draw: st.DrawFn) -> str:
    bucket = draw(buckets)
    prefix = "/".join(draw(st.lists(prefix_segments, max_size=3)))
    target = f"{bucket}:{prefix}" if prefix else bucket
    bare_target = (
        all(c in _SIMPLE + ".-:/=+" for c in target) and "--" not in target and ":" not in prefix
    )
    if not bare_target or draw(st.booleans()):
        target = f"`{target}`"
    fmt = draw(st.sampled_from(list(Format)))
    structured = fmt not in (Format.TEXT, Format.BYTES)
    if structured and draw(st.booleans()):
        paths = draw(st.lists(select_path(), min_size=1, max_size=4))
        fields = ", ".join(
            f"{p} AS `alias{i}`" if draw(st.booleans()) else f"{p} AS a{i}"
            for i, p in enumerate(paths)
        )
    else:
        fields = "*"
    topic = draw(topics)
    bare_topic = all(c in _SIMPLE + ".-+" for c in topic) and "--" not in topic
    if not bare_topic or topic.lower() in KEYWORDS or draw(st.booleans()):
        topic = f"`{topic}`"
    parts = [f"INSERT INTO {target}", f"SELECT {fields}", f"FROM {topic}"]
    partition = draw(st.lists(partition_path(), max_size=3, unique_by=_partition_source))
    if not structured:
        not_value = ("_key", "_header.", "_topic", "_partition", "_date.")
        partition = [p for p in partition if p.startswith(not_value)]
    if partition:
        parts.append("PARTITIONBY " + ", ".join(partition))
    elif draw(st.booleans()):
        parts.append("NOPARTITION")
    if fmt is not Format.JSON or draw(st.booleans()):
        parts.append("STOREAS " + draw(st.sampled_from([fmt.value, f"`{fmt.value.lower()}`"])))
    props: dict[str, str] = {}
    if partition and draw(st.booleans()):
        parts.append("WITHPARTITIONER = " + draw(st.sampled_from(["KeysAndValues", "Values"])))
    legacy = [key for key in FLUSH if draw(st.booleans())]
    for key in legacy:
        parts.append(f"{FLUSH[key]} = {draw(st.integers(1, 10**9))}")
    for key in sorted(set(FLUSH) - set(legacy)):
        if draw(st.booleans()):
            most = 2**31 - 1 if key == "flush.interval" else 2**63 - 1  # Java int, long
            props[key] = str(draw(st.integers(1, most)))
    if draw(st.booleans()):
        padding = draw(st.sampled_from(["LeftPad", "rightpad", "NoOp"]))
        props["padding.type"] = quote(padding)
        chars = "x_.-" if padding == "rightpad" else "0x_.-"
        props["padding.char"] = quote(draw(st.sampled_from(list(chars))))
        props["padding.length.offset"] = str(draw(st.integers(0, 255)))
        if draw(st.booleans()):  # Lenses' own tests write '12'
            props["padding.length.partition"] = quote(str(draw(st.integers(0, 255))))
    if fmt in (Format.JSON, Format.AVRO, Format.PARQUET) and draw(st.booleans()):
        props["store.envelope"] = "true"
        props["store.envelope.fields.value"] = draw(st.sampled_from(["true", "'TRUE'"]))
        props["store.envelope.fields.headers"] = draw(st.sampled_from(["false", "true"]))
    if draw(st.booleans()):
        props["key.suffix"] = quote(draw(prefix_segments))
    if draw(st.booleans()):
        props["partition.timezone"] = quote(draw(st.sampled_from(["UTC", "Europe/Berlin"])))
    # The typed settings: layout, codecs, error policy, time field.
    layout = draw(st.sampled_from(["", "lenses", "confluent", "Hive", "template"]))
    if layout == "template" and not partition:
        suffix = "{suffix}" if "key.suffix" in props else ""
        head = draw(st.sampled_from(["", "{prefix}/"]))
        middle = draw(st.sampled_from(["", "{date}/", "y={year}/m={month}/"]))
        props["layout.template"] = quote(
            f"{head}{{topic}}/{middle}{{partition}}-{{offset}}{suffix}.{{ext}}"
        )
        if draw(st.booleans()):
            props["layout"] = quote("template")
    elif layout and layout != "template":
        props["layout"] = quote(layout)
    if draw(st.booleans()):
        props["error.policy"] = quote(draw(st.sampled_from(["fail", "skip", "Dead-Letter"])))
    if draw(st.booleans()):
        field = draw(st.sampled_from(["_value.created_at", "ts", "_key.t", "_header.time"]))
        props["partition.time.field"] = quote(field)
    if fmt in (Format.JSON, Format.CSV, Format.TEXT, Format.BYTES) and draw(st.booleans()):
        codec = draw(st.sampled_from(["none", "gzip", "bzip2", "ZSTD"]))
        props["store.compression"] = quote(codec)
        if codec == "gzip" and fmt is not Format.CSV and draw(st.booleans()):
            props["store.gzip.block.bytes"] = str(draw(st.integers(1024, 10**9)))
    if fmt is Format.AVRO and draw(st.booleans()):
        props["avro.codec"] = quote(draw(st.sampled_from(["null", "deflate", "snappy", "xz"])))
    if fmt is Format.PARQUET and draw(st.booleans()):
        props["parquet.codec"] = quote(draw(st.sampled_from(["snappy", "zstd", "none"])))
        props["parquet.row.group.records"] = str(draw(st.integers(1, 10**6)))
    if props:
        entries = [f"'{k}'={v}" for k, v in draw(st.permutations(sorted(props.items())))]
        parts.append(f"PROPERTIES({', '.join(entries)})")
    return " ".join(parts)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statements())
def test_render_round_trips(text: str) -> None:
    (route,) = kcql.parse(text).routes
    rendered = kcql.render(route)
    (again,) = kcql.parse(rendered).routes
    assert again == route
    assert kcql.render(again) == rendered


def _routes_for_every_source() -> list[Route]:
    text = (
        "INSERT INTO bkt SELECT _value, _value.a, _key, _key.b, _header.c, _topic, _partition, "
        "_offset, _timestamp AS ts FROM t PARTITIONBY _date.uuuu, _value.x, _key, _header.h, "
        "_topic, _partition"
    )
    return list(kcql.parse(text).routes)


def test_round_trip_covers_every_source() -> None:
    (route,) = _routes_for_every_source()
    assert route.fields is not None
    used = {f.ref.source for f in route.fields} | {r.source for r in route.partition_by}
    assert used == set(Source)
    assert kcql.parse(kcql.render(route)).routes == (route,)
