"""The catalog of Iceberg routes: its errors never show a secret it was configured with, and
its credentials are renewed before they expire."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import CatalogError
from kafka_archive.archiver.iceberg.catalog import (
    catalog_errors,
    load_catalog,
    remember_secrets,
    s3_properties,
)
from kafka_archive.archiver.iceberg.table import open_tables


def unique(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex}"


def test_an_unknown_uri_scheme_is_reported_without_the_uri_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pyiceberg's own error quotes the URI it could not infer a catalog type from."""
    password = unique("pw")
    monkeypatch.setenv("PYICEBERG_CATALOG__LEAKY__URI", f"foo://admin:{password}@lake:8181/x")
    with pytest.raises(CatalogError) as info:
        load_catalog("leaky", S3Settings())
    message = str(info.value)
    assert "Could not infer the catalog type from the uri: foo://admin:***@lake:8181" in message
    assert password not in message


def test_an_error_quoting_every_property_shows_no_key_nor_credential(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pyiceberg's load_catalog, given a catalog type it cannot use (an enum member where it
    wants text), raises with every property it was given: the catalog's own (a REST token,
    an S3 secret key, a URL with a password) and those the run's S3 settings filled in (the
    credentials of the AWS credential chain). What the run shows of it holds none."""
    from pyiceberg.catalog import CatalogType
    from pyiceberg.catalog import load_catalog as pyiceberg_load

    token, secret, password = unique("tok"), unique("catalog-secret"), unique("pw")
    chain_secret, session = unique("chain-secret"), unique("session")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", unique("AKID"))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", chain_secret)
    monkeypatch.setenv("AWS_SESSION_TOKEN", session)
    configured = {
        "type": CatalogType.REST,
        "uri": f"https://lake:{password}@rest.example/api",
        "token": token,
        "s3.secret-access-key": secret,
    }
    properties = {**s3_properties(S3Settings(endpoint_url="http://x:9")), **configured}
    remember_secrets(properties)
    with pytest.raises(CatalogError) as info, catalog_errors("be opened"):
        pyiceberg_load("odd", **properties)
    message = str(info.value)
    assert "Could not initialize catalog with the following properties" in message
    assert "s3.secret-access-key" in message and "rest.example" in message  # it quotes them
    for value in (token, secret, password, chain_secret, session):
        assert value not in message
    assert "\n" not in message


def test_a_multiline_driver_error_is_one_line_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    password = unique("pw")
    monkeypatch.setenv("PYICEBERG_CATALOG__LITE__URI", f"sqlite://admin:{password}@/x.db")
    with pytest.raises(CatalogError) as info:
        load_catalog("lite", S3Settings())
    message = str(info.value)
    assert "Invalid SQLite URL" in message and password not in message
    assert "\n" not in message


CREDENTIAL_PROCESS = """\
import datetime as dt, json, pathlib, sys
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
expiry = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=5)
print(json.dumps({"Version": 1, "AccessKeyId": f"AKIDSHORT{n}", "SecretAccessKey": f"s{n}",
                  "SessionToken": f"t{n}", "Expiration": expiry.isoformat()}))
"""


def test_short_lived_credentials_are_renewed_in_the_catalog_and_its_tables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Credentials from the AWS chain that expire (a credential_process answering with
    5-minute credentials, as IRSA or an assumed role give): each time the run goes to the
    table, botocore renews them (they are within its refresh window), and the catalog and
    the table's FileIO are given the new ones, not the ones of the session's start."""
    import sys

    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from kafka_archive import kcql

    script, counter = tmp_path / "creds.py", tmp_path / "n"
    script.write_text(CREDENTIAL_PROCESS)
    config = tmp_path / "aws-config"
    config.write_text(
        f"[profile short]\ncredential_process = {sys.executable} {script} {counter}\n"
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_PROFILE", "short")
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("PYICEBERG_CATALOG__DEFAULT__URI", uri)
    made = SqlCatalog("default", uri=uri, warehouse=f"file://{tmp_path}")
    made.create_namespace("db")
    made.create_table("db.orders", Schema(NestedField(1, "id", LongType(), required=False)))
    plan = kcql.parse(
        "INSERT INTO bkt:t SELECT * FROM orders STOREAS PARQUET "
        "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders')"
    )

    (table,) = open_tables(plan, S3Settings(region="eu-west-1"))
    first = table.catalog.properties["s3.access-key-id"]
    assert first.startswith("AKIDSHORT")
    for _ in range(2):
        table.refresh()
        latest = f"AKIDSHORT{counter.read_text()}"
        assert latest != first
        assert table.table.io.properties["s3.access-key-id"] == latest
        assert table.table.io.properties["s3.session-token"] == f"t{counter.read_text()}"
        catalog = table.catalog  # renewed again: still within botocore's refresh window
        assert catalog.properties["s3.access-key-id"] == f"AKIDSHORT{counter.read_text()}"
