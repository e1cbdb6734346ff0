"""The requests the store sends, as S3 would see them: one scripted sequence of every kind of
request (answered here, before anything is sent), each request's operation, method, path,
query and protocol headers, pinned byte for byte (``fixtures/requests.json``, written by the
store before it was split into modules, issue 36)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.awsrequest import AWSResponse

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store

FIXTURE = Path(__file__).parent / "fixtures" / "requests.json"
# Headers of the protocol (conditions, metadata, storage, encryption, checksums, ranges);
# not those that change from run to run (date, signature, user agent, invocation id).
KEPT = (
    "if-",
    "x-amz-meta-",
    "x-amz-storage-class",
    "x-amz-server-side",
    "x-amz-acl",
    "x-amz-checksum-",
)
KEPT_EXACT = (
    "range",
    "content-length",
    "content-md5",
    "x-amz-sdk-checksum-algorithm",
    "x-amz-content-sha256",
)

LISTING = (
    b"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>p/a</Key>"
    b'<ETag>"e1"</ETag><Size>3</Size></Contents></ListBucketResult>'
)
ANSWERS: dict[str, tuple[int, dict[str, str], bytes]] = {
    "HeadBucket": (200, {}, b""),
    "PutObject": (200, {"ETag": '"put"'}, b""),
    "GetObject": (200, {"ETag": '"get"'}, b'{"a": 1}'),
    "HeadObject": (200, {"ETag": '"head"', "x-amz-meta-kafka-archive-run": "r1"}, b""),
    "DeleteObject": (204, {}, b""),
    "DeleteObjects": (200, {}, b"<DeleteResult></DeleteResult>"),
    "ListObjectsV2": (200, {}, LISTING),
    "CreateMultipartUpload": (
        200,
        {},
        b"<InitiateMultipartUploadResult><UploadId>u1</UploadId></InitiateMultipartUploadResult>",
    ),
    "UploadPart": (200, {"ETag": '"0123456789abcdef0123456789abcdef"'}, b""),
    "CompleteMultipartUpload": (
        200,
        {},
        b'<CompleteMultipartUploadResult><ETag>"x-1"</ETag></CompleteMultipartUploadResult>',
    ),
    "ListMultipartUploads": (
        200,
        {},
        b"<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><Upload><Key>p/b</Key>"
        b"<UploadId>u9</UploadId></Upload></ListMultipartUploadsResult>",
    ),
    "AbortMultipartUpload": (204, {}, b""),
}


class _Body:
    """A response body, read whole or streamed (GetObject's)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self) -> list[bytes]:
        return [self._data]

    def read(self, amt: int | None = None) -> bytes:
        data, self._data = self._data, b""
        return data


def _script(store: S3Store, tmp: Path) -> list[object]:
    """Every kind of request, with their options; what each call returned."""
    spooled = tmp / "small.json"
    spooled.write_bytes(b"{}\n" * 10)
    store.object_metadata = {"kafka-archive-run": "r1", "kafka-archive-epoch": "3"}
    returned: list[object] = [
        store.check_bucket("bkt"),
        store.upload_bytes("bkt", "arch/t/0/0.json", b"hello"),
        store.put_bytes("bkt", "arch/.kafka-archive/j/lock.json", b"{}"),
        store.get_bytes("bkt", "arch/t/0/0.json"),
        store.get_bytes("bkt", "arch/t/0/0.json", (5, 10)),
        store.delete("bkt", ["a", "b"]),
        list(store.list_objects("bkt", "p/", "p/0")),
        list(store.list_etags("bkt", "p/")),
        store.get_document("bkt", "arch/.kafka-archive/state/t/0.json"),
        store.put_document("bkt", "arch/.kafka-archive/state/t/0.json", {"b": 1}, if_match=None),
        store.put_document("bkt", "s.json", {"a": [1, 2]}, if_match='"e"'),
        store.head("bkt", "arch/t/0/0.json"),
        store.delete_if_match("bkt", "k", '"e"'),
        store.delete_document("bkt", "k"),
    ]
    with store.creating("bkt", "arch/t/0/1.json", {"kafka-archive-unit": "0-9"}):
        store.upload_file("bkt", "arch/t/0/1.json", spooled)
        upload = store.start_multipart("bkt", "arch/t/0/1.json")
        etag = store.upload_part("bkt", "arch/t/0/1.json", upload, 1, b"part one")
        store.complete_multipart("bkt", "arch/t/0/1.json", upload, [etag])
    returned += [
        upload,
        etag,
        list(store.incomplete_uploads("bkt", "p/")),
        store.abort_upload("bkt", "p/b", "u9"),
    ]
    return returned


def _recorded(settings: S3Settings, tmp: Path) -> dict[str, Any]:
    store = S3Store(settings)
    sent: list[dict[str, Any]] = []

    def answer(request: Any, event_name: str, **_: Any) -> AWSResponse:
        operation = event_name.rsplit(".", 1)[-1]
        url = urlsplit(request.url)
        headers = {
            k.lower(): v.decode() if isinstance(v, bytes) else v
            for k, v in request.headers.items()
            if k.lower().startswith(KEPT) or k.lower() in KEPT_EXACT
        }
        sent.append(
            {
                "operation": operation,
                "method": request.method,
                "path": url.path,
                "query": url.query,
                "headers": dict(sorted(headers.items())),
            }
        )
        status, response_headers, body = ANSWERS[operation]
        return AWSResponse(request.url, status, response_headers, _Body(body))

    store.client.meta.events.register("before-send.s3", answer)
    returned = _script(store, tmp)
    return {"requests": sent, "returned": json.loads(json.dumps(returned, default=repr))}


SETTINGS = {
    "default": S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1"),
    "production": S3Settings(
        endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        sse="aws:kms",
        sse_kms_key_id="key-1",
        bucket_key=True,
        acl="bucket-owner-full-control",
        checksum="SHA256",
        storage_class="GLACIER_IR",
    ),
    "checksum-off": S3Settings(
        endpoint_url="http://127.0.0.1:9", region="us-east-1", checksum="OFF"
    ),
}


def recorded_all(tmp: Path) -> dict[str, Any]:
    return {name: _recorded(settings, tmp) for name, settings in SETTINGS.items()}


def test_the_requests_sent_are_as_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    expected = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert recorded_all(tmp_path) == expected


def test_a_creation_refused_is_a_precondition_failed_with_the_etag_it_would_have_had(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    store = S3Store(SETTINGS["default"])
    refused = b"<Error><Code>PreconditionFailed</Code><Message>no</Message></Error>"

    def answer(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, 412, {}, _Body(refused))

    store.client.meta.events.register("before-send.s3.CompleteMultipartUpload", answer)
    etag = '"0123456789abcdef0123456789abcdef"'
    with pytest.raises(PreconditionFailed), store.creating("bkt", "k"):
        store.complete_multipart("bkt", "k", "u1", [etag])
    digest = hashlib.md5(bytes.fromhex(etag.strip('"')), usedforsecurity=False).hexdigest()
    assert store.refused_etag("bkt", "k") == f'"{digest}-1"'
    assert store.refused_etag("bkt", "k") is None  # once
