"""S3 requests counted by type as AWS bills them (issue 38): every operation of botocore's S3
model gets the type its HTTP method says, and a store counts every HTTP attempt, a retried
request once per attempt, against a real HTTP endpoint of our own (no stubs)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import botocore.session
import pytest

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.model import S3Requests
from kafka_archive.archiver.store import requests
from kafka_archive.archiver.store.requests import request_type
from kafka_archive.archiver.store.s3 import S3Store

# What an operation's HTTP method allows its type to be.
_BY_METHOD = {
    "PUT": {"PUT", "COPY"},
    "GET": {"GET", "LIST"},
    "HEAD": {"HEAD"},
    "DELETE": {"DELETE"},
    "POST": {"POST", "DELETE", "OTHER"},
}


@functools.cache
def _s3_operations() -> dict[str, str]:
    """Every operation of botocore's S3 model, with its HTTP method."""
    model = botocore.session.Session().get_service_model("s3")
    return {name: model.operation_model(name).http["method"] for name in model.operation_names}


def test_every_s3_operation_has_a_type_its_http_method_allows() -> None:
    operations = _s3_operations()
    assert len(operations) > 90
    for name, method in operations.items():
        assert request_type(name, method) in _BY_METHOD[method], (name, method)


@pytest.mark.parametrize(
    ("operation", "kind"),
    [
        ("PutObject", "PUT"),
        ("UploadPart", "PUT"),
        ("CopyObject", "COPY"),
        ("UploadPartCopy", "COPY"),
        ("CreateMultipartUpload", "POST"),
        ("CompleteMultipartUpload", "POST"),
        ("ListObjectsV2", "LIST"),
        ("ListMultipartUploads", "LIST"),
        ("ListParts", "LIST"),
        ("GetObject", "GET"),
        ("HeadObject", "HEAD"),
        ("HeadBucket", "HEAD"),
        ("DeleteObject", "DELETE"),
        ("DeleteObjects", "DELETE"),
        ("AbortMultipartUpload", "DELETE"),
        ("SelectObjectContent", "OTHER"),
    ],
)
def test_the_operations_kafka_archive_sends_are_billed_as_aws_bills_them(
    operation: str, kind: str
) -> None:
    assert request_type(operation, _s3_operations()[operation]) == kind


class _Flaky:
    """An HTTP endpoint answering the first ``fail`` requests 503 SlowDown, then 200."""

    def __init__(self, fail: int) -> None:
        self.fail, self.seen = fail, 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                endpoint.seen += 1
                failing = endpoint.seen <= endpoint.fail
                body = b"<Error><Code>SlowDown</Code></Error>" if failing else b""
                self.send_response(503 if failing else 200)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", '"e"')
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_PUT = do_GET = do_HEAD = do_DELETE = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Flaky]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # No backoff sleeps: the retries are what is counted, not their timing.
    monkeypatch.setattr("botocore.retries.standard.ExponentialBackoff.delay_amount", lambda *_: 0)
    endpoint = _Flaky(fail=2)
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()


def test_a_store_counts_every_attempt_of_a_retried_request_by_type(flaky: _Flaky) -> None:
    """A PUT answered 503 twice, then 200: three PUTs sent and billed, three counted (in
    the store and in the process); then a GET and a HEAD."""
    before = requests.PROCESS.read()
    store = S3Store(S3Settings(endpoint_url=flaky.url, region="us-east-1", max_attempts=5))
    store.put_bytes("bucket", "key", b"x")
    assert store.get_bytes("bucket", "key") == b""
    assert store.head("bucket", "key") is not None
    assert flaky.seen == 5
    expected = S3Requests.of({"PUT": 3, "GET": 1, "HEAD": 1})
    assert store.requests.read() == expected
    assert store.retries == 2
    assert requests.PROCESS.read() - before == expected
    store.requests.reset()
    assert store.requests.read() == S3Requests()
