"""The read side over the write matrix: every archive `run` can write, `cat`, `verify` and
`restore` read.

The combinations are generated, not listed: STOREAS × envelope × PARTITIONBY × compression ×
layout × record shape × damage, filtered to what `run` accepts. `make test` runs a covering
array (every value of every dimension paired with every value of every other at least
once); `make test-full` (marker ``full``) runs the whole product. All the combinations of a
batch are statements of one KCQL plan over one topic per shape, so a batch is one `run`,
one `verify`, one `restore` per envelope combination and one `verify` after damage.

For each combination: `cat` at the first, a middle and the last offset of each partition
prints exactly the produced record (decoded here with json/base64 only); `verify` is clean;
an envelope archive restores key, value, headers, timestamp and partition exactly; after one
object is deleted, truncated or duplicated, `verify` names its partition and offsets.
"""

from __future__ import annotations

import base64
import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from archive_helpers import cli, kafka_records

pytestmark = pytest.mark.integration

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "fmt": ("JSON", "AVRO", "PARQUET", "CSV", "CSV_WITHHEADERS", "TEXT", "BYTES"),
    "envelope": ("off", "on"),
    "partitionby": ("none", "key", "header", "field", "date"),
    "compression": ("none", "gzip", "zstd", "gzip-blocks"),
    "layout": ("lenses", "confluent", "hive", "template"),
    "shape": ("objects", "text", "binary"),
    "damage": ("delete", "truncate", "duplicate"),
}
ENVELOPE_FORMATS = ("JSON", "AVRO", "PARQUET")
PARTITIONS = 2
RECORDS = 24  # per shape, 12 per partition
FLUSH = 4
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z; records 3 h apart span three days

Combo = dict[str, str]


def valid(c: Combo) -> bool:
    """Whether `run` accepts the combination (KCQL refuses the others, or the shape's
    records do not fit the format)."""
    envelope = c["envelope"] == "on"
    if envelope and c["fmt"] not in ENVELOPE_FORMATS:
        return False
    if c["shape"] == "text" and not (envelope or c["fmt"] in ("TEXT", "BYTES")):
        return False
    if c["shape"] == "binary" and not (envelope or c["fmt"] == "BYTES"):
        return False
    if c["partitionby"] == "field" and (c["shape"] != "objects" or c["fmt"] in ("TEXT", "BYTES")):
        return False
    return not (c["compression"] == "gzip-blocks" and c["fmt"] not in ("JSON", "TEXT", "BYTES"))


def _no_cost(result: tuple[int, str, str]) -> tuple[int, str, str]:
    """A command's (exit code, stdout, stderr) without its S3 requests line."""
    code, out, err = result
    return code, out, "".join(line for line in err.splitlines(True) if not line.startswith("S3: "))


def full_product() -> list[Combo]:
    names = [n for n in DIMENSIONS if n != "damage"]
    combos = [
        dict(zip(names, values, strict=True))
        for values in itertools.product(*(DIMENSIONS[n] for n in names))
    ]
    out = [c for c in combos if valid({**c, "damage": "delete"})]
    for i, c in enumerate(out):
        c["damage"] = DIMENSIONS["damage"][i % len(DIMENSIONS["damage"])]
    return out


def covering_array() -> list[Combo]:
    """A greedy pairwise covering array of the valid combinations: deterministic, every pair
    of values of two dimensions that some valid combination holds is in one of them."""
    names = list(DIMENSIONS)
    candidates = [
        dict(zip(names, values, strict=True))
        for values in itertools.product(*(DIMENSIONS[n] for n in names))
    ]
    candidates = [c for c in candidates if valid(c)]

    def pairs(c: Combo) -> set[tuple[str, str, str, str]]:
        return {(a, c[a], b, c[b]) for a, b in itertools.combinations(names, 2)}

    cover = [pairs(c) for c in candidates]
    uncovered = set().union(*cover)
    # Every format, with and without the envelope, in the default layout (cat without --kcql).
    chosen: list[Combo] = []
    for fmt, envelope in itertools.product(DIMENSIONS["fmt"], DIMENSIONS["envelope"]):
        fits = [
            i
            for i, c in enumerate(candidates)
            if (c["fmt"], c["envelope"], c["layout"], c["partitionby"])
            == (fmt, envelope, "lenses", "none")
        ]
        if fits:
            best = max(fits, key=lambda i: len(cover[i] & uncovered))
            chosen.append(candidates[best])
            uncovered -= cover[best]
    while uncovered:
        best = max(range(len(candidates)), key=lambda i: len(cover[i] & uncovered))
        chosen.append(candidates[best])
        uncovered -= cover[best]
    return chosen


