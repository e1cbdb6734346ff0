"""import-connector: Lenses and Confluent S3 sink configs as kafka-archive config files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kafka_archive import kcql
from kafka_archive.archiver.config.load import load_settings
from kafka_archive.cli import main
from kafka_archive.cli.connector import importer

SAMPLES = Path(__file__).resolve().parents[4] / "samples" / "connectors"


def imported(name: str) -> importer.Imported:
    return importer.convert(importer.load((SAMPLES / name).read_text()))


def test_lenses_statements_are_kept_and_credentials_are_not() -> None:
    result = imported("lenses-s3-sink.json")
    assert result.config["job_name"] == "orders-archive"
    assert result.config["region"] == "eu-west-1"
    routes = kcql.parse(";".join(result.config["kcql"])).routes
    assert [(r.topic, str(r.target), r.format.value, r.flush.count) for r in routes] == [
        ("orders", "acme-archive:orders", "AVRO", 50000),
        ("payments", "acme-archive:payments", "JSON", 50000),
    ]
    text = result.yaml() + "\n".join(result.warnings)
    assert "example/secret/key" not in text and "AKIAEXAMPLE" not in text
    warned = " ".join(result.warnings)
    for key in (
        "connect.s3.aws.secret.key",
        "tasks.max",
        "connect.s3.error.policy",
    ):
        assert key in warned
    # connect.s3.padding.strategy=LeftPad: the offset padded to 12 digits, carried over.
    assert all(r.naming == kcql.KeyNaming(offset_width=12) for r in routes)


def test_confluent_settings_become_kcql_properties_and_layout() -> None:
    result = imported("confluent-s3-sink.json")
    routes = kcql.parse(";".join(result.config["kcql"])).routes
    assert [r.topic for r in routes] == ["clicks", "views"]
    route = routes[0]
    assert (route.target.bucket, route.target.prefix, route.format.value) == (
        "acme-events",
        "raw",
        "PARQUET",
    )
    assert route.flush.count == 10000 and route.flush.interval_seconds == 600
    assert route.layout.kind.value == "hive" and route.codecs.parquet == "zstd"
    assert "aws.secret.access.key" in " ".join(result.warnings)


def test_confluent_regex_topics_and_field_partitioner() -> None:
    result = importer.convert(
        {
            "s3.bucket.name": "bkt-events",
            "topics.regex": "orders-.*",
            "flush.size": "5",
            "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
            "partition.field.name": "country,kind",
            "errors.tolerance": "all",
        }
    )
    assert result.config["topics_regex"] == "orders-.*"
    (route,) = kcql.parse(result.config["kcql"][0]).routes
    assert route.all_topics and [r.path for r in route.partition_by] == [("country",), ("kind",)]
    assert route.layout.kind.value == "confluent" and route.error_policy.value == "skip"


def test_confluent_schema_compatibility_carries_over_for_avro_and_parquet() -> None:
    def convert(fmt: str, compatibility: str) -> importer.Imported:
        return importer.convert(
            {
                "s3.bucket.name": "bkt-events",
                "topics": "orders",
                "flush.size": "100",
                "format.class": f"io.confluent.connect.s3.format.{fmt}",
                "schema.compatibility": compatibility,
            }
        )

    result = convert("avro.AvroFormat", "BACKWARD")
    (route,) = kcql.parse(result.config["kcql"][0]).routes
    assert route.schema_compatibility.value == "BACKWARD" and not result.warnings
    result = convert("json.JsonFormat", "FULL")
    (route,) = kcql.parse(result.config["kcql"][0]).routes
    assert route.schema_compatibility.value == "NONE"
    assert "schema.compatibility=FULL: applies to AVRO and PARQUET" in result.warnings[0]


def test_confluent_record_field_time_becomes_the_time_field() -> None:
    result = importer.convert(
        {
            "s3.bucket.name": "bkt-events",
            "topics": "orders",
            "flush.size": "100",
            "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
            "timestamp.extractor": "RecordField",
            "timestamp.field": "created_at",
        }
    )
    (route,) = kcql.parse(result.config["kcql"][0]).routes
    assert route.layout.kind.value == "hive"
    assert route.layout.time_field is not None and route.layout.time_field.path == ("created_at",)
    assert not any("timestamp" in w for w in result.warnings)


def test_the_printed_config_loads_as_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["import-connector", str(SAMPLES / "confluent-s3-sink.json")]) == 0
    out, err = capsys.readouterr()
    assert "warning: tasks.max" in err
    config = tmp_path / "archive.yaml"
    config.write_text(out)
    assert yaml.safe_load(out)["job_name"] == "clicks-s3"
    loaded = load_settings(config, {}, {"bootstrap_servers": "broker:9092"})
    assert loaded.settings.job_name == "clicks-s3"


@pytest.mark.parametrize(
    ("body", "message"),
    [("{nope", "not JSON"), (json.dumps({"config": {"tasks.max": "1"}}), "neither a Lenses")],
)
def test_unreadable_configs_fail_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str
) -> None:
    path = tmp_path / "connector.json"
    path.write_text(body)
    assert main(["import-connector", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_confluent_bucket_settings_become_the_s3_settings(tmp_path: Path) -> None:
    config = {
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "s3.bucket.name": "arch",
        "topics": "t",
        "s3.ssea.name": "aws:kms",
        "s3.sse.kms.key.id": "alias/archive",
        "s3.acl.canned": "bucket-owner-full-control",
        "s3.path.style.access.enabled": "true",
        "s3.sse.customer.key": "",
        "sts.role.arn": "arn:aws:iam::123456789012:role/sink",
        "sts.role.external.id": "ext",
    }
    result = importer.convert(config)
    path = tmp_path / "archive.yaml"
    path.write_text(result.yaml())
    s3 = load_settings(path, {}, {}).settings.s3
    assert (s3.sse, s3.sse_kms_key_id, s3.acl) == (
        "aws:kms",
        "alias/archive",
        "bucket-owner-full-control",
    )
    assert (s3.addressing_style, s3.role_arn, s3.external_id) == (
        "path",
        "arn:aws:iam::123456789012:role/sink",
        "ext",
    )


def test_a_properties_file_is_read_as_connect_standalone_reads_it() -> None:
    """connect-standalone takes a Java .properties file (continued lines, escapes, `:` or
    blanks as separators, comments), the form of the Lenses documentation's examples."""
    result = imported("lenses-s3-sink.properties")
    assert result.config["job_name"] == "orders-archive"
    assert result.config["kcql"] == [
        "INSERT INTO acme-archive:orders SELECT * FROM orders PARTITIONBY _header.country "
        "STOREAS `AVRO` PROPERTIES('flush.count'=50000, 'flush.interval.time'='arrival')",
        "INSERT INTO acme-archive:payments SELECT * FROM payments STOREAS `JSON` "
        "PROPERTIES('flush.interval'=600, 'flush.interval.time'='arrival')",
    ]
    text = result.yaml() + "\n".join(result.warnings)
    assert "example/secret/key" not in text and "AKIAEXAMPLE" not in text
    assert importer.load(
        "! a comment\n"
        "s3.bucket.name : acme\\\n"
        "   -archive\n"
        "topics.regex orders\\\\..*\n"
        "  flush.size=1000\n"
        "path.format='year'\\=YYYY\n"
        "unicode=caf\\u00e9\n"
        "empty=\n"
    ) == {
        "s3.bucket.name": "acme-archive",
        "topics.regex": "orders\\..*",
        "flush.size": "1000",
        "path.format": "'year'=YYYY",
        "unicode": "café",
        "empty": "",
    }


