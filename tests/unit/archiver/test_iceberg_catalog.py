"""The catalog of Iceberg routes: its errors never show a secret it was configured with, and
its credentials are renewed before they expire."""

from __future__ import annotations

import uuid

import pytest

from kafka_archive.archiver import iceberg
from kafka_archive.archiver.settings import S3Settings


def unique(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex}"


def test_an_unknown_uri_scheme_is_reported_without_the_uri_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pyiceberg's own error quotes the URI it could not infer a catalog type from."""
    password = unique("pw")
    monkeypatch.setenv("PYICEBERG_CATALOG__LEAKY__URI", f"foo://admin:{password}@lake:8181/x")
    with pytest.raises(iceberg.CatalogError) as info:
        iceberg.load_catalog("leaky", S3Settings())
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
    properties = {**iceberg.s3_properties(S3Settings(endpoint_url="http://x:9")), **configured}
    iceberg.remember_secrets(properties)
    with pytest.raises(iceberg.CatalogError) as info, iceberg._catalog_errors("be opened"):
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
    with pytest.raises(iceberg.CatalogError) as info:
        iceberg.load_catalog("lite", S3Settings())
    message = str(info.value)
    assert "Invalid SQLite URL" in message and password not in message
    assert "\n" not in message