# -- the records ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Produced:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def shape_records(
    shape: str,
) -> list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]:
    out: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]] = []
    for i in range(RECORDS):
        country = ("DE", "FR")[i % 3 % 2]
        if shape == "objects":
            value = {
                "id": i,
                "name": f'nämé-{i} ✓ "q", x',
                "country": country,
                "nested": {"tags": ["a", str(i)], "n": i * 7},
            }
            out.append(
                (
                    f"k{i % 3}".encode(),
                    json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(),
                    (("country", country.encode()),),
                )
            )
        elif shape == "text":
            text = "" if i % 6 == 0 else f"línea {i} ✓ 'x' {'·' * (i % 4)}"
            headers: tuple[tuple[str, bytes | None], ...] = (("country", country.encode()),)
            if i % 4 == 1:
                headers += (("dup", b"1"), ("dup", b"2"))
            out.append((None if i % 5 == 0 else f"t{i}".encode(), text.encode(), headers))
        else:
            value_b: bytes | None = (
                None if i % 6 == 0 else b"" if i % 6 == 1 else bytes([i, 0, 255, (i * 7) % 256])
            )
            key = None if i % 4 == 0 else b"" if i % 4 == 1 else bytes([255, i, 0])
            headers = () if i % 5 == 0 else (("country", country.encode()),)
            headers += (("dup", b"\xc3\x28"), ("dup", None))[: i % 3]
            out.append((key, value_b, headers))
    return out


def produce_shape(produce: Callable[..., None], topic: str, shape: str) -> list[Produced]:
    produced: list[Produced] = []
    records: list[dict[str, Any]] = []
    for i, (key, value, headers) in enumerate(shape_records(shape)):
        partition, timestamp = i % PARTITIONS, BASE_MS + i * 3 * 3_600_000

        def delivered(
            err: Any,
            msg: Any,
            key: bytes | None = key,
            value: bytes | None = value,
            headers: Any = headers,
            timestamp: int = timestamp,
        ) -> None:
            assert err is None, err
            produced.append(Produced(msg.partition(), msg.offset(), key, value, headers, timestamp))

        records.append(
            {
                "key": key,
                "value": value,
                "headers": list(headers),
                "partition": partition,
                "timestamp": timestamp,
                "on_delivery": delivered,
            }
        )
    produce(topic, records, enable_idempotence=True)
    assert len(produced) == RECORDS
    return sorted(produced, key=lambda p: (p.partition, p.offset))


# -- the statements ------------------------------------------------------------------------

PARTITIONBY = {
    "none": "",
    "key": "PARTITIONBY _key ",
    "header": "PARTITIONBY _header.country ",
    "field": "PARTITIONBY country ",
    "date": "PARTITIONBY _date.dd ",
}
FIELD_NAME = {"key": "key", "header": "country", "field": "country", "date": "day"}
CODECS = {
    "AVRO": {"gzip": "'avro.codec'='deflate'", "zstd": "'avro.codec'='zstandard'"},
    "PARQUET": {
        "none": "'parquet.codec'='none'",
        "gzip": "'parquet.codec'='gzip'",
        "zstd": "'parquet.codec'='zstd'",
    },
}
COMPRESSION = {
    "gzip": "'store.compression'='gzip'",
    "zstd": "'store.compression'='zstd'",
    "gzip-blocks": "'store.compression'='gzip', 'store.gzip.block.bytes'=1024",
}


