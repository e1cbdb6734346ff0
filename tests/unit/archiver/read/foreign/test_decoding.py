"""Each sink's objects decode back into the records they were written from, for all inputs;
damaged objects are refused, and offsets are placed (stored, or derived and proven)."""

from __future__ import annotations

import base64
import gzip
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read.foreign.aiven import AivenLayout
from kafka_archive.archiver.read.foreign.archive import place
from kafka_archive.archiver.read.foreign.confluent import ConfluentLayout
from kafka_archive.archiver.read.foreign.lenses import LensesLayout
from kafka_archive.archiver.read.foreign.model import (
    ForeignFormatError,
    ForeignObject,
    ForeignRecord,
    Options,
)
from kafka_archive.archiver.read.foreign.secor import SecorLayout, read_sequence_file

TP = TopicPartition("t", 0)


def sequence_file(pairs: list[tuple[int, bytes]], every: int) -> bytes:
    """Hadoop's SequenceFile.Writer output (version 6, uncompressed, LongWritable keys and
    BytesWritable values), a sync escape before a record once ``every`` bytes passed."""

    def text(s: str) -> bytes:
        return bytes([len(s)]) + s.encode()

    sync = bytes(range(100, 116))
    out = bytearray(b"SEQ\x06" + text("org.apache.hadoop.io.LongWritable"))
    out += text("org.apache.hadoop.io.BytesWritable") + b"\x00\x00" + struct.pack(">i", 0) + sync
    mark = len(out)
    for key, value in pairs:
        if len(out) - mark >= every:
            out += struct.pack(">i", -1) + sync
            mark = len(out)
        out += struct.pack(">iiqi", 12 + len(value), 8, key, len(value)) + value
    return bytes(out)


records = st.lists(st.tuples(st.integers(0, 2**62), st.binary(max_size=300)), max_size=40)


@given(records, st.integers(1, 3000))
def test_a_secor_sequence_file_reads_back(pairs: list[tuple[int, bytes]], every: int) -> None:
    assert read_sequence_file(sequence_file(pairs, every)) == pairs


@given(records.filter(bool), st.data())
def test_a_secor_sequence_file_cut_short_is_refused(
    pairs: list[tuple[int, bytes]], data: st.DataObject
) -> None:
    whole = sequence_file(pairs, 2000)
    cut = data.draw(st.integers(1, len(whole) - 1))
    with pytest.raises(ForeignFormatError):
        read = read_sequence_file(whole[:cut])
        # a cut exactly between records reads as fewer records: not the whole file
        assert len(read) < len(pairs)
        raise ForeignFormatError("fewer records")


def test_secor_refuses_compressed_sequence_files() -> None:
    data = bytearray(sequence_file([(1, b"x")], 2000))
    data[4 + 34 + 35] = 1  # the "compressed" flag after the class names
    with pytest.raises(ForeignFormatError, match="compressed SequenceFiles are not read"):
        SecorLayout().decode(ForeignObject(TP, 0, "k"), bytes(data))


headers = st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=10)), max_size=3)
# KeyPlainWriter writes nothing for a null key, and base64 of nothing for an empty one: the
# CSV cannot tell them apart, so keys here are null or not empty (an empty key reads as null).
aiven_records = st.lists(
    st.tuples(
        st.none() | st.binary(min_size=1, max_size=20),
        st.binary(max_size=40),
        headers,
        st.integers(0, 2**41),
    ),
    max_size=20,
)


@given(aiven_records)
def test_aiven_csv_with_every_field_reads_back(
    rows: list[tuple[bytes | None, bytes, list[tuple[str, bytes]], int]],
) -> None:
    def b64(data: bytes | None) -> bytes:
        return b"" if data is None else base64.b64encode(data)

    lines = b""
    for offset, (key, value, hs, stamp) in enumerate(rows):
        cells = [b64(key), b64(value), str(offset).encode(), str(stamp).encode()]
        cells.append(b"".join(b64(n.encode()) + b":" + b64(v) + b";" for n, v in hs))
        lines += b",".join(cells) + b"\n"
    layout = AivenLayout(Options({"format.output.fields": "key,value,offset,timestamp,headers"}))
    obj = layout.parse("t-0-0.gz", 1)
    assert obj is not None
    decoded = layout.decode(obj, gzip.compress(lines))
    assert [(r.key, r.value, r.offset, r.timestamp, list(r.headers or ())) for r in decoded] == [
        (key, value, offset, stamp, hs) for offset, (key, value, hs, stamp) in enumerate(rows)
    ]


