"""Archives other sinks wrote (issue 39): ``verify``, ``cat``, ``restore`` with ``--layout``,
and ``adopt`` followed by ``run``.

The archives are built from the topic's real records the way each sink writes them
(``foreign_sinks.py``, each rule naming the sink's source file), uploaded to moto's S3
server; what kafka-archive writes and restores is read back with boto3 + json and a plain
Kafka consumer, never with our readers.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import fastavro
import foreign_sinks as sinks
import pytest
from archive_helpers import KafkaRecord, archived_ids, cli, kafka_records, run_args
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

pytestmark = pytest.mark.integration

BASE_MS = 1_714_999_980_000


@dataclass(frozen=True)
class Case:
    name: str
    layout: str
    build: sinks.Builder
    options: tuple[str, ...] = ()
    keeps_records: bool = False  # key, headers and timestamp come back


CASES = [
    Case("confluent-json", "confluent", sinks.confluent_json),
    Case("confluent-avro", "confluent", sinks.confluent_avro),
    Case("confluent-parquet", "confluent", sinks.confluent_parquet),
    Case("confluent-bytes", "confluent", sinks.confluent_bytes),
    Case("lenses-envelope", "lenses", sinks.lenses_json, keeps_records=True),
    Case("lenses-values-only", "lenses", sinks.lenses_values_json),
    Case(
        "aiven-csv-gzip",
        "aiven",
        sinks.aiven_csv,
        ("format.output.fields=key,value,offset,timestamp,headers",),
        keeps_records=True,
    ),
    Case(
        "aiven-jsonl",
        "aiven",
        sinks.aiven_jsonl,
        ("format.output.type=jsonl", "format.output.fields=value,key,offset,timestamp,headers"),
        keeps_records=True,
    ),
    Case(
        "aiven-parquet",
        "aiven",
        sinks.aiven_parquet,
        ("format.output.type=parquet", "format.output.fields=key,offset,timestamp,headers,value"),
        keeps_records=True,
    ),
    Case(
        "aiven-json-array",
        "aiven",
        sinks.aiven_json,
        ("format.output.type=json", "format.output.fields=value,offset"),
    ),
    Case("aiven-csv-default", "aiven", sinks.aiven_csv_default),
    Case("secor-sequencefile", "secor", sinks.secor),
]
PARTITIONED = [
    Case("confluent-field-json", "confluent", sinks.confluent_field_json),
    Case("confluent-hourly-json", "confluent", sinks.confluent_hourly_json),
    Case(
        "aiven-padded-template-jsonl",
        "aiven",
        sinks.aiven_padded_jsonl,
        (
            "file.name.template={{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}",
            "format.output.type=jsonl",
            "format.output.fields=value,offset",
        ),
    ),
    Case("lenses-keys-and-values", "lenses", sinks.lenses_keys_and_values, keeps_records=True),
]


def _value(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", "region": "us" if i % 3 == 0 else "eu"}


@pytest.fixture
def foreign(
    broker: str,
    produce: Callable[..., None],
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> Callable[..., tuple[str, str, list[KafkaRecord], list[tuple[str, int]]]]:
    """``foreign(case, count, size, archived=None, under="sink/")``: a topic of ``count``
    records in one partition and an archive of its first ``archived`` (all) records in the
    case's sink's objects of ``size`` records, under ``under``; returns (topic, bucket,
    records, each object's key and first offset, -1 for the sink's own files)."""

    def make(
        case: Case,
        count: int = 30,
        size: int = 10,
        archived: int | None = None,
        under: str = "sink/",
    ) -> tuple[str, str, list[KafkaRecord], list[tuple[str, int]]]:
        name, bkt = topic(partitions=1), bucket()
        produce(
            name,
            count,
            partitions=1,
            value=_value,
            key=lambda i: f"k{i}".encode(),
            headers=lambda i: [("trace", f"t{i}".encode())],
            timestamp=BASE_MS,
        )
        records = kafka_records(broker, name, 1)
        keys = []
        for key, body, first in case.build(name, records[: archived or count], size):
            s3_client.put_object(Bucket=bkt, Key=f"{under}{key}", Body=body)
            keys.append((f"{under}{key}", first))
        return name, bkt, records, keys

    return make


def _verify(
    capsys: pytest.CaptureFixture[str], case: Case, bkt: str, broker: str, endpoint: str, *more: str
) -> tuple[int, str, str]:
    options = [a for o in case.options for a in ("--layout-option", o)]
    return cli(
        capsys,
        "verify",
        "--from",
        f"{bkt}:sink",
        "--layout",
        case.layout,
        *options,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        endpoint,
        *more,
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_verify_is_clean_on_a_complete_archive_and_names_a_deleted_object(
    case: Case,
    foreign: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt, _, keys = foreign(case)

    code, out, err = _verify(capsys, case, bkt, broker, s3_endpoint)
    assert code == 0, out + err
    assert f"{name}-0: 3 object(s), 30 record(s), offsets 0..29, compared with Kafka 0..29" in out

    gone = [k for k, first in keys if first >= 0][1]
    s3_client.delete_object(Bucket=bkt, Key=gone)
    code, out, err = _verify(capsys, case, bkt, broker, s3_endpoint)
    assert code == 1, out + err
    assert "offsets 10..19" in out and "missing" in out
    if case.layout != "lenses":  # Lenses names an object by its last offset: not predictable
        assert gone in out, out
    else:
        assert f"sink/{name}/0/000000000010_" in out, out


@pytest.mark.parametrize("case", PARTITIONED, ids=[c.name for c in PARTITIONED])
def test_verify_reads_partitioned_layouts_and_names_a_deleted_object(
    case: Case,
    foreign: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt, _, keys = foreign(case, count=30, size=5)

    code, out, err = _verify(capsys, case, bkt, broker, s3_endpoint)
    assert code == 0, out + err
    assert f"{name}-0: {len(keys)} object(s), 30 record(s)" in out

    gone, first = keys[2]
    s3_client.delete_object(Bucket=bkt, Key=gone)
    code, out, err = _verify(capsys, case, bkt, broker, s3_endpoint)
    assert code == 1, out + err
    assert f"offsets {first}.." in out and "missing" in out, out
    if case.layout != "lenses":
        assert gone.rpartition("/")[2] in out, out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cat_prints_the_records_with_their_offsets_and_what_the_sink_did_not_keep(
    case: Case,
    foreign: Callable[..., Any],
    s3_endpoint: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt, records, _ = foreign(case)
    options = [a for o in case.options for a in ("--layout-option", o)]

    code, out, err = cli(
        capsys,
        "cat",
        "--from",
        f"{bkt}:sink",
        "--layout",
        case.layout,
        *options,
        "--topic",
        name,
        "--partition",
        "0",
        "--offset",
        "12",
        "--count",
        "3",
        "--endpoint-url",
        s3_endpoint,
    )
    assert code == 0, err
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["offset"] for d in docs] == [12, 13, 14]
    assert all(d["layout"] == case.layout and d["offset_exact"] for d in docs)
    for doc, record in zip(docs, records[12:15], strict=True):
        value = doc["value"] if doc["value_encoding"] == "json" else json.loads(doc["value"])
        assert value == json.loads(record.value or b"")
        if case.keeps_records:
            assert doc["unknown"] == []
            assert doc["key"] == record.key.decode() if record.key else None
            assert doc["timestamp"] == record.timestamp
            assert doc["headers"] == [["trace", f"t{record.offset}", "text"]]
        else:
            assert doc["unknown"] == ["key", "headers", "timestamp"]
            assert doc["key"] is None and doc["headers"] is None and doc["timestamp"] is None


def _read_topic(broker: str, topic: str) -> list[KafkaRecord]:
    return kafka_records(broker, topic, 1)


RESTORED = [
    c
    for c in CASES
    if c.name
    in (
        "confluent-json",
        "confluent-avro",
        "confluent-parquet",
        "confluent-bytes",
        "lenses-envelope",
        "lenses-values-only",
        "aiven-csv-gzip",
        "aiven-jsonl",
        "aiven-json-array",
        "aiven-csv-default",
        "secor-sequencefile",
    )
]


@pytest.mark.parametrize("case", RESTORED, ids=[c.name for c in RESTORED])
def test_restore_round_trips_what_the_sink_kept_and_says_what_it_did_not(
    case: Case,
    foreign: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt, records, _ = foreign(case, count=25, size=10)
    target = topic(partitions=1)
    options = [a for o in case.options for a in ("--layout-option", o)]
    args = [
        "restore",
        "--from",
        f"{bkt}:sink",
        "--layout",
        case.layout,
        *options,
        "--topic",
        name,
        "--to-topic",
        target,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        s3_endpoint,
    ]
    if not case.keeps_records:
        code, _, err = cli(capsys, *args)
        assert code == 2, err
        assert "keeps values only (no keys, headers or timestamps)" in err
        assert "--values-only" in err
        args.append("--values-only")
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    assert ("restored as the row's compact JSON" in err) == (
        case.name in ("confluent-avro", "confluent-parquet")
    )
    restored = _read_topic(broker, target)
    assert [json.loads(r.value or b"") for r in restored] == [
        json.loads(r.value or b"") for r in records
    ]
    if case.keeps_records:
        assert [(r.key, r.headers, r.timestamp) for r in restored] == [
            (r.key, r.headers, r.timestamp) for r in records
        ]
    else:
        assert all(r.key is None and not r.headers for r in restored)


def _objects_json(s3: Any, bkt: str, prefix: str) -> list[int]:
    return archived_ids(s3, bkt, prefix)


def _commit_group(broker: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": broker, "group.id": group})
    consumer.commit(offsets=[KafkaTopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


def test_adopt_then_run_continues_the_archive_without_a_gap_or_a_duplicate(
    foreign: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = CASES[0]  # Confluent's default partitioner, JSON
    name, bkt, records, keys = foreign(case, count=30, size=10, archived=20)
    _commit_group(broker, f"connect-{name}", name, 20)  # the stopped connector's progress
    kcql = f"INSERT INTO {bkt}:ours SELECT * FROM {name} STOREAS JSON"
    before = {o["Key"] for o in s3_client.list_objects_v2(Bucket=bkt, Prefix="sink/")["Contents"]}

    code, out, err = cli(
        capsys,
        "adopt",
        "--from",
        f"{bkt}:sink",
        "--layout",
        "confluent",
        "--group",
        f"connect-{name}",
        *run_args(kcql, broker, s3_endpoint, command=None),
    )
    assert code == 0, err
    assert "next run starts at 20" in out

    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    after = {o["Key"] for o in s3_client.list_objects_v2(Bucket=bkt, Prefix="sink/")["Contents"]}
    assert after == before  # nothing written into the sink's archive
    foreign_ids = []
    for key, _ in sorted(keys):
        body = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read()
        foreign_ids += [json.loads(line)["id"] for line in body.splitlines()]
    ours = _objects_json(s3_client, bkt, "ours/")
    assert foreign_ids == list(range(20))
    assert ours == list(range(20, 30))
    assert sorted(foreign_ids + ours) == [json.loads(r.value or b"")["id"] for r in records]


def test_adopt_refuses_an_archive_with_a_hole_and_writes_nothing(
    foreign: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = CASES[0]
    name, bkt, _, keys = foreign(case, count=30, size=10)
    s3_client.delete_object(Bucket=bkt, Key=keys[1][0])
    kcql = f"INSERT INTO {bkt}:ours SELECT * FROM {name} STOREAS JSON"

    code, out, err = cli(
        capsys,
        "adopt",
        "--from",
        f"{bkt}:sink",
        "--layout",
        "confluent",
        *run_args(kcql, broker, s3_endpoint, command=None),
    )
    assert code == 16, err
    assert "GAP offsets 10..19: in no object" in out
    assert "offsets 10..19 are in no object" in err and "--allow-gaps" in err
    assert "Contents" not in s3_client.list_objects_v2(Bucket=bkt, Prefix="ours/")


def test_adopt_then_run_in_the_sinks_own_layout_continues_its_archive_in_place(
    foreign: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The run writes on in Confluent's names ('layout'='confluent') beside the sink's
    objects: the whole prefix is then one archive, which verify --layout finds complete."""
    case = CASES[0]
    name, bkt, records, _ = foreign(case, count=30, size=10, archived=20)
    kcql = (
        f"INSERT INTO {bkt}:sink/topics SELECT * FROM {name} STOREAS JSON "
        "PROPERTIES('layout'='confluent')"
    )
    code, out, err = cli(
        capsys,
        "adopt",
        "--from",
        f"{bkt}:sink",
        "--layout",
        "confluent",
        *run_args(kcql, broker, s3_endpoint, command=None),
    )
    assert code == 0, err
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err

    ids = []
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bkt, Prefix="sink/")
    for item in (i for page in pages for i in page.get("Contents", [])):
        if "/.kafka-archive/" not in item["Key"]:
            assert item["Key"].startswith(f"sink/topics/{name}/partition=0/{name}+0+00000000")
            body = s3_client.get_object(Bucket=bkt, Key=item["Key"])["Body"].read()
            ids += [json.loads(line)["id"] for line in body.splitlines()]
    assert sorted(ids) == list(range(30)) == [json.loads(r.value or b"")["id"] for r in records]
    code, out, err = _verify(capsys, case, bkt, broker, s3_endpoint)
    assert code == 0, out + err
    assert "offsets 0..29, compared with Kafka 0..29" in out


