"""Settings precedence is file < environment < flags, decided in one place."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.config.load import load_settings, require_bootstrap
from kafka_archive.archiver.config.options import OPTIONS
from kafka_archive.archiver.config.settings import KafkaSettings, S3Prices, Settings
from kafka_archive.archiver.core.errors import ConfigError


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "archive.yaml"
    path.write_text(text)
    return path


def test_flags_beat_environment_beat_file(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        "bootstrap_servers: file:9092\nendpoint_url: http://file\nmaster: local[1]\n",
    )
    env = {"KAFKA_ARCHIVE_ENDPOINT_URL": "http://env", "KAFKA_ARCHIVE_MASTER": "local[3]"}
    loaded = load_settings(path, env, {"master": "local[2]"})
    settings = loaded.settings
    assert settings.kafka.bootstrap_servers == "file:9092"
    assert settings.s3.endpoint_url == "http://env"
    assert settings.master == "local[2]"
    sources = dict(settings.sources)
    assert sources["bootstrap_servers"] == f"config file {path}"
    assert sources["endpoint_url"] == "environment KAFKA_ARCHIVE_ENDPOINT_URL"
    assert sources["master"] == "flag --master"


def test_defaults_apply_when_nothing_is_given() -> None:
    settings = load_settings(None, {}, {}).settings
    assert settings.master == "local[*]"
    assert settings.s3.endpoint_url is None
    assert settings.lock_ttl_seconds == 900


def test_settings_built_in_code_take_the_option_tables_defaults() -> None:
    """Each default is declared once, in the option table: a Settings made in code (tests,
    the Spark entry point) and one loaded with nothing given hold the same values."""
    built = Settings(KafkaSettings(""))
    assert built == load_settings(None, {}, {}).settings
    shown = built.redacted()
    for option in OPTIONS:
        assert shown[option.name] == {"value": option.default, "source": "default"}, option.name


def test_config_file_statements_and_kafka_properties(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        "kcql:\n  - INSERT INTO b1:p SELECT * FROM t\nkafka:\n  security.protocol: SSL\n"
        "  enable.ssl.certificate.verification: false\n",
    )
    loaded = load_settings(path, {}, {"kafka_properties": {"client.id": "x"}})
    assert loaded.statements == ("INSERT INTO b1:p SELECT * FROM t",)
    assert dict(loaded.settings.kafka.properties) == {
        "security.protocol": "SSL",
        "enable.ssl.certificate.verification": "false",
        "client.id": "x",
    }


def test_unknown_key_suggests_the_closest(tmp_path: Path) -> None:
    path = _config(tmp_path, "bootstrap_server: x:1\n")
    with pytest.raises(ConfigError) as err:
        load_settings(path, {}, {})
    assert "bootstrap_server" in str(err.value)
    assert "Did you mean 'bootstrap_servers'?" in str(err.value)


def test_bad_number_names_its_source() -> None:
    with pytest.raises(ConfigError, match="environment KAFKA_ARCHIVE_LOCK_TTL_SECONDS"):
        load_settings(None, {"KAFKA_ARCHIVE_LOCK_TTL_SECONDS": "soon"}, {})


def test_invalid_yaml_points_at_the_line(tmp_path: Path) -> None:
    path = _config(tmp_path, "master: local\n  bad: [\n")
    with pytest.raises(ConfigError, match=r"archive\.yaml:2:"):
        load_settings(path, {}, {})


def test_missing_bootstrap_lists_every_source(tmp_path: Path) -> None:
    path = _config(tmp_path, "master: local[1]\n")
    settings = load_settings(path, {}, {}).settings
    with pytest.raises(ConfigError) as err:
        require_bootstrap(settings, path)
    message = str(err.value)
    assert "flag --bootstrap-servers" in message
    assert "KAFKA_ARCHIVE_BOOTSTRAP_SERVERS" in message
    assert str(path) in message


def test_secrets_are_redacted_for_display() -> None:
    settings = load_settings(
        None, {}, {"kafka_properties": {"sasl.password": "hunter2", "sasl.username": "me"}}
    ).settings
    shown = settings.redacted()["kafka_properties"]["value"]
    assert shown == {"sasl.password": "***", "sasl.username": "me"}
    assert "hunter2" not in repr(settings.redacted())


def test_the_unsafe_conditional_writes_setting_is_off_unless_stated(tmp_path: Path) -> None:
    name = "unsafe_single_writer_without_conditional_writes"
    assert getattr(load_settings(None, {}, {}).settings, name) is False
    path = tmp_path / "archive.yaml"
    path.write_text(f"{name}: true\n")
    assert getattr(load_settings(path, {}, {}).settings, name) is True
    env = {"KAFKA_ARCHIVE_" + name.upper(): "false"}
    assert getattr(load_settings(path, env, {}).settings, name) is False
    with pytest.raises(ConfigError, match="must be true or false"):
        load_settings(None, {"KAFKA_ARCHIVE_" + name.upper(): "maybe"}, {})


@pytest.mark.parametrize(
    ("config", "environ", "flags", "source"),
    [
        ("", {}, {"bootstrap_servers": "svc:Pw0rdX@b1:9092"}, "flag --bootstrap-servers"),
        ("", {"KAFKA_ARCHIVE_BOOTSTRAP_SERVERS": "b0:9092,u:Pw0rdX@b1:9092"}, {}, "environment"),
        ("bootstrap_servers: SASL_SSL://u:Pw0rdX@b1:9092\n", {}, {}, "config file"),
    ],
)
def test_credentials_in_the_bootstrap_servers_are_refused_without_quoting_them(
    tmp_path: Path, config: str, environ: dict[str, str], flags: dict[str, str], source: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(config)
    with pytest.raises(ConfigError) as caught:
        load_settings(path if config else None, flags=flags, environ=environ)
    text = f"{caught.value} {caught.value.hint}"
    assert source in text and "kafka: section" in text and "Pw0rdX" not in text
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    "url", ["minio:9000", "127.0.0.1:9000", "ftp://minio", "http://", "u:Pw0rdX@minio:9000"]
)
def test_an_endpoint_that_is_not_an_http_url_is_refused_with_its_source(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, {}, {"endpoint_url": url})
    text = str(caught.value)
    assert "endpoint_url from flag --endpoint-url" in text and "http://" in text
    assert "Pw0rdX" not in text


def test_a_config_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "archive.yaml"
    path.write_bytes(b"kcql: \xd0\x00\xff binary")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_settings(path, {}, {})


# -- the config file's mode (README: 0600 when it holds a secret) --------------------------

_SECRET_FILES = {
    "kafka": "kafka:\n  sasl.password: hunter2-secret\n",
    "registry_url": "schema_registry_url: http://sr:pw-hunter2@registry:8081\n",
    "endpoint_url": "endpoint_url: http://ak:sk-hunter2@s3.local:9000\n",
}


@pytest.mark.parametrize("holds", sorted(_SECRET_FILES))
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o444])
def test_a_readable_config_file_holding_a_secret_warns_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, holds: str, mode: int
) -> None:
    path = _config(tmp_path, _SECRET_FILES[holds])
    path.chmod(mode)
    with caplog.at_level(logging.WARNING):
        load_settings(path, {}, {})
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, caplog.text
    message = warnings[0].getMessage()
    assert "\n" not in message
    assert str(path) in message and f"{mode:04o}" in message and "chmod 600" in message
    assert "hunter2" not in caplog.text


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o700, 0o620, 0o602])
def test_an_owner_only_config_file_holding_a_secret_does_not_warn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int
) -> None:
    path = _config(tmp_path, _SECRET_FILES["kafka"])
    path.chmod(mode)
    with caplog.at_level(logging.WARNING):
        load_settings(path, {}, {})
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_a_readable_config_file_without_a_secret_does_not_warn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _config(
        tmp_path,
        "bootstrap_servers: b:9092\nschema_registry_url: http://registry:8081\n"
        "kafka:\n  security.protocol: SSL\n  ssl.key.location: /etc/key.pem\n",
    )
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        load_settings(path, {}, {})
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(mode=st.integers(min_value=0o400, max_value=0o777))
def test_the_warning_follows_the_group_and_world_read_bits(tmp_path: Path, mode: int) -> None:
    path = tmp_path / f"archive-{mode:o}.yaml"
    path.write_text(_SECRET_FILES["kafka"])
    path.chmod(mode)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("kafka_archive.archiver.config.load")
    logger.addHandler(handler)
    try:
        load_settings(path, {}, {})
    finally:
        logger.removeHandler(handler)
    assert bool(records) == bool(mode & 0o044)


def test_s3_prices_default_to_aws_list_prices_and_take_any_source(tmp_path: Path) -> None:
    """Issue 38: the prices of the cost estimate, per 1,000 requests (0 for a store that
    does not bill requests)."""
    assert load_settings(None, {}, {}).settings.prices == S3Prices(0.005, 0.0004)
    path = _config(tmp_path, "s3_price_put_per_1000: 0.0054\ns3_price_get_per_1000: 0\n")
    env = {"KAFKA_ARCHIVE_S3_PRICE_GET_PER_1000": "0.00043"}
    settings = load_settings(path, env, {}).settings
    assert settings.prices == S3Prices(0.0054, 0.00043)
    assert settings.redacted()["s3_price_put_per_1000"] == {
        "value": 0.0054,
        "source": f"config file {path}",
    }
    assert load_settings(path, {}, {}).settings.prices == S3Prices(0.0054, 0.0)


@pytest.mark.parametrize("value", ["abc", "-0.005", "nan", "inf", "", "1e400", "true"])
def test_a_bad_s3_price_is_one_config_error_naming_its_source(value: str) -> None:
    env = {"KAFKA_ARCHIVE_S3_PRICE_PUT_PER_1000": value}
    if value == "":  # an empty variable is not given
        assert load_settings(None, env, {}).settings.s3_price_put_per_1000 == 0.005
        return
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env, {})
    assert str(caught.value).startswith(
        "s3_price_put_per_1000 from environment KAFKA_ARCHIVE_S3_PRICE_PUT_PER_1000 must be "
        "a number of zero or more"
    )
    assert "\n" not in str(caught.value)


def test_a_bad_s3_price_in_the_config_file_is_refused(tmp_path: Path) -> None:
    for text in ("s3_price_get_per_1000: [1]\n", "s3_price_get_per_1000: yes\n"):
        with pytest.raises(ConfigError, match="s3_price_get_per_1000 from config file"):
            load_settings(_config(tmp_path, text), {}, {})


def test_commit_protocol_help_says_a_states_archive_is_migrated_and_what_refuses_it() -> None:
    """A commit_protocol=log run over a target that holds partition states migrates it
    (commit_log.migrate_states; test_commit_log_run's migration test) unless a states run
    left intent markers or an earlier version's per-job states (refuse_unsettled, exit 2):
    the help says that, not that such targets are refused, and keeps states the default."""
    (option,) = [o for o in OPTIONS if o.name == "commit_protocol"]
    assert option.default == "states"
    assert "refused for targets that hold partition states" not in option.help
    assert "migrated onto the log by its first log-mode run" in option.help
    assert "intent markers" in option.help and "per-job" in option.help
