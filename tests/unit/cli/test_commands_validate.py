"""`validate` says what `run` will do: over the whole KCQL fixture corpus, a statement
`validate` accepts is accepted by the planning `run` does before it reads Kafka, and a
statement it refuses is refused by `run` with the same error at the same position. Every
other command that takes KCQL (`plan`, `verify`, `cat`, `restore`) refuses a bad layout the
same way, never with an internal error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kafka_archive import kcql
from kafka_archive.archiver.commands import api
from kafka_archive.archiver.core.errors import ArchiveError
from kafka_archive.archiver.formats import avsc
from kafka_archive.cli import main

FIXTURES = Path(__file__).parents[1] / "kcql" / "fixtures"
NOWHERE = ("--bootstrap-servers", "127.0.0.1:9", "--endpoint-url", "http://127.0.0.1:9")


def _corpus() -> list[str]:
    """Every statement of the KCQL fixtures: accepted (identity, lenses) and refused."""
    texts: list[str] = []
    for line in (FIXTURES / "identity.kcql").read_text().splitlines():
        if line.strip() and not line.startswith("--"):
            texts.append(line)
    for name in ("lenses.kcql", "errors.kcql"):
        for block in (FIXTURES / name).read_text().split("\n\n"):
            lines = [line for line in block.splitlines() if not line.startswith("#")]
            text = "\n".join(line for line in lines if not line.startswith("-- ")).strip()
            if text:
                texts.append(text)
    return texts


# Statements whose layout or schema file only a run's planning can judge (what depends on
# how keys are encoded and on S3's key length), with where the error must point.
LAYOUT_CASES = [
    (
        "INSERT INTO bkt SELECT * FROM t PROPERTIES("
        "'layout.template'='{topic}{partition}/{offset}.{ext}')",
        "1:63",
        "cannot tell where {topic} ends",
    ),
    (
        "INSERT INTO bkt:" + "p" * 1000 + " SELECT * FROM t PARTITIONBY a, b",
        "1:1",
        "1024-byte limit",
    ),
    (
        "INSERT INTO bkt SELECT * FROM t STOREAS AVRO "
        "PROPERTIES('avro.schema.file'='/nonexistent/order.avsc')",
        "1:57",
        "cannot read the Avro schema",
    ),
    (
        "INSERT INTO bkt SELECT * FROM t PARTITIONBY _date.YYYY",
        "1:51",
        "week-based year",
    ),
]
CORPUS = _corpus() + [text for text, _, _ in LAYOUT_CASES]


REACHED = 99


class _Reached(ArchiveError):
    """The stand-in for Kafka: run got past its planning (exits 99)."""

    exit_code = REACHED


@pytest.fixture
def planning_run(monkeypatch: pytest.MonkeyPatch) -> list[kcql.Plan]:
    """`run` up to where it reads Kafka: the CLI's planning, then what the archiver checks
    before it asks Kafka for partitions (session.Session: layouts, schema files)."""
    reached: list[kcql.Plan] = []

    def run(settings: Any, plan: kcql.Plan, **_: Any) -> Any:
        api.check_layouts(plan)
        avsc.load(plan)
        reached.append(plan)
        raise _Reached("reached Kafka")

    monkeypatch.setattr(api, "run", run)
    for name in list(__import__("os").environ):
        if name.startswith("KAFKA_ARCHIVE_"):
            monkeypatch.delenv(name)
    return reached


def test_corpus_is_large() -> None:
    assert len(CORPUS) > 150


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_validate_and_run_agree(
    text: str, planning_run: list[kcql.Plan], capsys: pytest.CaptureFixture[str]
) -> None:
    validated = main(["validate", "--kcql", text])
    validate_err = capsys.readouterr().err
    ran = main(["run", "--kcql", text, *NOWHERE])
    run_err = capsys.readouterr().err
    if validated == 0:
        assert ran == REACHED, run_err  # run planned it and went on to read Kafka
        assert planning_run == [api.compile_plan(";\n".join([text]))]
    else:
        assert validated == ran == 2
        assert run_err == validate_err and re.match(r"kcql:\d+:\d+: ", run_err)
        assert planning_run == []


@pytest.mark.parametrize(("text", "where", "message"), LAYOUT_CASES)
def test_validate_points_at_what_run_would_refuse(
    text: str, where: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--kcql", text]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(f"kcql:{where}: ") and message in first, first


BAD_LAYOUT = LAYOUT_CASES[0][0]


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--kcql", BAD_LAYOUT],
        ["verify", "--offline", "--kcql", BAD_LAYOUT, *NOWHERE],
        [
            "cat",
            "--from",
            "bkt",
            "--topic",
            "t",
            "--partition",
            "0",
            "--offset",
            "0",
            "--kcql",
            BAD_LAYOUT,
            "--endpoint-url",
            "http://127.0.0.1:9",
        ],
        [
            "restore",
            "--from",
            "bkt",
            "--topic",
            "t",
            "--to-topic",
            "u",
            "--kcql",
            BAD_LAYOUT,
            *NOWHERE,
        ],
    ],
    ids=["plan", "verify", "cat", "restore"],
)
def test_every_command_refuses_a_bad_layout_with_its_position(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kcql:1:63: ") and "internal error" not in err, err


def test_a_file_given_to_kcql_is_named_with_how_to_pass_its_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "orders.kcql"
    path.write_text("INSERT INTO bkt:arch SELECT * FROM orders")
    assert main(["validate", "--kcql", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file" in err[0] and f'"$(cat {path})"' in err[0]


def test_a_world_readable_config_file_with_a_password_is_warned_on_stderr_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI's own logging: one warning line on stderr, before the command's
    result, naming the file and the fix, never the secret."""
    config = tmp_path / "archive.yaml"
    config.write_text(
        "kcql: INSERT INTO my-bucket:p SELECT * FROM orders\nkafka:\n  sasl.password: pw-7f3c9a\n"
    )
    config.chmod(0o644)
    assert main(["validate", "--config", str(config)]) == 0
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if str(config) in line]
    assert warned == [
        f"kafka-archive: config file {config} holds a secret and is readable by everyone "
        f"(mode 0644): chmod 600 {config}"
    ], err
    assert "pw-7f3c9a" not in err
    config.chmod(0o600)
    assert main(["validate", "--config", str(config)]) == 0
    assert str(config) not in capsys.readouterr().err
