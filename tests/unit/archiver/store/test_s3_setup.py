"""What a user gets wrong about S3 before any request: a profile that does not exist, a region
that is not one, an https endpoint that speaks http. One line and an exit code each (these
were internal errors: botocore's exceptions reached the CLI)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import ConfigError, S3UnavailableError
from kafka_archive.archiver.store.s3 import S3Store


def test_an_unknown_profile_is_missing_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile-x")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    with pytest.raises(S3UnavailableError) as caught:
        S3Store(S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1"))
    assert caught.value.exit_code == 5 and "AWS_PROFILE" in str(caught.value)


def test_a_region_that_is_not_one_is_a_setting_to_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        S3Store(S3Settings(endpoint_url="http://127.0.0.1:9", region="eu west"))
    assert caught.value.exit_code == 2 and "'eu west' is not a region name" in str(caught.value)


@pytest.fixture
def plain_http() -> Iterator[int]:
    """A port that answers a TLS hello with plain HTTP, as an http-only store does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield int(server.getsockname()[1])
    server.close()


def test_an_https_endpoint_that_speaks_http_names_the_scheme(
    plain_http: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    store = S3Store(
        S3Settings(
            endpoint_url=f"https://127.0.0.1:{plain_http}", region="us-east-1", max_attempts=1
        )
    )
    with pytest.raises(S3UnavailableError) as caught:
        store.check_bucket("bkt")
    assert caught.value.exit_code == 5 and "http:// or https://" in str(caught.value)
