"""cat's pure parts: where an archive is, and how values are printed."""

from __future__ import annotations

import pytest

from kafka_archive.archiver.errors import ConfigError
from kafka_archive.archiver.lookup import FoundRecord, parse_location
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.readback import StoredRecord
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
        (Format.TEXT, "héllo", ("héllo", "utf8")),
        (Format.BYTES, b"h\xc3\xa9", ("hé", "utf8")),
        (Format.BYTES, b"\xff\x00", ("/wA=", "base64")),
    ],
)
def test_values_are_printed_as_json_text_or_base64(
    fmt: Format, value: object, shown: tuple[object, str]
) -> None:
    record = FoundRecord(TopicPartition("t", 0), 5, True, StoredRecord(value), fmt, "k")
    line = record.to_json()
    assert (line["value"], line["value_encoding"]) == shown
