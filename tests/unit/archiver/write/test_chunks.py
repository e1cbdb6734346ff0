"""The batch path (ChunkSet.add_batch) writes exactly the objects the per-record path writes.

Pass-through routes (JSON, TEXT, BYTES without SELECT or envelope) take whole batches and
cut them into objects by the flush policy without a Python step per record; a retry must
still cut every object where any earlier attempt cut it, so both paths are compared here on
generated values, timestamps, batch splits and flush policies.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.base import BadRecordError, EncodedBatch
from kafka_archive.archiver.kafka.reader import Batch
from kafka_archive.archiver.write import uploads
from kafka_archive.archiver.write.chunks import ChunkSet


class FakeStore:
    """The calls ChunkSet makes, kept in memory."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.parts: dict[tuple[str, int], bytes] = {}
        self.aborted: list[str] = []

    def put_bytes(self, bucket: str, key: str, body: bytes) -> None:
        self.objects[key] = body

    def upload_bytes(self, bucket: str, key: str, body: bytes | bytearray) -> None:
        self.objects[key] = bytes(body)

    def upload_file(self, bucket: str, key: str, path: Path) -> None:
        self.objects[key] = Path(path).read_bytes()

    def delete(self, bucket: str, keys: list[str]) -> None:
        for key in keys:
            self.objects.pop(key, None)

    def start_multipart(self, bucket: str, key: str) -> str:
        self.objects.pop(key, None)
        return key

    def upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, body: bytes | bytearray
    ) -> str:
        self.parts[(upload_id, number)] = bytes(body)
        return str(number)

    def complete_multipart(self, bucket: str, key: str, upload_id: str, etags: list[str]) -> None:
        self.objects[key] = b"".join(self.parts.pop((upload_id, int(n))) for n in etags)

    def abort_upload(self, bucket: str, key: str, upload_id: str) -> None:
        self.aborted.append(key)

    def creating(
        self, bucket: str, key: str, metadata: object = None
    ) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # create-only uploads: nothing here to collide with


class FakeMessage:
    """What confluent-kafka's Message offers the reader."""

    def __init__(self, offset: int, value: bytes | None, timestamp: int | None) -> None:
        self._offset, self._value, self._timestamp = offset, value, timestamp

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> None:
        return None

    def headers(self) -> None:
        return None

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0

    def timestamp(self) -> tuple[int, int]:
        return (0, -1) if self._timestamp is None else (1, self._timestamp)


def _unit(fmt: str, count: int, size: int, interval: int) -> WorkUnit:
    plan = kcql.parse(
        f"INSERT INTO bkt:arch SELECT * FROM t STOREAS `{fmt}` WITH_FLUSH_SIZE = {size} "
        f"WITH_FLUSH_INTERVAL = {interval} WITH_FLUSH_COUNT = {count}"
    )
    return WorkUnit(0, plan.routes[0], TopicPartition("t", 0), 0, 10**9, "run", "job", "g")


def _per_record(unit: WorkUnit, batches: list[Batch], spool: Path) -> tuple[Any, ...]:
    store = FakeStore()
    chunks = ChunkSet(unit, store, str(spool))  # type: ignore[arg-type]
    for batch in batches:
        for record in batch:
            try:
                chunks.add(record)
            except BadRecordError:
                continue  # the skip policy
    chunks.flush_all()
    return _data(store), chunks.lifecycle.uploaded()


def _batched(unit: WorkUnit, batches: list[Batch], spool: Path) -> tuple[Any, ...]:
    store = FakeStore()
    chunks = ChunkSet(unit, store, str(spool))  # type: ignore[arg-type]
    for batch in batches:
        if chunks.add_batch(batch):
            continue
        for record in batch:
            try:
                chunks.add(record)
            except BadRecordError:
                continue
    chunks.flush_all()
    return _data(store), chunks.lifecycle.uploaded()


def _data(store: FakeStore) -> dict[str, bytes]:
    return {k: v for k, v in store.objects.items() if "/.kafka-archive/" not in k}


