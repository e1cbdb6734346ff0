"""The --start setting and ISO-8601 times, parsed (pure logic)."""

from __future__ import annotations

import pytest

from kafka_archive.archiver.config.positions import (
    StartKind,
    StartPosition,
    parse_start,
    parse_timestamp,
)
from kafka_archive.archiver.core.errors import ConfigError


def test_parse_start_forms() -> None:
    assert parse_start("earliest") == StartPosition(StartKind.EARLIEST)
    assert parse_start("LATEST") == StartPosition(StartKind.LATEST)
    assert parse_start("group:connect-s3-sink") == StartPosition(
        StartKind.GROUP, group="connect-s3-sink"
    )
    assert parse_start("2026-11-01T00:00:00Z") == StartPosition(
        StartKind.TIMESTAMP, timestamp_ms=1_793_491_200_000
    )


@pytest.mark.parametrize("bad", ["", "yesterday", "group:", "2026-13-01"])
def test_parse_start_refuses_nonsense(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_start(bad)


def test_timestamps_without_zone_are_utc_and_offsets_apply() -> None:
    assert parse_timestamp("2026-11-01", "x") == parse_timestamp("2026-11-01T00:00:00Z", "x")
    assert parse_timestamp("2026-11-01T02:00:00+02:00", "x") == parse_timestamp("2026-11-01", "x")
