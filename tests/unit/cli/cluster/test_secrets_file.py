"""The secrets file between ``submit`` and the entry script: what it keeps off the command
line comes back, in order, as ``run``'s in-process arguments."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.cli.cluster.secrets_file import (
    SECRETS_FLAG,
    Secrets,
    run_args,
    split_secrets,
    write_secrets,
)


def test_arguments_without_a_secrets_file_are_run_s_as_they_are() -> None:
    assert run_args(["--kcql", "INSERT INTO b SELECT * FROM t"]) == [
        "--kcql",
        "INSERT INTO b SELECT * FROM t",
    ]
    assert run_args([]) == []


def test_the_secret_arguments_written_come_back_after_the_public_ones(tmp_path: Path) -> None:
    args = ["--kcql", "K", "-X", "sasl.password=pw", "-X", "acks=all"]
    public, secret = split_secrets(args)
    assert public == ["--kcql", "K", "-X", "acks=all"] and secret == ("-X", "sasl.password=pw")
    args_file, props_file = write_secrets(tmp_path, Secrets(secret))
    assert args_file is not None and props_file is None
    assert stat.S_IMODE(args_file.stat().st_mode) == 0o600
    assert run_args([SECRETS_FLAG, str(args_file), *public]) == [*public, *secret]


def test_a_secrets_file_of_something_else_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"run_args": [1, 2]}')
    with pytest.raises(ConfigError, match="is not one kafka-archive submit wrote"):
        run_args([SECRETS_FLAG, str(other)])
