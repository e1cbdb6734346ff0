"""What a run says it asked of S3 (issue 38) is what S3 was asked: a run through our HTTP
proxy (faultproxy.py) between the archiver and moto reports, in --report, the metrics file
and the summary, exactly the requests by type that the proxy saw, retried attempts (503,
500 injected) included, over several Spark tasks (a split partition's pieces) and the
driver; a run with nothing new too. The proxy's types come from each HTTP request's method
and query alone, as AWS bills them."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import faultproxy
import pytest
from archive_helpers import archived_ids, run_args
from faultproxy import FaultProxy
from prometheus_client.parser import text_string_to_metric_families

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

TYPES = ("PUT", "COPY", "POST", "LIST", "GET", "HEAD", "DELETE", "OTHER")


def billed_type(method: str, path: str) -> str:
    """An HTTP request to a path-style S3 endpoint as AWS bills it: a GET of a bucket
    (a listing) or of a multipart upload's parts is a LIST, a POST ``?delete`` (a batch of
    DELETEs) a DELETE, any other request its method."""
    parts = urlsplit(path)
    query = parse_qs(parts.query, keep_blank_values=True)
    key = parts.path.lstrip("/").partition("/")[2]
    if method == "GET":
        return "LIST" if not key or "uploadId" in query else "GET"
    if method == "POST" and "delete" in query:
        return "DELETE"
    return method


def seen(proxy: FaultProxy) -> dict[str, int]:
    counted = Counter(billed_type(method, path) for method, path, _ in proxy.requests)
    assert set(counted) <= set(TYPES), counted
    return {kind: counted.get(kind, 0) for kind in TYPES}


def list_price(by_type: dict[str, int]) -> float:
    """AWS's S3 Standard list prices: $0.005 per 1,000 PUT, COPY, POST, LIST; $0.0004 per
    1,000 GET, HEAD, other; DELETE free."""
    tier1 = sum(by_type[k] for k in ("PUT", "COPY", "POST", "LIST"))
    tier2 = sum(by_type[k] for k in ("GET", "HEAD", "OTHER"))
    return (tier1 * 0.005 + tier2 * 0.0004) / 1000


def summary_requests(out: str) -> dict[str, int]:
    """The counts of a summary's ``S3: N requests (40 PUT, 3 LIST, ...), est. $...`` line."""
    (line,) = [line for line in out.splitlines() if line.startswith("S3: ")]
    found = re.fullmatch(r"S3: (\d+) requests \((.*)\), est\. \$[0-9.]+", line)
    assert found is not None, line
    counts = {kind: int(n) for n, kind in (part.split() for part in found[2].split(", "))}
    assert sum(counts.values()) == int(found[1])
    return {kind: counts.get(kind, 0) for kind in TYPES}


