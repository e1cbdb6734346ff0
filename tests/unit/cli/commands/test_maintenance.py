"""The maintenance commands' own parsing and refusals, before anything is read or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_archive import kcql
from kafka_archive.archiver.commands.erase import erase, expire
from kafka_archive.archiver.config.settings import KafkaSettings, Settings
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.cli import main
from kafka_archive.cli.commands.maintenance import parse_duration, read_keys


def test_keys_come_from_the_flags_and_the_file_blank_lines_skipped(tmp_path: Path) -> None:
    path = tmp_path / "keys.txt"
    path.write_text("alice\n\nbob\nçé\n", encoding="utf-8")
    assert read_keys(("k1",), path) == [b"k1", b"alice", b"bob", "çé".encode()]
    with pytest.raises(ConfigError, match="--key-file"):
        read_keys((), tmp_path / "missing.txt")


def test_durations() -> None:
    assert parse_duration("90d") == 90 * 86400
    assert parse_duration("12h") == 12 * 3600
    assert parse_duration("45") == 45


def test_erase_of_records_without_keys_and_expire_of_records_without_times_are_refused() -> None:
    plan = kcql.parse("INSERT INTO bkt:p SELECT * FROM t STOREAS `PARQUET`")
    with pytest.raises(ConfigError, match="no record keys") as found:
        erase(Settings(KafkaSettings("")), plan, [b"k"])
    assert "--key-field" in (found.value.hint or "")
    with pytest.raises(ConfigError, match="no record times"):
        expire(Settings(KafkaSettings("")), plan, 0)
    with pytest.raises(ConfigError, match="no key given"):
        erase(Settings(KafkaSettings("")), plan, [], "user")


@pytest.mark.parametrize(
    "extra",
    [[], ["--before", "2026-01-01", "--older-than", "90d"], ["--older-than", "soon"]],
)
def test_expire_needs_one_cut(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["expire", "--kcql", "INSERT INTO bkt:p SELECT * FROM t", *extra]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("--before" in err or "--older-than" in err), err
