"""cat's pure parts: where an archive is, and how values are printed."""

from __future__ import annotations

import pytest

from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read.decoding import StoredRecord
from kafka_archive.archiver.read.display import document
from kafka_archive.archiver.read.listing import parse_location
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