values = st.one_of(
    st.integers(-5, 10**6).map(lambda i: str(i).encode()),
    st.text("ab c", max_size=30).map(lambda t: f'{{"t": "{t}"}}'.encode()),
    st.just(b" [1, 2] "),
    st.just(b'\t{"a": 1} '),  # stripped by JSON, kept by TEXT and BYTES
    st.just('"café"'.encode()),  # UTF-8 beyond ASCII: JSON and TEXT
)
# At most one value a format may refuse: its batch goes record by record (the error policy).
refused = st.one_of(
    st.none(),
    st.tuples(
        st.integers(0, 59),
        # not JSON; not TEXT; not UTF-8 (neither); a tombstone
        st.sampled_from([b"{", b"line\nbreak", b"cr\rlf", b'"\xff"', None]),
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    fmt=st.sampled_from(["JSON", "TEXT", "BYTES"]),
    records=st.lists(
        # Timestamps as steps from the previous one (Kafka's mostly rise; some go back or
        # are unknown), in half-seconds so that "exactly one interval later" comes up.
        st.tuples(values, st.one_of(st.none(), st.integers(-1, 3).map(lambda t: t * 500))),
        min_size=1,
        max_size=60,
    ),
    bad=refused,
    cuts=st.lists(st.integers(1, 60), max_size=6),
    count=st.integers(1, 25),
    size=st.integers(1, 400),
    interval=st.integers(1, 8),
)
def test_batches_roll_objects_exactly_where_single_records_do(
    tmp_path_factory: Any,
    fmt: str,
    records: list[tuple[bytes | None, int | None]],
    bad: tuple[int, bytes | None] | None,
    cuts: list[int],
    count: int,
    size: int,
    interval: int,
) -> None:
    spool = tmp_path_factory.mktemp("spool")
    clock, timed = 10_000, []
    for value, step in records:
        clock += step or 0
        timed.append((value, None if step is None else clock))
    records = timed
    if bad is not None and bad[0] < len(records):
        records[bad[0]] = (bad[1], records[bad[0]][1])
    messages = [FakeMessage(i * 2, v, ts) for i, (v, ts) in enumerate(records)]  # gaps
    bounds = sorted({0, len(messages), *(c for c in cuts if c < len(messages))})
    unit = _unit(fmt, count, size, interval)

    def batches() -> list[Batch]:
        return [Batch(messages[a:b]) for a, b in itertools.pairwise(bounds)]

    expected = _per_record(unit, batches(), spool)
    assert _batched(unit, batches(), spool) == expected


def test_only_pass_through_routes_take_the_batch_path(tmp_path: Path) -> None:
    def takes(text: str) -> bool:
        plan = kcql.parse(text)
        unit = WorkUnit(0, plan.routes[0], TopicPartition("t", 0), 0, 10, "r", "j", "g")
        chunks = ChunkSet(unit, FakeStore(), str(tmp_path))  # type: ignore[arg-type]
        return chunks.add_batch(Batch([FakeMessage(0, b"1", 5)]))

    assert takes("INSERT INTO bkt:p SELECT * FROM t STOREAS `JSON`")
    assert takes("INSERT INTO bkt:p SELECT * FROM t STOREAS `BYTES`")
    assert not takes("INSERT INTO bkt:p SELECT id FROM t STOREAS `JSON`")
    assert not takes("INSERT INTO bkt:p SELECT * FROM t PARTITIONBY _key STOREAS `JSON`")
    assert not takes(
        "INSERT INTO bkt:p SELECT * FROM t STOREAS `JSON` PROPERTIES('store.envelope'=true)"
    )
    assert not takes("INSERT INTO bkt:p SELECT * FROM t STOREAS `AVRO`")


def lines(encoded: EncodedBatch) -> list[bytes]:
    return [encoded.data[a:b] for a, b in itertools.pairwise(encoded.ends)]


def test_json_batches_keep_what_single_values_keep() -> None:
    """The whole-batch check of JSON values gives the lines the value-by-value path gives,
    including what only the fallback parser accepts (NaN) and what must be re-serialized."""
    from kafka_archive.archiver.formats import json_

    plain = [b'{"a": 1}', b" [1, 2] ", b"3"]
    assert lines(json_.encode_values(plain)) == [b'{"a": 1}\n', b"[1, 2]\n", b"3\n"]
    odd = [b'{"a": NaN}', b'{"b":\n 2}', None, b'"\\u00e9"']
    assert (
        lines(json_.encode_values(odd))
        == [json_.pass_through_line(v) for v in odd]
        == [b'{"a": NaN}\n', b'{"b":2}\n', b"null\n", b'"\\u00e9"\n']
    )
    with pytest.raises(BadRecordError):
        json_.encode_values([b"1", b"{"])


class OrderedStore(FakeStore):
    """A FakeStore that remembers the order keys were written in."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []

    def put_bytes(self, bucket: str, key: str, body: bytes) -> None:
        self.order.append(key)
        super().put_bytes(bucket, key, body)

    def upload_file(self, bucket: str, key: str, path: Path) -> None:
        self.order.append(key)
        super().upload_file(bucket, key, path)

    def upload_bytes(self, bucket: str, key: str, body: bytes | bytearray) -> None:
        self.order.append(key)
        super().upload_bytes(bucket, key, body)


def test_small_objects_are_marked_together_before_their_uploads(tmp_path: Path) -> None:
    """100 one-record objects: two markers (64 objects, then the rest at the end), each
    written before the objects it names, and every object named by one."""
    store = OrderedStore()
    chunks = ChunkSet(_unit("JSON", 1, 10**6, 3600), store, str(tmp_path))  # type: ignore[arg-type]
    assert chunks.add_batch(Batch([FakeMessage(i, b"1", 5) for i in range(100)]))
    chunks.flush_all()
    markers = [k for k in store.order if "/.kafka-archive/pending/" in k]
    named = {m: [k for k, _ in json.loads(store.objects[m])["objects"]] for m in markers}
    assert [len(keys) for keys in named.values()] == [64, 36]
    assert sorted(k for keys in named.values() for k in keys) == sorted(_data(store))
    for marker, keys in named.items():
        assert all(store.order.index(marker) < store.order.index(k) for k in keys)
    assert len(chunks.lifecycle.uploaded()) == 100
    assert not list(tmp_path.iterdir()), "no spool file left"


@pytest.mark.parametrize(
    "fmt, properties",
    [
        ("JSON", ""),
        ("JSON", "PROPERTIES('store.compression'='gzip')"),
        ("TEXT", "PROPERTIES('store.compression'='gzip', 'store.gzip.block.bytes'=1024)"),
        ("BYTES", "PROPERTIES('store.compression'='zstd')"),
        ("CSV_WITHHEADERS", ""),
        ("PARQUET", ""),
        ("AVRO", ""),
    ],
)
def test_objects_written_in_memory_are_what_a_spool_file_holds(
    tmp_path: Path, fmt: str, properties: str
) -> None:
    """A route with one open object at a time writes it into memory (in parts of
    ``part_bytes`` once it outgrows one: 256 bytes here, many parts), the others spool it:
    the objects are the same, whatever the format and its compression."""
    plan = kcql.parse(
        f"INSERT INTO bkt:arch SELECT * FROM t STOREAS `{fmt}` WITH_FLUSH_COUNT = 70 {properties}"
    )
    unit = WorkUnit(0, plan.routes[0], TopicPartition("t", 0), 0, 10**9, "run", "job", "g")
    messages = [
        FakeMessage(i, json.dumps({"id": i, "name": "n" * (i % 7)}).encode(), 5) for i in range(200)
    ]
    written = []
    for memory in (True, False):
        store = FakeStore()
        chunks = ChunkSet(unit, store, str(tmp_path), part_bytes=256, memory=memory)  # type: ignore[arg-type]
        for record in Batch(messages):
            chunks.add(record)
        chunks.flush_all()
        assert not store.parts and not store.aborted, "every multipart upload completed"
        written.append(_data(store))
    in_memory, spooled = written
    assert sorted(in_memory) == sorted(spooled) and len(spooled) >= 3
    for key, body in spooled.items():
        if fmt == "AVRO":  # each file has its own random sync marker: compare the records
            import io

            import fastavro

            assert list(fastavro.reader(io.BytesIO(in_memory[key]))) == list(
                fastavro.reader(io.BytesIO(body))
            )
        else:
            assert in_memory[key] == body, key
    assert not list(tmp_path.iterdir()), "no spool file left"


def test_the_commit_cut_stays_after_uploaded_objects_while_others_wait_for_their_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects u and t are uploaded (marked two at a time), then w (offset 0) is evicted and
    waits for its marker: the cut must stay after every object rolled so far, uploaded or
    waiting. Here y, opened at offset 1 and young, cannot be held back (u and t, uploaded,
    end after it): everything is flushed and the cut is the stop."""
    monkeypatch.setattr(uploads, "MARK_OBJECTS", 2)
    plan = kcql.parse(
        "INSERT INTO bkt:arch SELECT * FROM t PARTITIONBY k STOREAS `JSON` WITH_FLUSH_COUNT = 2"
    )
    unit = WorkUnit(0, plan.routes[0], TopicPartition("t", 0), 0, 8, "run", "job", "g")
    store = FakeStore()
    chunks = ChunkSet(unit, store, str(tmp_path), max_open=3)  # type: ignore[arg-type]
    old, young = 1_000, 10_000
    groups = [("w", old), ("y", young), ("u", old), ("u", old)]
    groups += [("t", old), ("t", old), ("s", old), ("r", old)]
    for offset, (k, ts) in enumerate(groups):
        chunks.add(Record("t", 0, offset, ts, None, json.dumps({"k": k}).encode(), ()))
    uploaded = [(o.first_offset, o.last_offset) for o in chunks.lifecycle.uploaded()]
    assert uploaded == [(2, 3), (4, 5)]  # u and t; w (0) waits
    cut = chunks.finish(8, young_after_ms=5_000)
    assert cut == 8
    written = chunks.lifecycle.uploaded()
    assert all(o.last_offset < cut for o in written)
    assert sorted(o.first_offset for o in written) == [0, 1, 2, 4, 6, 7]
    assert sum(o.records for o in written) == cut
