"""The Schema Registry's failures: an outage (not reached, a server error) is retriable, its
own exit code, ridden out by --follow; an id it does not know is a setting to fix (exit 2)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from kafka_archive.archiver.core.errors import ConfigError, SchemaRegistryUnavailableError
from kafka_archive.archiver.core.failure import TaskFailure
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry


@pytest.fixture
def answering() -> Iterator[str]:
    """A registry answering 503 for id 1 and 404 for the rest."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503 if self.path.endswith("/1") else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_outage_is_retriable_and_an_unknown_id_is_not(answering: str) -> None:
    for url, ident in ((f"http://u:pw@127.0.0.1:{_closed_port()}", 11), (answering, 1)):
        with pytest.raises(SchemaRegistryUnavailableError) as caught:
            SchemaRegistry(url).schema(ident)
        assert caught.value.retriable and caught.value.exit_code == 25
        assert "pw" not in str(caught.value)
        crossed = TaskFailure.of(caught.value).to_error()
        assert isinstance(crossed, SchemaRegistryUnavailableError), "from a Spark task too"
    with pytest.raises(ConfigError) as unknown:
        SchemaRegistry(answering).schema(2)
    assert unknown.value.exit_code == 2 and "HTTP 404" in str(unknown.value)