def test_a_confluent_properties_file_converts_like_its_json(tmp_path: Path) -> None:
    settings = json.loads((SAMPLES / "confluent-s3-sink.json").read_text())["config"]
    lines = [f"{k}={v.replace(chr(92), chr(92) * 2)}" for k, v in settings.items()]
    as_json = importer.convert(importer.load(json.dumps(settings)))
    as_properties = importer.convert(importer.load("\n".join(lines)))
    assert as_properties.config == {k: v for k, v in as_json.config.items() if k != "job_name"}


def test_the_value_converters_schema_registry_carries_over_without_credentials() -> None:
    base = {"s3.bucket.name": "acme", "topics": "orders", "flush.size": "10"}
    avro = "io.confluent.connect.avro.AvroConverter"
    url = "https://user:s3cret@registry.example:8081"
    result = importer.convert(
        {**base, "value.converter": avro, "value.converter.schema.registry.url": url}
    )
    assert result.config["schema_registry_url"] == "https://registry.example:8081"
    assert "s3cret" not in result.yaml() + " ".join(result.warnings)
    assert any("user:password@" in w for w in result.warnings)
    broken = "http://user:s3cret@[::1:8081"  # urlsplit refuses it: still no password out
    result = importer.convert(
        {**base, "value.converter": avro, "value.converter.schema.registry.url": broken}
    )
    assert result.config["schema_registry_url"] == "http://[::1:8081"
    assert "s3cret" not in result.yaml() + " ".join(result.warnings)
    proto = "io.confluent.connect.protobuf.ProtobufConverter"
    result = importer.convert(
        {**base, "value.converter": proto, "value.converter.schema.registry.url": url}
    )
    assert "schema_registry_url" not in result.config
    assert any(proto in w and "bytes" in w for w in result.warnings)


