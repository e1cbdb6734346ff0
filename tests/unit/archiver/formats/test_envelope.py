"""The JSON envelope keeps every key, value and header byte-exactly (envelope.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import envelope
from kafka_archive.kcql.plan import Envelope

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
payloads = st.one_of(
    st.binary(max_size=20),
    st.text(max_size=20).map(str.encode),
    json_values.map(lambda v: json.dumps(v, separators=(",", ":")).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
)
records = st.builds(
    Record,
    topic=st.text(min_size=1, max_size=5),
    partition=st.integers(0, 100),
    offset=st.integers(0, 2**40),
    timestamp=st.none() | st.integers(0, 2**42),
    key=st.none() | payloads,
    value=st.none() | payloads,
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | payloads), max_size=3).map(tuple),
)


@given(records)
def test_a_record_survives_a_json_line(record: Record) -> None:
    line = json.dumps(envelope.to_json_document(record, Envelope(enabled=True)))
    document = json.loads(line)
    assert envelope.is_json_envelope(document)
    assert envelope.from_json_document(document) == record


@given(payloads)
def test_each_encoding_gives_the_same_bytes_back(data: bytes) -> None:
    stored, encoding = envelope.encode_bytes(data)
    assert envelope.decode_bytes(stored, encoding) == data


def test_readable_forms_are_chosen_when_exact() -> None:
    assert envelope.encode_bytes(b'{"a":1}') == ({"a": 1}, "json")
    assert envelope.encode_bytes(b'{"a": 1}') == ('{"a": 1}', "text")
    assert envelope.encode_bytes(b"\xff") == ("/w==", "base64")


def test_parts_left_out_of_the_envelope_are_not_stored() -> None:
    record = Record("t", 0, 5, 9, b"k", b"1", (("h", b"v"),))
    document = envelope.to_json_document(record, Envelope(enabled=True, key=False, headers=False))
    assert set(document) == {"value", "metadata"}


@pytest.mark.parametrize(
    "document",
    [{"metadata": {}}, {"metadata": {"offset": 1}, "value": 1, "encoding": {"value": "base64"}}],
)
def test_a_damaged_envelope_is_an_error(document: dict[str, object]) -> None:
    with pytest.raises(envelope.EnvelopeError):
        envelope.from_json_document(document)