def test_adopt_with_allow_gaps_writes_the_state_and_reports_the_hole(
    foreign: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = next(c for c in CASES if c.layout == "lenses")  # named by last offsets
    name, bkt, _, keys = foreign(case, count=30, size=10)
    s3_client.delete_object(Bucket=bkt, Key=keys[1][0])
    kcql = f"INSERT INTO {bkt}:ours SELECT * FROM {name} STOREAS JSON"

    code, out, err = cli(
        capsys,
        "adopt",
        "--from",
        f"{bkt}:sink",
        "--layout",
        "lenses",
        "--allow-gaps",
        *run_args(kcql, broker, s3_endpoint, command=None),
    )
    assert code == 0, err
    assert "GAP offsets 10..19: in no object" in out
    assert "next run starts at 30" in out
    assert (
        "the sink's index (.indexes/<connector>/.locks/<topic>/<partition>.lock) says it "
        "committed offset 29" in out
    )
    state = s3_client.get_object(Bucket=bkt, Key=f"ours/.kafka-archive/state/{name}/0.json")
    assert json.loads(state["Body"].read())["next_offset"] == 30


def test_restore_of_a_partitioner_spread_archive_resumes_without_loss_or_duplicates(
    foreign: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Confluent's field partitioner keeps no offsets: the restore goes object by object,
    says that the order is not the original, and its progress resumes run after run."""
    case = PARTITIONED[0]
    name, bkt, _, _ = foreign(case, count=30, size=4)
    target = topic(partitions=1)
    args = [
        "restore",
        "--from",
        f"{bkt}:sink",
        "--layout",
        "confluent",
        "--topic",
        name,
        "--to-topic",
        target,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        s3_endpoint,
        "--values-only",
        "--max-records-per-partition",
        "7",
    ]
    for _ in range(5):
        code, _, err = cli(capsys, *args)
        assert code == 0, err
    assert "not in their original order" in err
    restored = sorted(json.loads(r.value or b"")["id"] for r in _read_topic(broker, target))
    assert restored == list(range(30))


def test_the_layout_comes_from_an_imported_connector_config(
    foreign: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """import-connector of the Confluent sink that wrote the archive, then adopt, run and
    verify with that config alone: no --layout, and adopt takes --from from the KCQL."""
    name, bkt, _, _ = foreign(CASES[0], count=30, size=10, archived=20, under="")
    connector = tmp_path / "connector.json"
    connector.write_text(
        json.dumps(
            {
                "name": "orders-archive",
                "config": {
                    "connector.class": "io.confluent.connect.s3.S3SinkConnector",
                    "topics": name,
                    "s3.bucket.name": bkt,
                    "topics.dir": "topics",
                    "store.url": s3_endpoint,
                    "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
                    "flush.size": "10",
                },
            }
        )
    )
    code, config_text, err = cli(capsys, "import-connector", str(connector))
    assert code == 0, err
    config = tmp_path / "archive.yaml"
    config.write_text(config_text)
    options = ["--config", str(config), "--bootstrap-servers", broker]

    code, out, err = cli(capsys, "adopt", *options)
    assert code == 0, err
    assert "(confluent layout)" in out and "next run starts at 20" in out
    code, _, err = cli(capsys, "run", *options)
    assert code == 0, err
    code, out, err = cli(capsys, "verify", "--from", f"{bkt}:topics", *options)
    assert code == 0, out + err
    assert "(confluent layout): clean" in out
    assert "offsets 0..29, compared with Kafka 0..29" in out


ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


@pytest.fixture
def registry() -> Iterator[str]:
    """A Schema Registry stub answering ``GET /schemas/ids/7`` with :data:`ORDER`."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_GET(self) -> None:
            found = self.path == "/schemas/ids/7"
            body = json.dumps({"schema": json.dumps(ORDER)} if found else {}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_verify_compares_registry_framed_avro_values_with_the_sinks_avro_rows(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    registry: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Confluent's usual Avro archive: the AvroConverter read framed values (magic byte,
    schema id) and AvroRecordWriterProvider wrote the data with its schema in the file."""
    parsed = fastavro.parse_schema(ORDER)
    orders = [{"id": i, "amount": i / 4, "note": None if i % 3 else f"n{i}"} for i in range(12)]

    def frame(datum: dict[str, Any]) -> bytes:
        out = io.BytesIO(b"\x00" + (7).to_bytes(4, "big"))
        out.seek(5)
        fastavro.schemaless_writer(out, parsed, datum)
        return out.getvalue()

    name, bkt = topic(partitions=1), bucket()
    produce(name, ({"value": frame(o), "partition": 0} for o in orders))
    for first in (0, 6):
        body = io.BytesIO()
        fastavro.writer(body, parsed, orders[first : first + 6])
        key = f"sink/topics/{name}/partition=0/{name}+0+{first:010d}.avro"
        s3_client.put_object(Bucket=bkt, Key=key, Body=body.getvalue())
    case = CASES[1]

    code, out, err = _verify(capsys, case, bkt, broker, s3_endpoint)
    assert code == 1, out + err  # without the registry the framed bytes are not the rows
    assert "archived record differs from Kafka (value)" in out
    code, out, err = _verify(
        capsys, case, bkt, broker, s3_endpoint, "--schema-registry-url", registry
    )
    assert code == 0, out + err
    assert "offsets 0..11, compared with Kafka 0..11" in out