def test_lenses_bucket_addressing_carries_over_path_style_by_default() -> None:
    """Lenses addresses buckets by path unless connect.s3.vhost.bucket=true; a store that
    wants virtual hosts (vhost.bucket=true) gets them after the import too."""
    kcql_text = "INSERT INTO lensesio:demo SELECT * FROM demo"
    base = {"connect.s3.kcql": kcql_text, "connect.s3.custom.endpoint": "http://minio:9000"}
    assert importer.convert(base).config["s3_addressing_style"] == "path"
    vhost = {**base, "connect.s3.vhost.bucket": "true"}
    assert importer.convert(vhost).config["s3_addressing_style"] == "virtual"
    assert "s3_addressing_style" not in importer.convert({"connect.s3.kcql": kcql_text}).config


def test_the_lenses_compression_codec_becomes_each_statements_codec_property() -> None:
    """connect.s3.compression.codec is one setting for the connector; Lenses' AVRO, PARQUET
    and JSON writers apply it, each with its codecs (others fail the task), and its CSV,
    TEXT and BYTES writers do not compress: per STOREAS the property meaning the same."""
    statements = (
        "INSERT INTO bkt:a SELECT * FROM t1 STOREAS PARQUET; "
        "INSERT INTO bkt:b SELECT * FROM t2 STOREAS AVRO; "
        "INSERT INTO bkt:c SELECT * FROM t3 STOREAS `JSON`; "
        "INSERT INTO bkt:d SELECT * FROM t4 STOREAS CSV; "
        "INSERT INTO bkt:e SELECT * FROM t5 STOREAS PARQUET PROPERTIES('parquet.codec'='zstd')"
    )
    settings = {"connect.s3.kcql": statements, "connect.s3.compression.level": "6"}
    result = importer.convert({**settings, "connect.s3.compression.codec": "gzip"})
    plan = kcql.parse(";".join(result.config["kcql"]))
    codecs = {r.topic: r.codecs for r in plan.routes}
    assert codecs["t1"].parquet == "gzip"
    assert codecs["t3"].compression.value == "gzip"
    assert codecs["t5"].parquet == "zstd", "a statement's own codec is kept"
    assert codecs["t2"].avro == "null" and codecs["t4"].compression.value == "none"
    warnings = " ".join(result.warnings)
    assert "Lenses refuses it for AVRO" in warnings and "does not compress CSV" in warnings
    assert "compression.level=6: not carried over" in warnings
    assert "'parquet.codec'='zstd', which is kept" in warnings
    assert "not carried over (no equivalent)" not in warnings

    result = importer.convert({**settings, "connect.s3.compression.codec": "ZSTD"})
    codecs = {r.topic: r.codecs for r in kcql.parse(";".join(result.config["kcql"])).routes}
    assert (codecs["t1"].parquet, codecs["t2"].avro) == ("zstd", "zstandard")
    result = importer.convert({**settings, "connect.s3.compression.codec": "UNCOMPRESSED"})
    codecs = {r.topic: r.codecs for r in kcql.parse(";".join(result.config["kcql"])).routes}
    assert codecs["t1"].parquet == "none", "Lenses' uncompressed PARQUET, not our snappy"
    assert codecs["t3"].compression.value == "none"


