"""The commit protocol's store contract (`protocol.store.Store`), the same tests against the
in-memory model the simulation runs on (`MemStore`) and against real S3 through the adapter the
protocol will run on (`protocol.s3.BucketStore`: moto's server, SeaweedFS's S3 gateway).
Where the model answers otherwise than a real S3, the model is wrong: the simulation proves
the protocol against the model only.

Where the real implementations differ from each other the contract allows both, and says so:
an If-Match request on a missing key is NotFound (AWS, moto: 404 NoSuchKey) or
PreconditionFailed (SeaweedFS's DELETE: 412); either way nothing changed.

moto evaluates a condition and then writes without a lock, in a threaded server
(moto/s3/responses.py, put_object): two creates If-None-Match of one key at once both
succeed (seen here: 2 of 6 racing writers "created" one entry). S3 and SeaweedFS evaluate each
atomically. The race runs against moto behind our proxy forwarding conditional writes one at
a time (`conditional_writes_serialized`); every protocol test with concurrent writers on moto
must do the same."""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from faultproxy import FaultProxy

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.protocol.memstore import MemStore
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.store import Ambiguous, NotFound, PreconditionFailed, Store
from kafka_archive.archiver.store.s3 import S3Store

pytestmark = pytest.mark.integration

IMPLEMENTATIONS = ("memory", "moto", "seaweedfs")


def conditional_writes(method: str, path: str, headers: dict[str, str]) -> bool:
    return method in ("PUT", "DELETE") and any(
        h.lower() in ("if-match", "if-none-match") for h in headers
    )


def s3_store(endpoint: str, client: Any, *, page_size: int | None = None) -> BucketStore:
    """A fresh bucket at `endpoint` behind the protocol's adapter."""
    bucket = f"b-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    settings = S3Settings(endpoint_url=endpoint, region="us-east-1")
    return BucketStore(S3Store(settings), bucket, page_size=page_size)


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def endpoint(impl: str, request: pytest.FixtureRequest) -> str | None:
    if impl == "memory":
        return None
    if impl == "seaweedfs":
        return str(request.getfixturevalue("seaweedfs"))
    return str(request.getfixturevalue("stack").endpoint_url)