def statement(c: Combo, bucket: str, prefix: str, topic: str) -> str:
    props: list[str] = []
    if c["envelope"] == "on":
        props.append("'store.envelope'=true")
    codec = CODECS.get(c["fmt"], COMPRESSION)
    if c["compression"] in codec:
        props.append(codec[c["compression"]])
    if c["layout"] in ("confluent", "hive"):
        props.append(f"'layout'='{c['layout']}'")
    elif c["layout"] == "template":
        field = f"{{field:{FIELD_NAME[c['partitionby']]}}}/" if c["partitionby"] != "none" else ""
        props.append(f"'layout.template'='{{topic}}/part={{partition}}/{field}{{offset}}.{{ext}}'")
    clause = f"PROPERTIES({', '.join(props)})" if props else ""
    flush = 3 * FLUSH if c["compression"] == "gzip-blocks" else FLUSH  # several blocks
    return (
        f"INSERT INTO {bucket}:{prefix} SELECT * FROM {topic} {PARTITIONBY[c['partitionby']]}"
        f"STOREAS {c['fmt']} WITH_FLUSH_COUNT = {flush} {clause}"
    ).strip()


def single_group(c: Combo) -> bool:
    """Whether the archive's objects of a partition follow each other (no PARTITIONBY, no
    time folders): only then can a format without the envelope tell offsets."""
    return c["partitionby"] == "none" and c["layout"] != "hive"


# -- reading what cat prints, independently of kafka-archive -------------------------------


def as_bytes(shown: Any, encoding: str | None) -> bytes | None:
    if encoding is None:
        assert shown is None
        return None
    if encoding == "json":
        return json.dumps(shown, separators=(",", ":"), ensure_ascii=False).encode()
    if encoding == "text":
        return str(shown).encode()
    assert encoding == "base64", encoding
    return base64.b64decode(shown, validate=True)


