"""What the CLI says on stderr itself: one line, or under --log-format json one JSON object,
decided per invocation (no module-level flag)."""

from __future__ import annotations

import json
import logging

import pytest

from kafka_archive.cli.invocation import Invocation, json_requested


@pytest.mark.parametrize(
    ("args", "requested"),
    [
        (["--log-format=json", "run"], True),
        (["--log-format", "json", "run"], True),
        (["--log-format", "text", "run"], False),
        (["--log-format"], False),  # nothing after it: no IndexError
        (["run", "--kcql", "json"], False),
        ([], False),
    ],
)
def test_json_is_requested_only_by_the_log_format_option(args: list[str], requested: bool) -> None:
    assert json_requested(args) is requested


def test_a_text_line_is_prefixed_with_the_program_name() -> None:
    assert Invocation().line("lag 5 exceeds --max-lag 1") == (
        "kafka-archive: lag 5 exceeds --max-lag 1"
    )


def test_a_json_line_is_one_object_with_level_and_exit_code() -> None:
    line = Invocation(json_lines=True).line("error: two\nlines", logging.ERROR, 2)
    assert "\n" not in line
    document = json.loads(line)
    assert document["level"] == "error" and document["logger"] == "kafka_archive"
    assert document["message"] == "error: two\nlines" and document["exit_code"] == 2
    assert "exit_code" not in json.loads(Invocation(json_lines=True).line("reset job j"))


def test_each_invocation_keeps_its_own_format(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = Invocation(json_lines=True), Invocation()
    first.say("one", logging.WARNING)
    second.say("two")
    lines = capsys.readouterr().err.splitlines()
    assert json.loads(lines[0])["level"] == "warning" and lines[1] == "kafka-archive: two"
