"""Every request of the store, failed, is one of the runtime's errors naming the request and
the object: refused by S3 (answered here, before anything is sent) or with S3 unreachable."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import AccessDeniedError, S3UnavailableError
from kafka_archive.archiver.store.s3 import S3Store

Call = Callable[[S3Store], object]

# (what the message says the request was, where, the call)
REQUESTS: list[tuple[str, str, Call]] = [
    ("open", "s3://bkt", lambda s: s.check_bucket("bkt")),
    ("upload", "s3://bkt/k", lambda s: s.upload_bytes("bkt", "k", b"x")),
    ("write", "s3://bkt/k", lambda s: s.put_bytes("bkt", "k", b"x")),
    ("read", "s3://bkt/k", lambda s: s.get_bytes("bkt", "k")),
    ("read", "s3://bkt/k", lambda s: s.get_bytes("bkt", "k", (5, 10))),
    ("delete from", "s3://bkt/a", lambda s: s.delete("bkt", ["a", "b"])),
    ("list", "s3://bkt/p/", lambda s: list(s.list_keys("bkt", "p/"))),
    ("list", "s3://bkt/p/", lambda s: list(s.list_etags("bkt", "p/"))),
    ("read", "s3://bkt/k", lambda s: s.get_document("bkt", "k")),
    ("write", "s3://bkt/k", lambda s: s.put_document("bkt", "k", {}, if_match=None)),
    ("write", "s3://bkt/k", lambda s: s.put_document("bkt", "k", {}, if_match='"e"')),
    ("read", "s3://bkt/k", lambda s: s.head("bkt", "k")),
    ("delete", "s3://bkt/k", lambda s: s.delete_if_match("bkt", "k", '"e"')),
    ("delete", "s3://bkt/k", lambda s: s.delete_document("bkt", "k")),
    ("upload", "s3://bkt/k", lambda s: s.start_multipart("bkt", "k")),
    ("upload part 3 of", "s3://bkt/k", lambda s: s.upload_part("bkt", "k", "u", 3, b"x")),
    (
        "complete the upload of",
        "s3://bkt/k",
        lambda s: s.complete_multipart("bkt", "k", "u", ['"0123456789abcdef0123456789abcdef"']),
    ),
    ("list uploads in", "s3://bkt/p/", lambda s: list(s.incomplete_uploads("bkt", "p/"))),
    ("abort upload of", "s3://bkt/k", lambda s: s.abort_upload("bkt", "k", "u")),
]
IDS = [f"{i}-{what}" for i, (what, _, _) in enumerate(REQUESTS)]


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self) -> list[bytes]:
        return [self._data]


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def _refusing(status: int, code: str) -> S3Store:
    """A store whose every request S3 answers with ``status`` and error ``code``."""
    store = S3Store(
        S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1", max_attempts=1)
    )
    body = f"<Error><Code>{code}</Code><Message>no</Message></Error>".encode()

    def answer(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, status, {}, _Body(body))

    store.client.meta.events.register("before-send.s3", answer)
    return store


@pytest.mark.usefixtures("credentials")
@pytest.mark.parametrize(("what", "where", "call"), REQUESTS, ids=IDS)
def test_a_request_refused_names_the_request_and_the_object(
    what: str, where: str, call: Call
) -> None:
    with pytest.raises(AccessDeniedError) as caught:
        call(_refusing(403, "AccessDenied"))
    assert caught.value.message == f"access denied to {what} {where}"
    assert caught.value.exit_code == AccessDeniedError.exit_code


@pytest.mark.usefixtures("credentials")
@pytest.mark.parametrize(("what", "where", "call"), REQUESTS, ids=IDS)
def test_a_request_to_an_unreachable_store_names_the_endpoint(
    what: str, where: str, call: Call
) -> None:
    """(abort_upload let botocore's EndpointConnectionError through: an internal error.)"""
    store = S3Store(
        S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1", max_attempts=1)
    )
    with pytest.raises(S3UnavailableError) as caught:
        call(store)
    assert caught.value.message == f"cannot reach http://127.0.0.1:9 to {what} {where}"
    assert caught.value.exit_code == 5


@pytest.mark.usefixtures("credentials")
def test_a_small_file_is_one_put_refused_as_an_upload(tmp_path: Path) -> None:
    spooled = tmp_path / "object.json"
    spooled.write_bytes(b"{}\n")
    with pytest.raises(AccessDeniedError) as caught:
        _refusing(403, "AccessDenied").upload_file("bkt", "k", spooled)
    assert caught.value.message == "access denied to upload s3://bkt/k"