def test_aiven_default_csv_holds_base64_values_only() -> None:
    layout = AivenLayout()
    obj = layout.parse("t-0-5", 1)
    assert obj is not None
    decoded = layout.decode(obj, b"YQ==\nYg==\n")
    assert [r.value for r in decoded] == [b"a", b"b"]
    assert layout.kept(obj).missing() == ("key", "headers", "timestamp")
    with pytest.raises(ForeignFormatError, match="line 2"):
        layout.decode(obj, b"YQ==\n!!\n")


def test_lenses_envelope_keeps_offset_key_headers_and_time() -> None:
    line = {
        "key": "k1",
        "value": {"id": 1},
        "headers": {"h": "v"},
        "metadata": {"timestamp": 7, "topic": "t", "partition": 0, "offset": 41},
    }
    binary = {
        "key": base64.b64encode(b"\x00\xff").decode(),
        "keyIsArray": True,
        "value": "text",
        "metadata": {"topic": "t", "partition": 0, "offset": 42},
    }
    data = (json.dumps(line) + "\n" + json.dumps(binary) + "\n").encode()
    layout = LensesLayout()
    obj = layout.parse("t/0/000000000042_7_7.json", len(data))
    assert obj is not None
    first, second = layout.decode(obj, data)
    assert (first.offset, first.key, first.value, first.headers, first.timestamp) == (
        41,
        b"k1",
        b'{"id":1}',
        (("h", b"v"),),
        7,
    )
    assert (second.offset, second.key, second.value, second.timestamp) == (
        42,
        b"\x00\xff",
        b"text",
        None,
    )
    with pytest.raises(ForeignFormatError, match="line 2 is not JSON"):
        layout.decode(obj, data[:-10])


def test_confluent_bytes_need_their_separator_and_json_lines_parse() -> None:
    layout = ConfluentLayout()
    obj = layout.parse("topics/t/partition=0/t+0+0000000000.bin", 1)
    assert obj is not None
    assert [r.value for r in layout.decode(obj, b"a\nbc\n")] == [b"a", b"bc"]
    with pytest.raises(ForeignFormatError, match="cut short"):
        layout.decode(obj, b"a\nbc")
    obj = layout.parse("topics/t/partition=0/t+0+0000000000.json.gz", 1)
    assert obj is not None
    decoded = layout.decode(obj, gzip.compress(b'{"id":1}\n"s"\n'))
    assert [r.comparable for r in decoded] == [{"id": 1}, "s"]
    assert layout.comparable(obj, b'{"schema":{"type":"struct"},"payload":{"id":1}}') == {"id": 1}


@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.integers(0, 1000))
def test_offsets_named_by_the_last_one_are_derived_and_proven_by_the_previous_object(
    counts: list[int], base: int
) -> None:
    """Lenses names an object by its last offset: the records count back from it, exact
    when the previous object ends right before."""
    end, previous = base - 1, None
    placed_offsets = []
    for count in counts:
        end += count
        obj = ForeignObject(TP, -1, f"t/0/{end}.json", 1, end)
        rows = [ForeignRecord(b"v", b"v") for _ in range(count)]
        placed = place(obj, rows, previous, None)
        assert all(p.exact for p in placed) == (previous is not None)
        placed_offsets += [p.offset for p in placed]
        previous = end
    assert placed_offsets == list(range(base, end + 1))


def test_offsets_named_by_the_first_one_are_exact_when_the_next_object_follows() -> None:
    rows = [ForeignRecord(b"v", b"v")] * 3
    obj = ForeignObject(TP, 10, "a", 1)
    assert [p.offset for p in place(obj, rows, None, ForeignObject(TP, 13, "b", 1))] == [10, 11, 12]
    assert all(p.exact for p in place(obj, rows, None, ForeignObject(TP, 13, "b", 1)))
    assert not any(p.exact for p in place(obj, rows, None, ForeignObject(TP, 14, "b", 1)))
