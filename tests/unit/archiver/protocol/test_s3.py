"""The protocol's Store over S3 (`protocol.s3.BucketStore`): S3's answers as the protocol tells
them apart, through the real boto3 client and its retries (standard mode), with S3 played by
a small in-process fake behind botocore's `before-send` event that can apply a request and
then lose its answer, as a dropped connection does."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import (
    AccessDeniedError,
    BucketNotFoundError,
    S3UnavailableError,
    UploadError,
)
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.store import Ambiguous, NotFound, PreconditionFailed
from kafka_archive.archiver.store.s3 import S3Store

_DATE = "Fri, 27 Nov 2026 10:00:00 GMT"


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> list[bytes]:
        return [self._data]

    def read(self, amt: int | None = None) -> bytes:
        data, self._data = self._data, b""
        return data


def _error(status: int, code: str) -> AWSResponse:
    body = f"<Error><Code>{code}</Code><Message>no</Message></Error>".encode()
    return AWSResponse("http://s3", status, {}, _Body(body))


@dataclass
class FakeS3:
    """One bucket's objects with S3's conditional semantics (ETag: the body's MD5, as S3's
    for a single PUT). `script`: what the next attempts meet instead, in order: a response,
    an exception raised before sending (`EndpointConnectionError`), or "drop" (the request
    is applied, its answer lost: `ConnectionClosedError`)."""

    objects: dict[str, tuple[bytes, dict[str, str], str]] = field(default_factory=dict)
    script: list[AWSResponse | Exception | str] = field(default_factory=list)
    seen: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        url = urlsplit(request.url)
        key = unquote(url.path.split("/", 2)[2]) if url.path.count("/") >= 2 else ""
        self.seen.append((request.method, key))
        if self.script:
            step = self.script.pop(0)
            if isinstance(step, AWSResponse):
                return step
            if isinstance(step, Exception):
                raise step
            self._apply(request, key, url.query)
            raise ConnectionClosedError(endpoint_url=request.url)
        return self._apply(request, key, url.query)

    def _apply(self, request: Any, key: str, query: str) -> AWSResponse:
        headers = {
            k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
        }
        old = self.objects.get(key)
        if request.method == "PUT":
            body = request.body if isinstance(request.body, bytes) else request.body.read()
            if headers.get("if-none-match") == "*" and old is not None:
                return _error(412, "PreconditionFailed")
            if "if-match" in headers:
                if old is None:
                    return _error(404, "NoSuchKey")
                if old[2] != headers["if-match"]:
                    return _error(412, "PreconditionFailed")
            meta = {k[len("x-amz-meta-") :]: v for k, v in headers.items() if "x-amz-meta-" in k}
            etag = f'"{hashlib.md5(body).hexdigest()}"'
            self.objects[key] = (body, meta, etag)
            return AWSResponse(request.url, 200, {"ETag": etag}, _Body(b""))
        if request.method == "DELETE":
            if "if-match" in headers:
                if old is None:
                    return _error(404, "NoSuchKey")
                if old[2] != headers["if-match"]:
                    return _error(412, "PreconditionFailed")
            self.objects.pop(key, None)
            return AWSResponse(request.url, 204, {}, _Body(b""))
        if request.method in ("GET", "HEAD") and "list-type" not in parse_qs(query):
            if old is None:
                return _error(404, "NoSuchKey" if request.method == "GET" else "404")
            h = {"ETag": old[2], "Last-Modified": _DATE, "Content-Length": str(len(old[0]))}
            h.update({f"x-amz-meta-{k}": v for k, v in old[1].items()})
            return AWSResponse(
                request.url, 200, h, _Body(old[0] if request.method == "GET" else b"")
            )
        raise AssertionError(f"unexpected request {request.method} {request.url}")


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def s3(credentials: None) -> Callable[..., tuple[BucketStore, FakeS3]]:
    def make(retries: int = 2) -> tuple[BucketStore, FakeS3]:
        store = S3Store(
            S3Settings(
                endpoint_url="http://127.0.0.1:9",
                region="us-east-1",
                max_attempts=retries,  # botocore's retries, after the first attempt
                addressing_style="path",
            )
        )
        fake = FakeS3()
        store.client.meta.events.register("before-send.s3", fake)
        return BucketStore(store, "bkt"), fake

    return make


META = {"run-id": "r1", "epoch": "3", "attempt": "1"}


def test_a_create_and_its_conditions(s3: Callable[..., tuple[BucketStore, FakeS3]]) -> None:
    store, _ = s3()
    etag = store.put("k", b"one", META, if_none_match=True)
    with pytest.raises(PreconditionFailed):
        store.put("k", b"two", META, if_none_match=True)
    with pytest.raises(PreconditionFailed):
        store.put("k", b"two", {}, if_match='"other"')
    with pytest.raises(NotFound):
        store.put("gone", b"two", {}, if_match=etag)
    got = store.get("k")
    assert (got.body, dict(got.metadata), got.etag) == (b"one", META, etag)
    assert store.head("k").etag == etag and store.head("k").body == b""
    with pytest.raises(PreconditionFailed):
        store.delete("k", if_match='"other"')
    store.delete("k", if_match=etag)
    with pytest.raises(NotFound):
        store.get("k")
    with pytest.raises(NotFound):
        store.head("k")
    with pytest.raises(NotFound):
        store.delete("k", if_match=etag)


def test_a_create_whose_answer_was_lost_and_whose_retry_met_itself_is_ours(
    s3: Callable[..., tuple[BucketStore, FakeS3]],
) -> None:
    """The first attempt lands, its answer is lost; botocore's retry is refused (412) for
    our own object. That is a create, not a key taken by another writer."""
    store, fake = s3()
    fake.script = ["drop"]
    etag = store.put("k", b"entry", META, if_none_match=True)
    assert etag == fake.objects["k"][2]
    assert [m for m, _ in fake.seen] == ["PUT", "PUT", "GET"]


def test_an_if_match_write_whose_retry_met_itself_is_ours(
    s3: Callable[..., tuple[BucketStore, FakeS3]],
) -> None:
    store, fake = s3()
    first = store.put("k", b"v1", {})
    fake.script = ["drop"]
    assert store.put("k", b"v2", {}, if_match=first) == fake.objects["k"][2] != first


def test_a_retry_refused_for_another_writers_object_is_taken(
    s3: Callable[..., tuple[BucketStore, FakeS3]],
) -> None:
    """The same bytes with another writer's metadata are not ours: taken."""
    store, fake = s3()
    fake.script = [ConnectionClosedError(endpoint_url="x")]  # lost before it landed
    fake.objects["k"] = (b"entry", {**META, "attempt": "2"}, '"e"')
    with pytest.raises(PreconditionFailed):
        store.put("k", b"entry", META, if_none_match=True)


