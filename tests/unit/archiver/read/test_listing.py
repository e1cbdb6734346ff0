"""cat's pure parts: where an archive is, and how values are printed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.keys import object_key
from kafka_archive.archiver.partition.parse import without_suffixes
from kafka_archive.archiver.protocol.writer import attempt_key
from kafka_archive.archiver.read.decoding import StoredRecord
from kafka_archive.archiver.read.display import document
from kafka_archive.archiver.read.listing import list_partition_objects, parse_location
from kafka_archive.archiver.read.seek import FoundRecord
from kafka_archive.kcql.plan import Format, Target


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("bucket", Target("bucket", "")),
        ("bucket:archive", Target("bucket", "archive")),
        ("bucket:/a/b/", Target("bucket", "a/b")),
    ],
)
def test_locations(text: str, target: Target) -> None:
    assert parse_location(text) == target


@pytest.mark.parametrize(
    "text", ["", ":prefix", "a/b:c", "bucket:a//b", "bucket:a/../b", "bucket:../b", "bucket:./b"]
)
def test_bad_locations_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--from expects bucket or bucket:prefix"):
        parse_location(text)


@pytest.mark.parametrize(
    ("fmt", "value", "shown"),
    [
        (Format.JSON, {"a": [1]}, ({"a": [1]}, "json")),
        (Format.TEXT, "héllo", ("héllo", "text")),
        (Format.BYTES, b"h\xc3\xa9", ("hé", "text")),
        (Format.BYTES, b"\xff\x00", ("/wA=", "base64")),
        (Format.BYTES, b'{"a":1}', ({"a": 1}, "json")),
        (Format.CSV, ["1", "a,b"], (["1", "a,b"], "csv")),
    ],
)
def test_values_are_printed_as_json_text_or_base64(
    fmt: Format, value: object, shown: tuple[object, str]
) -> None:
    raw = value if isinstance(value, bytes) else None
    stored = StoredRecord(value, raw, value)
    line = document(FoundRecord(TopicPartition("t", 0), 5, True, stored, fmt, "k"))
    assert (line["value"], line["value_encoding"]) == shown


@settings(deadline=None, max_examples=50)
@given(
    offset=st.integers(0, 10**11),
    epoch=st.integers(1, 10**6),
    attempt=st.integers(0, 2**62),
    fmt=st.sampled_from(["JSON", "CSV", "TEXT", "BYTES"]),
    codec=st.sampled_from(["none", "bzip2", "zstd"]),
)
def test_an_attempt_s_own_key_is_listed_at_its_first_offset(
    offset: int, epoch: int, attempt: int, fmt: str, codec: str
) -> None:
    """commit_protocol=log writes formats with no place for a stamp at keys of the attempt's
    own: the listing (verify) still reads their partition and first offset from them."""
    text = f"INSERT INTO bkt:arch SELECT * FROM t STOREAS `{fmt}` "
    route = kcql.parse(text + f"PROPERTIES('store.compression'='{codec}')").routes[0]
    tp = TopicPartition("t", 3)
    planned = object_key(route, tp, offset)
    own = attempt_key(planned, epoch, attempt)
    folder, _, name = own.rpartition("/")
    assert own != planned and f"{folder}/{without_suffixes(name)}" == planned
    assert without_suffixes(planned.rpartition("/")[2]) == planned.rpartition("/")[2]
    listed = list_partition_objects(None, route, keys=[(own, 10)])  # type: ignore[arg-type]
    assert [(o.start_offset, o.key) for o in listed[tp]] == [(offset, own)]
