"""`validate` and `plan` on the command line: exit codes, the JSON contract, and where each
setting came from (file < environment < flags)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_archive.cli import main

KCQL = (
    "INSERT INTO acme-archive:orders SELECT id, _value.customer.name AS customer FROM orders "
    "PARTITIONBY _header.country STOREAS `AVRO` WITH_FLUSH_COUNT = 5000"
)


def test_validate_says_valid_or_points_at_the_mistake(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--kcql", KCQL]) == 0
    assert capsys.readouterr().out == "valid: 1 statement(s)\n"
    assert main(["validate", "--kcql", KCQL.replace("`AVRO`", "`AVOR`")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kcql:1:")
    assert "Did you mean 'AVRO'?" in err and "^^^^^^" in err


def test_plan_json_is_the_documented_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--kcql", KCQL, "--output", "json"]) == 0
    (route,) = json.loads(capsys.readouterr().out)["routes"]
    assert route["topic"] == "orders" and route["bucket"] == "acme-archive"
    assert route["prefix"] == "orders" and route["format"] == "AVRO"
    assert route["fields"] == [
        {"path": "_value.id", "alias": "id"},
        {"path": "_value.customer.name", "alias": "customer"},
    ]
    assert route["partition_by"] == ["_header.country"] and route["include_keys"] is True
    assert route["flush"] == {"count": 5000, "size": 500000000, "interval_seconds": 3600}
    assert route["kcql"] == (
        "INSERT INTO acme-archive:orders SELECT _value.id, _value.customer.name AS customer "
        "FROM orders PARTITIONBY _header.country STOREAS `AVRO` PROPERTIES('flush.count'=5000)"
    )


def test_plan_shows_each_setting_and_where_it_came_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "archive.yaml"
    config.write_text(
        f'kcql: "{KCQL.replace("`", "")}"\nregion: eu-west-1\n'
        "endpoint_url: http://file:9000\nmaster: local[2]\n"
    )
    monkeypatch.setenv("KAFKA_ARCHIVE_ENDPOINT_URL", "http://env:9000")
    monkeypatch.setenv("KAFKA_ARCHIVE_MASTER", "local[3]")
    assert (
        main(
            [
                "plan",
                "--config",
                str(config),
                "--master",
                "local[4]",
                "-X",
                "sasl.password=hunter2",
                "--output",
                "json",
            ]
        )
        == 0
    )
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert settings["region"]["value"] == "eu-west-1"
    assert settings["endpoint_url"]["value"] == "http://env:9000"
    assert settings["master"]["value"] == "local[4]"
    sources = {k: settings[k]["source"] for k in ("region", "endpoint_url", "master")}
    assert (
        sources["region"].startswith("config file")
        and "KAFKA_ARCHIVE_ENDPOINT_URL" in sources["endpoint_url"]
        and "--master" in sources["master"]
    )
    assert settings["kafka_properties"]["value"] == {"sasl.password": "***"}


SAMPLES = Path(__file__).resolve().parents[3] / "samples"


@pytest.mark.parametrize(
    "path",
    [*sorted((SAMPLES / "kcql").glob("*.kcql")), SAMPLES / "orders.kcql"],
    ids=lambda p: p.name,
)
def test_every_sample_statement_is_valid(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--kcql", path.read_text()]) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        # An error of ours (a file given as --kcql): "kafka-archive: error: ..." in text.
        (["validate", "--kcql", "{file}"], 2, "is a file"),
        # A KCQL error, several lines in text: one JSON object holding them.
        (["validate", "--kcql", KCQL.replace("`AVRO`", "`AVOR`")], 2, "Did you mean 'AVRO'?"),
        # A usage error found by click.
        (["validate", "--no-such-flag"], 2, "--no-such-flag"),
    ],
)
def test_log_format_json_writes_the_final_error_as_json_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    """Every line on stderr under --log-format json is a JSON object, the error included
    (it was plain text: a log shipper parsing JSON dropped the one line that mattered)."""
    path = tmp_path / "statements.kcql"
    path.write_text(KCQL)
    assert main(["--log-format", "json", *(a.replace("{file}", str(path)) for a in args)]) == code
    lines = capsys.readouterr().err.splitlines()
    assert lines, "nothing said"
    documents = [json.loads(line) for line in lines]
    last = documents[-1]
    assert last["level"] == "error" and last["exit_code"] == code, last
    assert says in last["message"], last


def test_reset_state_of_an_iceberg_route_names_the_command_that_exists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """There is no `reset` command: the refusal names `run --reset-state` (it said "reset
    works on objects archives"), before Kafka or S3 is reached."""
    table = (
        "INSERT INTO bkt:tables/orders SELECT * FROM orders STOREAS PARQUET "
        "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders')"
    )
    code = main(
        ["run", "--kcql", table, "--reset-state", "--yes", "--bootstrap-servers", "127.0.0.1:9"]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "run --reset-state works on objects archives" in err, err


def test_a_bad_s3_price_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: s3_price_*_per_1000 are checked before anything runs."""
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_PRICE_GET_PER_1000", "-1")
    assert main(["plan", "--kcql", KCQL]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "kafka-archive: error: s3_price_get_per_1000 from environment "
        "KAFKA_ARCHIVE_S3_PRICE_GET_PER_1000 must be a number of zero or more, not '-1'. "
        "A price in USD per 1,000 requests, e.g. 0.005\n"
    )
