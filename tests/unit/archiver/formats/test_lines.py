"""The skeleton of the line formats (TEXT, BYTES, JSON, CSV): an object is its records'
encodings back to back, counted as they reach the sink, the sink flushed (not closed) at the
end; a record the format refuses leaves nothing behind."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import bytes_, csv_, json_, text
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.formats.lines import LineWriter

WRITERS = {
    "TEXT": text.TextWriter,
    "BYTES": bytes_.BytesWriter,
    "JSON": json_.JsonWriter,
    "CSV_WITHHEADERS": csv_.CsvWriter,
}

value = st.one_of(
    st.none(),
    st.binary(max_size=10),
    st.dictionaries(st.sampled_from("abc"), st.integers() | st.text(max_size=4), max_size=3).map(
        lambda d: json.dumps(d).encode()
    ),
    st.sampled_from([b"", b"a\nb", b"\xff", b"1", b'"x"']),
)


class Sink(io.BytesIO):
    """A sink that records its flushes and refuses to be closed by a writer."""

    flushes = 0

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        raise AssertionError("a writer never closes its sink")


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_every_line_format_is_a_line_writer(fmt: str) -> None:
    assert issubclass(WRITERS[fmt], LineWriter)


@settings(max_examples=200, deadline=None)
@given(fmt=st.sampled_from(sorted(WRITERS)), values=st.lists(value, max_size=8))
def test_an_object_is_its_records_encodings_back_to_back(
    fmt: str, values: list[bytes | None]
) -> None:
    route = kcql.parse(f"INSERT INTO bkt:p SELECT * FROM t STOREAS `{fmt}`").routes[0]
    sink = Sink()
    writer = WRITERS[fmt](sink, route)
    expected = b""
    for offset, v in enumerate(values):
        record = Record("t", 0, offset, None, None, v)
        before = sink.getvalue()
        if not writer.accepts(record):
            continue  # a new schema: the runtime rolls the object first
        try:
            writer.write(record)
        except BadRecordError:
            assert sink.getvalue() == before  # nothing of a refused record
            continue
        assert sink.getvalue().startswith(before)
        expected = sink.getvalue()
        assert writer.bytes_written() == len(expected)
    writer.close()
    assert sink.getvalue() == expected
    assert sink.flushes >= 1


class Upper(LineWriter):
    def encode(self, record: Record) -> bytes:
        return (record.value or b"").upper() + b";"


@given(values=st.lists(st.binary(max_size=6), max_size=6), encoded=st.binary(max_size=10))
def test_the_skeleton_appends_what_encode_and_the_batch_path_give(
    values: list[bytes], encoded: bytes
) -> None:
    route = kcql.parse("INSERT INTO bkt:p SELECT * FROM t STOREAS `TEXT`").routes[0]
    sink = Sink()
    writer = Upper(sink, route)
    for offset, v in enumerate(values):
        assert writer.accepts(Record("t", 0, offset, None, None, v))
        writer.write(Record("t", 0, offset, None, None, v))
    writer.write_encoded(memoryview(encoded))
    writer.close()
    assert sink.getvalue() == b"".join(v.upper() + b";" for v in values) + encoded
    assert writer.bytes_written() == len(sink.getvalue())