def test_each_credential_left_out_says_where_it_goes_and_the_kafka_security_carries_over() -> None:
    """A connector's Kafka and Schema Registry credentials are not AWS credentials: the
    warning tells where each kind goes; the consumer's protocol and mechanism carry over."""
    result = importer.convert(
        {
            "s3.bucket.name": "acme",
            "topics": "orders",
            "flush.size": "10",
            "aws.secret.access.key": "AwsSecret1",
            "consumer.override.security.protocol": "SASL_SSL",
            "consumer.override.sasl.mechanism": "SCRAM-SHA-512",
            "consumer.override.sasl.jaas.config": 'x required username="u" password="KafkaPw1";',
            "value.converter.basic.auth.user.info": "sr:SrPw1",
        }
    )
    assert result.config["kafka"] == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
    }
    warned = {w.split(":")[0]: w for w in result.warnings}
    assert "AWS credential chain" in warned["aws.secret.access.key"]
    assert "kafka: section" in warned["consumer.override.sasl.jaas.config"]
    assert "schema_registry_url" in warned["value.converter.basic.auth.user.info"]
    text = result.yaml() + " ".join(result.warnings)
    assert not [s for s in ("AwsSecret1", "KafkaPw1", "SrPw1") if s in text]
    settings_from = yaml.safe_load(result.yaml())
    assert settings_from["kafka"]["security.protocol"] == "SASL_SSL"


@pytest.mark.parametrize(
    ("partitioner", "path", "template"),
    [
        ("DailyPartitioner", None, "year={year}/month={month}/day={day}"),
        ("TimeBasedPartitioner", "'dt'=YYYY-MM-dd/'hr'=HH", "dt={year}-{month}-{day}/hr={hour}"),
    ],
)
def test_a_confluent_time_path_other_than_hive_keeps_its_keys_as_a_template(
    partitioner: str, path: str | None, template: str
) -> None:
    """DailyPartitioner's folders have no hour: the import wrote the hive layout (with hour
    folders) under a warning saying it had not."""
    config = {
        "s3.bucket.name": "acme",
        "topics": "orders",
        "flush.size": "10",
        "partitioner.class": f"io.confluent.connect.storage.partitioner.{partitioner}",
        "timestamp.extractor": "Record",
    }
    if path is not None:
        config["path.format"] = path
    result = importer.convert(config)
    route = kcql.parse(";".join(result.config["kcql"])).routes[0]
    assert route.layout.kind.value == "template"
    expected = f"{{topic}}/{template}/{{topic}}+{{partition}}+{{offset}}.{{ext}}"
    assert dict(route.properties)["layout.template"] == expected
    assert not [w for w in result.warnings if "path.format" in w]
    weekly = importer.convert({**config, "path.format": "YYYY/ww"})
    assert "'layout'='hive'" in weekly.config["kcql"][0]
    assert any("path.format=YYYY/ww" in w and "hive" in w for w in weekly.warnings)


def test_a_setting_left_out_is_warned_on_one_line() -> None:
    base = {"s3.bucket.name": "acme", "topics": "orders", "flush.size": "10"}
    result = importer.convert({**base, "format.bytearray.separator": "\n"})
    (warning,) = [w for w in result.warnings if "separator" in w]
    assert "\n" not in warning and "'\\n'" in warning


def _routes(result: importer.Imported) -> list[kcql.Route]:
    return list(kcql.parse(";".join(result.config["kcql"])).routes)


CONFLUENT = {"s3.bucket.name": "bkt", "topics": "orders", "flush.size": "100"}


def test_confluent_offsets_are_padded_as_the_connector_pads_them() -> None:
    """Confluent names objects <topic>+<partition>+<offset>.<ext> with the offset padded to
    filename.offset.zero.pad.width digits, 10 by default: an import kept 12 (keys of a
    migrated prefix did not sort with the connector's) and warned the setting away."""
    (route,) = _routes(importer.convert(CONFLUENT))
    assert route.naming == kcql.KeyNaming(offset_width=10)
    result = importer.convert({**CONFLUENT, "filename.offset.zero.pad.width": "6"})
    (route,) = _routes(result)
    assert route.naming == kcql.KeyNaming(offset_width=6)
    assert not any("filename.offset.zero.pad.width" in w for w in result.warnings)


LENSES = "INSERT INTO bkt:orders SELECT * FROM orders STOREAS `JSON`"


