"""One list of what is secret: names, URL userinfo, scrubbing, and submit's secret split."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.config import secrets
from kafka_archive.archiver.config.load import load_settings
from kafka_archive.cli.cluster import submit
from kafka_archive.cli.cluster.secrets_file import run_args


@pytest.mark.parametrize(
    "name",
    [
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.key.pem",
        "ssl_key_pem",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "AWS_SECRET_ACCESS_KEY",
        "aws_session_token",
        "connect.s3.aws.secret.key",
        "aws.access.key.id",
        "schema.registry.basic.auth.user.info",
        "spark.hadoop.fs.s3a.secret.key",
        "SASL.PASSWORD",
        "s3.sse.customer.key",
    ],
)
def test_secret_names(name: str) -> None:
    assert secrets.is_secret(name)


@pytest.mark.parametrize(
    "name",
    [
        "sasl.username",
        "sasl.mechanism",
        "ssl.key.location",
        "ssl.certificate.pem",
        "security.protocol",
        "bootstrap.servers",
        "spark.executor.memory",
        "region",
    ],
)
def test_plain_names(name: str) -> None:
    assert not secrets.is_secret(name)


def test_url_userinfo_is_redacted_and_the_rest_kept() -> None:
    assert (
        secrets.redact_url("https://me:pw@sr.example:8081/x") == "https://me:***@sr.example:8081/x"
    )
    assert secrets.redact_url("https://sr.example:8081") == "https://sr.example:8081"
    assert secrets.has_userinfo("http://u:p@h") and not secrets.has_userinfo("http://h")


@given(
    st.sampled_from(["http", "https", "sasl+ssl", ""]),
    st.text(alphabet="abc:%!", min_size=1, max_size=6),
    st.text(alphabet="ghij", min_size=3, max_size=8),
    st.sampled_from(["h.example:8081", "[::1]:80", "[::1:80", "h:notaport", ""]),
    st.sampled_from(["", "/x", "/p@q", "?u=v@w", "#f"]),
)
def test_userinfo_is_found_redacted_and_stripped_in_any_url(
    scheme: str, user: str, password: str, host: str, rest: str
) -> None:
    """Also in URLs urlsplit refuses (a broken IPv6 literal), whose password it would let
    through; an ``@`` after the authority is no userinfo."""
    head = f"{scheme}://" if scheme else "//"
    url = f"{head}{user}:{password}@{host}{rest}"
    assert secrets.has_userinfo(url)
    assert secrets.strip_userinfo(url) == f"{head}{host}{rest}"
    assert secrets.redact_url(url) == f"{head}{user.partition(':')[0]}:***@{host}{rest}"
    assert password not in secrets.strip_userinfo(url).replace(rest, "")
    plain = f"{head}{host}{rest}"
    assert not secrets.has_userinfo(plain)
    assert secrets.strip_userinfo(plain) == secrets.redact_url(plain) == plain


@given(st.text(min_size=3, alphabet=st.characters(blacklist_categories=("Cs",))), st.text())
def test_scrub_leaves_no_secret(secret: str, around: str) -> None:
    text = around + secret + around + secret
    assert secret not in secrets.scrub(text, [secret])


def test_plan_redacts_secret_properties_and_url_passwords() -> None:
    loaded = load_settings(
        None,
        {},
        {
            "kafka_properties": {"ssl.key.pem": "-----BEGIN KEY", "sasl.username": "me"},
            "schema_registry_url": "https://me:hunter22@sr:8081",
            "endpoint_url": "http://ak:sk12345@s3:9000",
        },
    )
    shown = json.dumps(loaded.settings.redacted())
    for secret in ("-----BEGIN KEY", "hunter22", "sk12345"):
        assert secret not in shown
    assert '"sasl.username": "me"' in shown
    assert "hunter22" not in secrets.scrub("cannot reach https://me:hunter22@sr:8081")


def test_submit_moves_every_secret_argument_out_of_the_command(tmp_path: Path) -> None:
    args = [
        "--kcql",
        "INSERT INTO b:p SELECT * FROM t",
        "-X",
        "sasl.password=pw1",
        "-Xssl.key.pem=pem2",
        "-X",
        "sasl.username=me",
        "--schema-registry-url",
        "http://u:pw3@sr",
        "--endpoint-url=http://ak:pw4@s3",
        "--region",
        "eu",
    ]
    spark = submit.SparkOptions(
        master="local[1]",
        conf=(("spark.hadoop.fs.s3a.secret.key", "pw5"), ("spark.executor.memory", "1g")),
    )
    with submit.private_files(spark, args, tmp_path / "p.zip", {}) as argv:
        line = " ".join(argv)
        for secret in ("pw1", "pem2", "pw3", "pw4", "pw5"):
            assert secret not in line
        assert "sasl.username=me" in line and "spark.executor.memory=1g" in line
        secrets_file = Path(argv[argv.index(submit.SECRETS_FLAG) + 1])
        props_file = Path(argv[argv.index("--properties-file") + 1])
        for path in (secrets_file, props_file):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert "pw5" in props_file.read_text()
        entry = argv.index(submit.SECRETS_FLAG)
        restored = run_args(argv[entry:])
        assert restored[-8:] == [
            "-X",
            "sasl.password=pw1",
            "-X",
            "ssl.key.pem=pem2",
            "--schema-registry-url",
            "http://u:pw3@sr",
            "--endpoint-url",
            "http://ak:pw4@s3",
        ]
    assert not secrets_file.exists() and not secrets_file.parent.exists()


def test_a_missing_secrets_file_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    from kafka_archive.cli.cluster.entry import entry

    assert entry([submit.SECRETS_FLAG, "/nonexistent/kafka-archive-secrets.json"]) == 2
    assert "cannot read the secrets file" in capsys.readouterr().err


def test_loaded_secrets_are_scrubbed_from_any_message() -> None:
    load_settings(None, {}, {"kafka_properties": {"sasl.password": "hunter2-loaded"}})
    assert "hunter2-loaded" not in secrets.scrub('bad value "hunter2-loaded" for sasl.password')