def test_a_refusal_after_attempts_that_never_left_is_taken_without_a_read(
    s3: Callable[..., tuple[BucketStore, FakeS3]],
) -> None:
    store, fake = s3()
    fake.objects["k"] = (b"entry", META, '"e"')
    fake.script = [EndpointConnectionError(endpoint_url="x")]
    with pytest.raises(PreconditionFailed):
        store.put("k", b"entry", META, if_none_match=True)
    assert [m for m, _ in fake.seen] == ["PUT", "PUT"]


def test_a_write_without_answer_is_ambiguous_and_one_never_sent_is_unavailable(
    s3: Callable[..., tuple[BucketStore, FakeS3]],
) -> None:
    store, fake = s3(retries=1)
    fake.script = ["drop", ConnectionClosedError(endpoint_url="x")]
    with pytest.raises(Ambiguous):
        store.put("a", b"x", META, if_none_match=True)
    assert "a" in fake.objects  # it took effect
    fake.script = [EndpointConnectionError(endpoint_url="x")] * 2
    with pytest.raises(S3UnavailableError, match=r"cannot reach .* to write s3://bkt/b"):
        store.put("b", b"x", META, if_none_match=True)
    fake.script = [_error(500, "InternalError")] * 2
    with pytest.raises(Ambiguous):
        store.put("c", b"x", META, if_none_match=True)
    fake.script = ["drop", ConnectionClosedError(endpoint_url="x")]
    with pytest.raises(Ambiguous):
        store.delete("a", if_match=fake.objects["a"][2])


def test_a_conditional_delete_refused_after_its_own_retry_is_ambiguous(
    s3: Callable[..., tuple[BucketStore, FakeS3]],
) -> None:
    """Its first attempt deleted the object; the retry finds none (404): we cannot tell our
    delete from another's."""
    store, fake = s3()
    etag = store.put("k", b"x", {})
    fake.script = ["drop"]
    with pytest.raises(Ambiguous):
        store.delete("k", if_match=etag)
    assert "k" not in fake.objects


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (409, "ConditionalRequestConflict", PreconditionFailed),
        (403, "AccessDenied", AccessDeniedError),
        (404, "NoSuchBucket", BucketNotFoundError),
        (501, "NotImplemented", UploadError),  # no conditional writes: never Ambiguous
    ],
)
def test_refusals_of_a_create(
    s3: Callable[..., tuple[BucketStore, FakeS3]], status: int, code: str, error: type[Exception]
) -> None:
    store, fake = s3()
    fake.script = [_error(status, code)]
    with pytest.raises(error):
        store.put("k", b"x", META, if_none_match=True)


def test_a_read_that_fails_after_the_retries_is_the_runtimes_error_not_ambiguous(
    s3: Callable[..., tuple[BucketStore, FakeS3]],
) -> None:
    store, fake = s3(retries=1)
    fake.script = [_error(503, "SlowDown")] * 2
    with pytest.raises(UploadError, match="read s3://bkt/k"):
        store.get("k")
    fake.script = [ConnectionClosedError(endpoint_url="x")] * 2
    with pytest.raises(UploadError):
        store.head("k")