@pytest.mark.parametrize(
    ("strategy", "length", "naming"),
    [
        ("LeftPad", None, kcql.KeyNaming(offset_width=12)),
        ("noop", "16", kcql.KeyNaming(kcql.Padding.NONE, offset_width=16)),
        ("leftpad", "8", kcql.KeyNaming(offset_width=8)),
    ],
)
def test_lenses_connector_padding_becomes_each_statements_padding(
    strategy: str, length: str | None, naming: kcql.KeyNaming
) -> None:
    """stream-reactor's PaddingService: connect.s3.padding.strategy (any case) pads the
    offset only, to connect.s3.padding.length (default 12), with '0'."""
    settings = {"connect.s3.kcql": f"{LENSES}; {LENSES.replace('orders', 'payments')}"}
    settings["connect.s3.padding.strategy"] = strategy
    if length is not None:
        settings["connect.s3.padding.length"] = length
    result = importer.convert(settings)
    assert [r.naming for r in _routes(result)] == [naming, naming]
    assert not any("padding" in w for w in result.warnings), result.warnings


def test_lenses_padding_length_alone_or_with_statement_padding_is_as_lenses_has_it() -> None:
    # RightPad with '0' (Lenses' only padding character here) names offsets 42 and 420 alike.
    right = {"connect.s3.kcql": LENSES, "connect.s3.padding.strategy": "RightPad"}
    with pytest.raises(importer.ImportError_, match="RightPad"):
        importer.convert(right)
    # A length without a strategy does nothing in Lenses: said, and the default kept.
    result = importer.convert({"connect.s3.kcql": LENSES, "connect.s3.padding.length": "5"})
    assert [r.naming for r in _routes(result)] == [kcql.KeyNaming()]
    assert any("connect.s3.padding.length=5" in w and "strategy" in w for w in result.warnings)
    # Both the connector's strategy and a statement's padding.*: Lenses refuses to start.
    both = f"{LENSES} PROPERTIES('padding.length.offset'=4)"
    with pytest.raises(importer.ImportError_, match="padding"):
        importer.convert({"connect.s3.kcql": both, "connect.s3.padding.strategy": "LeftPad"})


def test_topics_and_topics_regex_together_are_refused_as_connect_refuses_them() -> None:
    for base in (CONFLUENT, {"connect.s3.kcql": LENSES.replace("FROM orders", "FROM `*`")}):
        with pytest.raises(importer.ImportError_, match=r"topics\.regex"):
            importer.convert({**base, "topics": "orders", "topics.regex": "orders-.*"})


def test_errors_tolerance_all_says_what_becomes_of_the_records() -> None:
    """Connect's errors.tolerance=all drops records it cannot convert, or sends them to the
    dead letter queue topic: the import says which error policy that is here."""
    result = importer.convert({**CONFLUENT, "errors.tolerance": "all"})
    (route,) = _routes(result)
    assert route.error_policy.value == "skip"
    (said,) = [w for w in result.warnings if w.startswith("errors.tolerance=all")]
    assert "dead-letter" in said
    with_queue = {**CONFLUENT, "errors.tolerance": "all"}
    with_queue["errors.deadletterqueue.topic.name"] = "orders-dlq"
    result = importer.convert(with_queue)
    (route,) = _routes(result)
    assert route.error_policy.value == "dead-letter"
    (said,) = [w for w in result.warnings if "orders-dlq" in w]
    assert "S3" in said


def test_a_lenses_interval_is_arrival_time_and_a_confluent_rotation_record_time() -> None:
    """Lenses' flush.interval (stated or its default) is the wall clock: imported as
    'flush.interval.time'='arrival' (a backfill is not cut into interval-sized objects);
    Confluent's rotate.interval.ms with the Record extractor is record time, as here."""
    other = LENSES.replace("bkt:orders", "bkt:other")
    result = importer.convert(
        {"connect.s3.kcql": f"{LENSES}; {other} PROPERTIES('flush.interval'=600)"}
    )
    routes = _routes(result)
    assert [r.flush.interval_by_record_time for r in routes] == [False, False]
    assert [r.flush.interval_seconds for r in routes] == [3600, 600]
    (route,) = _routes(importer.convert({**CONFLUENT, "rotate.interval.ms": "600000"}))
    assert route.flush.interval_by_record_time and route.flush.interval_seconds == 600