def csv_cell(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def check_printed(c: Combo, doc: dict[str, Any], want: Produced) -> None:
    where = (c, want.partition, want.offset)
    assert (doc["partition"], doc["offset"], doc["offset_exact"]) == (
        want.partition,
        want.offset,
        True,
    ), where
    if c["envelope"] == "on":
        assert as_bytes(doc["key"], doc["key_encoding"]) == want.key, where
        assert as_bytes(doc["value"], doc["value_encoding"]) == want.value, where
        assert [(n, as_bytes(v, e)) for n, v, e in doc["headers"]] == list(want.headers), where
        assert doc["timestamp"] == want.timestamp, where
        return
    assert doc["key"] is doc["headers"] is doc["timestamp"] is None, where
    fmt = c["fmt"]
    if fmt == "BYTES":
        assert as_bytes(doc["value"], doc["value_encoding"]) == want.value, where
    elif fmt == "TEXT":
        assert want.value is not None
        assert (doc["value"], doc["value_encoding"]) == (want.value.decode(), "text"), where
    elif fmt in ("CSV", "CSV_WITHHEADERS"):
        cells = [csv_cell(v) for v in json.loads(want.value or b"").values()]
        assert (doc["value"], doc["value_encoding"]) == (cells, "csv"), where
    else:
        shown = (json.loads(want.value or b""), "json")
        assert (doc["value"], doc["value_encoding"]) == shown, where


# -- the test ------------------------------------------------------------------------------


@dataclass
class Archive:
    combo: Combo
    prefix: str
    topic: str
    kcql: str


def data_objects(s3: Any, bucket: str, prefix: str) -> list[tuple[str, int]]:
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/"):
        for item in page.get("Contents", []):
            key = item["Key"]
            if "/.kafka-archive/" not in key and not key.endswith(".index.json"):
                keys.append((key, item["Size"]))
    return sorted(keys)


def start_offset_of(key: str, topic: str) -> tuple[int, int]:
    """(partition, start offset) from a key of any of the layouts used here."""
    name = key.rsplit("/", 1)[-1].split(".", 1)[0]
    for pattern in (f"{topic}+", f"{topic}("):
        if name.startswith(pattern):
            rest = name[len(pattern) :].rstrip(")").replace("_", "+")
            partition, offset = rest.split("+")
            return int(partition), int(offset)
    folder = key.rsplit("/", 2)[-2] if "/part=" not in key else key.split("/part=")[1].split("/")[0]
    return int(folder), int(name)


def damage(s3: Any, bucket: str, archive: Archive, index: int) -> tuple[int, int, str]:
    """Damage one object of partition 0 (the first, a middle or the last, by ``index``);
    return its partition, start offset and key."""
    objects = [
        (k, s)
        for k, s in data_objects(s3, bucket, archive.prefix)
        if start_offset_of(k, archive.topic)[0] == 0
    ]
    objects.sort(key=lambda o: start_offset_of(o[0], archive.topic)[1])
    key, _ = objects[(0, len(objects) // 2, len(objects) - 1)[index % 3]]
    partition, start = start_offset_of(key, archive.topic)
    kind = archive.combo["damage"]
    if kind == "delete":
        s3.delete_object(Bucket=bucket, Key=key)
    elif kind == "truncate":
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        s3.put_object(Bucket=bucket, Key=key, Body=body[: len(body) // 2])
    else:  # a copy of the object under the next start offset: its records twice
        copy = key.replace(f"{start:012d}", f"{start + 1:012d}")
        assert copy != key
        s3.copy_object(Bucket=bucket, Key=copy, CopySource={"Bucket": bucket, "Key": key})
    return partition, start, key


def read_back(broker: str, topic: str) -> list[Produced]:
    return [
        Produced(r.partition, -1, r.key, r.value, r.headers, r.timestamp)
        for r in kafka_records(broker, topic, PARTITIONS)
    ]


def run_matrix(
    combos: list[Combo],
    broker: str,
    endpoint: str,
    s3: Any,
    produce: Callable[..., None],
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    """Run the checks over ``combos``; return every failure found (empty: all held)."""
    kafka = ("--bootstrap-servers", broker, "--endpoint-url", endpoint)
    bkt = bucket()
    shapes = sorted({c["shape"] for c in combos})
    topics = {shape: topic(partitions=PARTITIONS) for shape in shapes}
    produced = {shape: produce_shape(produce, topics[shape], shape) for shape in shapes}
    archives = [
        Archive(
            c, f"c{i:03d}", topics[c["shape"]], statement(c, bkt, f"c{i:03d}", topics[c["shape"]])
        )
        for i, c in enumerate(combos)
    ]
    plan = "; ".join(a.kcql for a in archives)
    failures: list[str] = []

    clock = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:
        nonlocal clock
        phases[name] = round(time.monotonic() - clock, 1)
        clock = time.monotonic()

    phase("produce")
    code, _, err = cli(capsys, "run", "--kcql", plan, *kafka)
    assert code == 0, err
    phase("run")

    for a in archives:  # cat: first, middle and last offset of each partition
        records = produced[a.combo["shape"]]
        for partition in range(PARTITIONS):
            mine = [r for r in records if r.partition == partition]
            for want in (mine[0], mine[len(mine) // 2], mine[-1]):
                # Without --kcql for the default layout: the format told by the extension
                # (not for CSV, which may or may not have a header row: said, exit 2).
                args = (
                    "cat",
                    "--from",
                    f"{bkt}:{a.prefix}",
                    "--topic",
                    a.topic,
                    "--partition",
                    str(partition),
                    "--offset",
                    str(want.offset),
                    "--endpoint-url",
                    endpoint,
                )
                code, out, err = cli(capsys, *args, "--kcql", a.kcql)
                if (a.combo["layout"], a.combo["partitionby"]) == ("lenses", "none"):
                    csv = a.combo["fmt"].startswith("CSV")
                    plain = cli(capsys, *args)
                    if csv and (plain[0] != 2 or "--kcql" not in plain[2]):
                        failures.append(f"cat {a.combo} without --kcql: {plain}")
                    # The same records and messages; its S3 line counts one LIST more
                    # (the layout guessed from a listing).
                    if not csv and _no_cost(plain) != _no_cost((code, out, err)):
                        failures.append(
                            f"cat {a.combo} without --kcql: {plain} differs from {(code, out, err)}"
                        )
                if a.combo["envelope"] == "off" and not single_group(a.combo):
                    # Offsets of records spread over folders are not stored: said, exit 13.
                    if code != 13 or "store.envelope" not in err or out:
                        failures.append(
                            f"cat {a.combo} @{partition}:{want.offset}: "
                            f"expected exit 13, got {code}: {err.strip()}"
                        )
                    continue
                try:
                    assert code == 0, err
                    (line,) = out.splitlines()
                    check_printed(a.combo, json.loads(line), want)
                except AssertionError as exc:
                    failures.append(f"cat {a.combo} @{partition}:{want.offset}: {exc}")

    phase("cat")
    code, out, err = cli(capsys, "verify", "--kcql", plan, *kafka, "--output", "json")
    phase("verify")
    result = json.loads(out) if out.strip() else {"partitions": []}
    if code != 0:
        dirty = [p for p in result["partitions"] if p["discrepancies"]]
        failures.append(f"verify of the undamaged archives: exit {code} {err.strip()} {dirty}")

    for a in archives:  # restore: envelope archives come back exactly
        if a.combo["envelope"] != "on":
            continue
        target = topic(partitions=PARTITIONS)
        code, _, err = cli(
            capsys,
            "restore",
            "--from",
            f"{bkt}:{a.prefix}",
            "--topic",
            a.topic,
            "--to-topic",
            target,
            "--kcql",
            a.kcql,
            *kafka,
        )
        if code != 0:
            failures.append(f"restore {a.combo}: exit {code} {err.strip()}")
            continue
        got = sorted(read_back(broker, target), key=lambda r: (r.partition, r.timestamp))
        want = [
            Produced(r.partition, -1, r.key, r.value, r.headers, r.timestamp)
            for r in produced[a.combo["shape"]]
        ]
        if got != sorted(want, key=lambda r: (r.partition, r.timestamp)):
            failures.append(f"restore {a.combo}: records differ")

    phase("restore")
    damaged = {a.prefix: damage(s3, bkt, a, i) for i, a in enumerate(archives)}
    code, out, err = cli(capsys, "verify", "--kcql", plan, *kafka, "--output", "json")
    phase("damage+verify")
    verdicts = json.loads(out)["partitions"] if out.strip() else []
    if code != 1:
        failures.append(f"verify of the damaged archives: exit {code}, expected 1: {err.strip()}")
    for index, a in enumerate(archives):
        partition, start, key = damaged[a.prefix]
        verdict = verdicts[index * PARTITIONS + partition] if verdicts else None
        named = [
            d
            for d in (verdict or {}).get("discrepancies", ())
            if d["first_offset"] is not None
            and d["first_offset"] <= start + 1
            and (d["last_offset"] or d["first_offset"]) >= start
        ]
        if verdict is None or verdict["partition"] != partition or not named:
            failures.append(
                f"verify after {a.combo['damage']} of {key} (offset {start}, "
                f"{a.combo}): not named; found "
                f"{(verdict or {}).get('discrepancies')}"
            )
    with capsys.disabled():
        print(f"\nread matrix: {len(combos)} combinations, seconds per phase {phases}")
    return failures


def batches(combos: list[Combo], size: int) -> Iterator[list[Combo]]:
    for i in range(0, len(combos), size):
        yield combos[i : i + size]


def test_covering_array_is_pairwise_complete() -> None:
    combos = covering_array()
    names = list(DIMENSIONS)
    for a, b in itertools.combinations(names, 2):
        possible = {(x[a], x[b]) for x in full_product()} if "damage" not in (a, b) else None
        seen = {(c[a], c[b]) for c in combos}
        if possible is not None:
            assert possible <= seen, (a, b, possible - seen)
    assert all(valid(c) for c in combos)


def test_read_side_over_a_covering_array_of_the_write_matrix(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    produce: Callable[..., None],
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    combos = covering_array()
    failures = run_matrix(combos, broker, s3_endpoint, s3_client, produce, topic, bucket, capsys)
    assert not failures, "\n".join(failures)


FULL = full_product()


@pytest.mark.full
@pytest.mark.parametrize(
    "batch", list(batches(FULL, 60)), ids=lambda b: f"{FULL.index(b[0])}-{FULL.index(b[-1])}"
)
def test_read_side_over_the_full_write_matrix(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    produce: Callable[..., None],
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    batch: list[Combo],
) -> None:
    failures = run_matrix(batch, broker, s3_endpoint, s3_client, produce, topic, bucket, capsys)
    assert not failures, "\n".join(failures)