@pytest.fixture
def store(endpoint: str | None) -> Iterator[Store]:
    if endpoint is None:
        yield MemStore()
        return
    import boto3

    yield s3_store(endpoint, boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1"))


META = {"run-id": "r-1", "epoch": "7", "attempt": "2", "route": "r", "topic": "t", "partition": "0"}


def test_a_create_only_put_creates_once(store: Store) -> None:
    etag = store.put("p/k", b"first", META, if_none_match=True)
    with pytest.raises(PreconditionFailed):
        store.put("p/k", b"second", {}, if_none_match=True)
    got = store.get("p/k")
    assert (got.body, got.etag, dict(got.metadata)) == (b"first", etag, META)


def test_if_match_put_replaces_only_the_version_it_names(store: Store) -> None:
    first = store.put("p/k", b"v1", {})
    with pytest.raises(PreconditionFailed):
        store.put("p/k", b"v2", {}, if_match='"0123456789abcdef0123456789abcdef"')
    second = store.put("p/k", b"v2", {"a": "b"}, if_match=first)
    assert second != first
    assert store.get("p/k").body == b"v2" and store.head("p/k").etag == second
    with pytest.raises(PreconditionFailed):
        store.put("p/k", b"v3", {}, if_match=first)
    with pytest.raises((NotFound, PreconditionFailed)):
        store.put("p/missing", b"v", {}, if_match=first)
    with pytest.raises(NotFound):
        store.head("p/missing")


def test_if_match_delete_removes_only_the_version_it_names(store: Store) -> None:
    etag = store.put("p/k", b"v1", {})
    with pytest.raises(PreconditionFailed):
        store.delete("p/k", if_match='"0123456789abcdef0123456789abcdef"')
    assert store.get("p/k").body == b"v1"
    store.delete("p/k", if_match=etag)
    with pytest.raises(NotFound):
        store.get("p/k")
    with pytest.raises((NotFound, PreconditionFailed)):
        store.delete("p/k", if_match=etag)
    store.delete("p/k")  # an unconditional DELETE of nothing: S3's 204


def test_a_missing_key_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.get("p/nothing")
    with pytest.raises(NotFound):
        store.head("p/nothing")


def test_head_is_get_without_the_body_and_metadata_round_trips(store: Store) -> None:
    etag = store.put("p/k", b"body", META, if_none_match=True)
    head, got = store.head("p/k"), store.get("p/k")
    assert (head.etag, dict(head.metadata), head.body) == (etag, META, b"")
    assert head.last_modified == got.last_modified
    (listed,) = store.list("p/")
    assert (listed.key, listed.etag, listed.size) == ("p/k", etag, 4)


def test_etags_follow_the_content(store: Store) -> None:
    """An overwrite with other bytes has another ETag. The same bytes written again, with
    other metadata, have the same ETag (S3's ETag of a single PUT is its body's MD5): an
    ETag judged on one writer's object also names another writer's object of the same bytes
    at that key, so If-Match does not tell them apart."""
    first = store.put("p/k", b"same", {"attempt": "1"})
    other = store.put("p/k", b"other", {}, if_match=first)
    assert other != first
    store.delete("p/k", if_match=other)
    again = store.put("p/k", b"same", {"attempt": "2"}, if_none_match=True)
    assert again == first == f'"{hashlib.md5(b"same").hexdigest()}"'
    store.delete("p/k", if_match=first)  # the first object's ETag deletes the second
    with pytest.raises(NotFound):
        store.head("p/k")


KEYS = [
    "p/.kafka-archive/log/00000000000000000002.json",
    "p/.kafka-archive/log/00000000000000000010.json",
    "p/.kafka-archive/log/checkpoint/00000000000000000010.json",
    "p/a-b",
    "p/a/b",
    "p/a",
    "p/B",
    "p/é",
    "p/~",
    "q/a",
]


def test_listings_in_byte_order_after_a_key(store: Store) -> None:
    for key in KEYS:
        store.put(key, key.encode(), {})
    under = sorted((k for k in KEYS if k.startswith("p/")), key=lambda k: k.encode())
    assert [x.key for x in store.list("p/")] == under
    assert [x.key for x in store.list("p/", start_after="p/a")] == under[under.index("p/a") + 1 :]
    assert [x.key for x in store.list("p/.kafka-archive/log/checkpoint/")] == [KEYS[2]]
    assert [x.key for x in store.list("p/", start_after=under[-1])] == []
    assert store.list("nothing/") == []


@pytest.mark.parametrize("impl", ["moto", "seaweedfs"])
def test_a_listing_reads_every_page(endpoint: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    store = s3_store(endpoint, client, page_size=2)
    keys = [f"p/{i:03d}" for i in range(7)]
    for key in keys:
        store.put(key, b"", {})
    assert [x.key for x in store.list("p/")] == keys
    assert [x.key for x in store.list("p/", start_after="p/002")] == keys[3:]


@pytest.fixture
def racing_store(store: Store, impl: str, endpoint: str | None) -> Iterator[Store]:
    """`store`, except on moto: a bucket behind a proxy that serializes conditional writes."""
    if impl != "moto":
        yield store
        return
    assert endpoint is not None and isinstance(store, BucketStore)
    with FaultProxy(endpoint, rate=0.0, seed=0) as proxy:
        proxy.serialize = conditional_writes
        settings = S3Settings(endpoint_url=proxy.url, region="us-east-1")
        yield BucketStore(S3Store(settings), store.bucket)


def test_one_create_only_put_of_many_at_once_wins(racing_store: Store) -> None:
    """Writers racing for the same entry: exactly one creates it, the others see 412."""
    store = racing_store
    rounds, writers = 10, 6
    for r in range(rounds):
        key = f"p/log/{r:020d}.json"
        won: list[bytes] = []
        start = threading.Barrier(writers)

        def create(
            i: int, key: str = key, won: list[bytes] = won, start: threading.Barrier = start
        ) -> None:
            body = f"writer {i}".encode()
            start.wait()
            try:
                store.put(key, body, {}, if_none_match=True)
            except PreconditionFailed:
                return
            won.append(body)

        threads = [threading.Thread(target=create, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(won) == 1, f"round {r}: {len(won)} writers created {key}"
        assert store.get(key).body == won[0]


def test_last_modified_is_the_stores_clock(store: Store, impl: str) -> None:
    if impl == "memory":
        assert isinstance(store, MemStore)
        store.now = 1234.5
        store.put("p/k", b"", {})
        assert store.head("p/k").last_modified == 1234.5
        return
    before = time.time()
    store.put("p/k", b"", {})
    assert abs(store.head("p/k").last_modified - before) < 60


# -- multipart: objects above the part size (store/streaming.py). The model does not enforce
# S3's 5 MiB least part (the simulation's parts are bytes long); these tests send 5 MiB parts.

PART = 5 * 2**20


def _multipart(
    store: Store, key: str, body: bytes, *, if_none_match: bool = True, meta: dict[str, str] = META
) -> tuple[str, list[tuple[int, str]]]:
    """An upload of `body` in parts of `PART` bytes, not completed: its id and parts."""
    upload = store.create_upload(key, meta)
    chunks = [body[at : at + PART] for at in range(0, len(body), PART)]
    return upload, [(n, store.upload_part(key, upload, n, c)) for n, c in enumerate(chunks, 1)]


def _s3_multipart_etag(body: bytes) -> str:
    """S3's documented ETag of a multipart object, computed here from the bytes: the MD5 of
    the concatenated MD5 digests of the parts, "-", the number of parts."""
    chunks = [body[at : at + PART] for at in range(0, len(body), PART)]
    digests = b"".join(hashlib.md5(c).digest() for c in chunks)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(chunks)}"'


BIG = bytes(range(256)) * (PART // 256) + b"the last part"


def test_a_conditional_complete_creates_once_with_the_multipart_etag(store: Store) -> None:
    upload, parts = _multipart(store, "p/big", BIG)
    assert [u.key for u in store.list_uploads("p/")] == ["p/big"]
    etag = store.complete_upload("p/big", upload, parts, if_none_match=True)
    assert etag == _s3_multipart_etag(BIG) != f'"{hashlib.md5(BIG).hexdigest()}"'
    got = store.get("p/big")
    assert (got.body, got.etag, dict(got.metadata)) == (BIG, etag, META)
    assert store.list_uploads("p/") == []
    # a second upload of the key: its conditional Complete is refused, the object stays
    other, other_parts = _multipart(store, "p/big", BIG[:-1] + b"!", meta={"attempt": "3"})
    with pytest.raises(PreconditionFailed):
        store.complete_upload("p/big", other, other_parts, if_none_match=True)
    got = store.get("p/big")
    assert (got.body, got.etag) == (BIG, etag)
    with contextlib.suppress(NotFound):  # a refused Complete leaves the upload open (AWS)
        store.abort_upload("p/big", other)
    assert store.list_uploads("p/") == []


def test_a_complete_sent_again_never_makes_a_second_object(store: Store, impl: str) -> None:
    """A Complete whose answer was lost, sent again: AWS answers NoSuchUpload, moto the same
    object again, SeaweedFS 412 (If-None-Match: the key exists). The writer reads the key
    whatever the answer; the object is the first Complete's."""
    upload, parts = _multipart(store, "p/big", BIG)
    etag = store.complete_upload("p/big", upload, parts, if_none_match=True)
    try:
        again = store.complete_upload("p/big", upload, parts, if_none_match=True)
    except (NotFound, PreconditionFailed) as refused:
        answer = type(refused).__name__
    else:
        assert again == etag
        answer = "the same ETag"
    print(f"{impl}: a Complete sent again answers {answer}")
    got = store.get("p/big")
    assert (got.body, got.etag) == (BIG, etag)


def test_an_aborted_upload_takes_no_part_and_no_complete(store: Store, impl: str) -> None:
    """A part or a Complete of an aborted upload: AWS and SeaweedFS answer NoSuchUpload;
    moto answers both with 500 (a KeyError in moto/s3/models.py): `Ambiguous`, after which
    the writer creates the object again with a new upload."""
    upload, parts = _multipart(store, "p/big", BIG)
    store.abort_upload("p/big", upload)
    assert store.list_uploads("p/") == []
    with pytest.raises((NotFound, Ambiguous) if impl == "moto" else NotFound):
        store.upload_part("p/big", upload, 3, b"late part")
    with pytest.raises((NotFound, Ambiguous) if impl == "moto" else NotFound):
        store.complete_upload("p/big", upload, parts, if_none_match=True)
    with pytest.raises(NotFound):
        store.head("p/big")


def test_a_stamp_changes_a_multipart_etag_and_the_same_bytes_keep_it(store: Store) -> None:
    """The stamp decision holds for multipart objects: the same bytes in the same parts
    have the same ETag at any key (a delete judged on one matches the other), and a stamp
    in the last part (Parquet's footer, a gzip trailer's neighbour) changes it."""
    etags = []
    for key, body in (("p/a", BIG), ("p/b", BIG), ("p/c", BIG[:-5] + b"stamp")):
        upload, parts = _multipart(store, key, body)
        etags.append(store.complete_upload(key, upload, parts, if_none_match=True))
    assert etags[0] == etags[1] != etags[2]