def metric_samples(path: Path, name: str) -> dict[str, float]:
    text = path.read_text()
    return {
        sample.labels["type"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def test_a_runs_reported_s3_requests_are_exactly_what_s3_received(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=3), bucket()
    produce(name, 240, partitions=3)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 20"
    # Each partition (80 offsets) in pieces of 40: six Spark tasks, committed by the driver.
    monkeypatch.setenv("KAFKA_ARCHIVE_MAX_RECORDS_PER_UNIT", "40")
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_MAX_ATTEMPTS", "10")
    # Retriable faults only: every attempt reaches the proxy and is answered.
    monkeypatch.setattr(faultproxy, "FAULTS", ("503", "500"))
    report, noop, metrics = (tmp_path / name for name in ("run.json", "noop.json", "run.prom"))
    with FaultProxy(s3_endpoint, rate=0.05, seed=11) as proxy:
        code = main(run_args(kcql, broker, proxy.url, "--report", str(report)))
        out, err = capsys.readouterr()
        assert code == 0, err
        first = seen(proxy)
        proxy.requests = []
        proxy.rate = 0.0
        assert main(run_args(kcql, broker, proxy.url, "--report", str(noop))) == 0
        again = seen(proxy)
        # The metrics file has the run's figures too (not those of the status it reads
        # for the lag, after the run).
        extra = ("--report", str(tmp_path / "third.json"), "--metrics-file", str(metrics))
        assert main(run_args(kcql, broker, proxy.url, *extra)) == 0
        capsys.readouterr()
        # verify (a Spark task per partition) and restore (the same) say theirs too.
        proxy.requests = []
        assert main(run_args(kcql, broker, proxy.url, "--output", "json", command="verify")) == 0
        verified, verify_seen = json.loads(capsys.readouterr().out), seen(proxy)
        proxy.requests = []
        into = topic(partitions=3)
        restore = ("--from", f"{bkt}:arch", "--topic", name, "--to-topic", into, "--values-only")
        code = main(run_args(kcql, broker, proxy.url, *restore, command="restore"))
        restored, err = capsys.readouterr()
        assert code == 0, err
        restore_seen = seen(proxy)
    assert archived_ids(s3_client, bkt) == list(range(240))
    assert sum(proxy.injected.values()) > 0, proxy.injected  # retries were sent

    document = json.loads(report.read_text())
    assert document["objects"] == 12 and document["records"] == 240
    assert document["s3_requests"] == first, (document["s3_requests"], first)
    assert document["s3_cost_usd"] == pytest.approx(list_price(first), rel=1e-9)
    assert first["PUT"] >= 12 and first["LIST"] > 0 and first["GET"] > 0
    kinds = ", ".join(f"{first[k]} {k}" for k in TYPES if first[k])
    assert f"S3: {sum(first.values())} requests ({kinds}), est. $" in out

    nothing = json.loads(noop.read_text())
    assert nothing["objects"] == 0
    assert nothing["s3_requests"] == again, (nothing["s3_requests"], again)
    assert again["GET"] + again["LIST"] > 0
    third = json.loads((tmp_path / "third.json").read_text())["s3_requests"]
    assert metric_samples(metrics, "kafka_archive_run_s3_requests") == third

    assert verified["clean"] and verified["s3_requests"] == verify_seen, verify_seen
    assert verify_seen["GET"] >= 12  # every object read
    assert summary_requests(restored) == restore_seen
    assert restore_seen["GET"] >= 12


def test_status_cat_and_compact_report_exactly_the_s3_requests_s3_received(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every command says what it asked of S3, by type with its price (issue 38): status
    (text and JSON), cat (on stderr: its stdout is the records) and compact, each through
    the proxy with retried attempts, equal to what the proxy saw."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 80, partitions=2)
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")  # compact needs a commit log
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_MAX_ATTEMPTS", "10")
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 10"
    assert main(run_args(kcql, broker, s3_endpoint)) == 0
    capsys.readouterr()
    monkeypatch.setattr(faultproxy, "FAULTS", ("503", "500"))
    cat = ("--from", f"{bkt}:arch", "--topic", name, "--partition", "1", "--offset", "5")
    with FaultProxy(s3_endpoint, rate=0.05, seed=5) as proxy:
        assert main(run_args(kcql, broker, proxy.url, command="status")) == 0
        status_out, status_seen = capsys.readouterr().out, seen(proxy)
        proxy.requests = []
        assert main(run_args(kcql, broker, proxy.url, "--output", "json", command="status")) == 0
        status_json, status_json_seen = json.loads(capsys.readouterr().out), seen(proxy)
        proxy.requests = []
        where = ("--endpoint-url", proxy.url, "--kcql", kcql)
        assert main(["cat", *cat, "--count", "20", *where]) == 0
        cat_out, cat_err = capsys.readouterr()
        cat_seen = seen(proxy)
        proxy.requests = []
        code = main(run_args(kcql, broker, proxy.url, "--target-size", "1MB", command="compact"))
        compact_out, err = capsys.readouterr()
        assert code == 0, err
        compact_seen = seen(proxy)
    assert sum(proxy.injected.values()) > 0, proxy.injected  # retries were sent

    assert (
        summary_requests(status_out) == status_seen and status_seen["LIST"] + status_seen["GET"] > 0
    ), status_seen
    assert status_json["s3_requests"] == status_json_seen, status_json_seen
    assert status_json["s3_cost_usd"] == pytest.approx(list_price(status_json_seen), rel=1e-9)
    records = [json.loads(line) for line in cat_out.splitlines()]
    assert [r["offset"] for r in records] == list(range(5, 25))
    assert summary_requests(cat_err) == cat_seen and cat_seen["GET"] >= 2, cat_seen
    assert "S3: " not in cat_out
    assert summary_requests(compact_out) == compact_seen, compact_seen
    assert compact_seen["PUT"] >= 2 and compact_seen["GET"] >= 8, compact_seen  # 8 objects read


def test_status_cat_and_verify_report_their_s3_requests_as_run_and_compact_do(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``--report FILE`` on status, cat and verify (issue 38): the command's summary as JSON
    with its S3 requests by type and their estimated price, in run's and compact's report
    format, equal to the command's own S3 line and to what the proxy saw (retries
    included)."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 40, partitions=2)
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_MAX_ATTEMPTS", "10")
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 10"
    assert main(run_args(kcql, broker, s3_endpoint)) == 0
    capsys.readouterr()
    monkeypatch.setattr(faultproxy, "FAULTS", ("503", "500"))
    reports = {command: tmp_path / f"{command}.json" for command in ("status", "cat", "verify")}
    cat = ("cat", "--from", f"{bkt}:arch", "--topic", name, "--partition", "0", "--offset", "3")
    with FaultProxy(s3_endpoint, rate=0.05, seed=3) as proxy:
        lines, saw = {}, {}
        for command in ("status", "verify"):
            proxy.requests = []
            extra = ("--report", str(reports[command]))
            code = main(run_args(kcql, broker, proxy.url, *extra, command=command))
            out, err = capsys.readouterr()
            assert code == 0, err
            lines[command], saw[command] = summary_requests(out), seen(proxy)
        proxy.requests = []
        where = ("--endpoint-url", proxy.url, "--kcql", kcql, "--report", str(reports["cat"]))
        assert main([*cat, "--count", "12", *where]) == 0
        out, err = capsys.readouterr()
        assert [json.loads(line)["offset"] for line in out.splitlines()] == list(range(3, 15))
        lines["cat"], saw["cat"] = summary_requests(err), seen(proxy)
    assert sum(proxy.injected.values()) > 0, proxy.injected  # retries were sent

    for command, path in reports.items():
        document = json.loads(path.read_text())
        assert document["command"] == command
        requests = {kind: document["s3_requests"].get(kind, 0) for kind in TYPES}
        assert requests == lines[command] == saw[command], (command, requests, saw[command])
        assert document["s3_cost_usd"] == pytest.approx(list_price(saw[command]), rel=1e-9)
    assert saw["verify"]["GET"] >= 4 and saw["cat"]["GET"] >= 2, saw  # objects read
    assert json.loads(reports["verify"].read_text())["clean"] is True
    assert len(json.loads(reports["status"].read_text())["partitions"]) == 2
    assert json.loads(reports["cat"].read_text())["records"] == 12
