import pytest

from kafka_archive.archiver.protocol.memstore import Fate, Faults, MemStore, md5, multipart_etag
from kafka_archive.archiver.protocol.store import Ambiguous, NotFound, PreconditionFailed


class Script(Faults):
    """Fates in order, then delivery; listings missing the `stale` newest keys."""

    def __init__(self, *fates: Fate, stale: int = 0) -> None:
        self.fates = list(fates)
        self.stale = stale

    def fate(self, op: str, key: str) -> Fate:
        return self.fates.pop(0) if self.fates else Fate.DELIVER

    def stale_by(self) -> int:
        return self.stale


def test_conditional_puts_and_deletes_as_s3_answers_them() -> None:
    s = MemStore()
    e1 = s.put("k", b"1", {"a": "b"}, if_none_match=True)
    with pytest.raises(PreconditionFailed):
        s.put("k", b"2", {}, if_none_match=True)
    with pytest.raises(PreconditionFailed):
        s.put("k", b"2", {}, if_match='"nope"')
    e2 = s.put("k", b"2", {}, if_match=e1)
    assert e2 != e1 and s.get("k").body == b"2" and s.head("k").etag == e2
    with pytest.raises(PreconditionFailed):
        s.delete("k", if_match=e1)
    s.delete("k", if_match=e2)
    with pytest.raises(NotFound):
        s.get("k")
    with pytest.raises(NotFound):
        s.delete("k", if_match=e2)
    s.delete("k")  # unconditional DELETE of nothing: 204, as S3


def test_an_etag_names_the_content_as_s3s_does() -> None:
    """S3's ETag of a single PUT is its body's MD5 (moto and SeaweedFS answer the same: the
    contract suite, tests/integration/exactly_once/test_commit_log_store_contract.py): the
    same bytes written again, with other metadata, have the same ETag, so an If-Match judged
    on the first object also deletes the second."""
    s = MemStore()
    e1 = s.put("k", b"x", {"attempt": "1"})
    assert e1 == '"9dd4e461268c8034f5c8564e155c67a6"'
    assert s.put("k", b"y", {}, if_match=e1) != e1
    s.delete("k")
    assert s.put("k", b"x", {"attempt": "2"}, if_none_match=True) == e1
    s.delete("k", if_match=e1)
    with pytest.raises(NotFound):
        s.head("k")


def test_listing_in_byte_order_after_a_key_and_stale_listings_miss_the_newest() -> None:
    faults = Script()
    s = MemStore(faults)
    for k in ["p/b", "p/a", "q/a", "p/c"]:
        s.put(k, b"", {})
    assert [x.key for x in s.list("p/")] == ["p/a", "p/b", "p/c"]
    assert [x.key for x in s.list("p/", start_after="p/a")] == ["p/b", "p/c"]
    faults.stale = 2  # q/a and p/c, the two newest creates, are missing
    assert [x.key for x in s.list("p/")] == ["p/a", "p/b"]


def test_a_lost_response_took_effect() -> None:
    s = MemStore(Script(Fate.LOSE_RESPONSE))
    with pytest.raises(Ambiguous):
        s.put("k", b"1", {}, if_none_match=True)
    assert s.get("k").body == b"1"


def test_a_delayed_request_lands_later_with_its_precondition_judged_then() -> None:
    s = MemStore(Script(Fate.DELAY, Fate.DELIVER, Fate.DELAY))
    with pytest.raises(Ambiguous):
        s.put("k", b"late", {}, if_none_match=True)
    e = s.put("k", b"first", {})  # the sender's retry, or another writer
    with pytest.raises(Ambiguous):
        s.delete("k", if_match=e)
    s.put("k", b"second", {}, if_match=e)
    assert [d.op for d in s.in_flight] == ["PUT", "DELETE"]
    s.deliver_all()  # the late create finds the key taken; the late delete another ETag
    assert s.get("k").body == b"second"
    assert s.requests == {"PUT": 3, "DELETE": 1, "GET": 1}


def test_a_read_without_answer_changes_nothing_and_a_delayed_one_never_lands() -> None:
    s = MemStore(Script(Fate.DELIVER, Fate.LOSE_RESPONSE, Fate.DELAY, Fate.LOSE_RESPONSE))
    s.put("k", b"1", {})
    with pytest.raises(Ambiguous):
        s.get("k")
    with pytest.raises(Ambiguous):
        s.head("k")
    with pytest.raises(Ambiguous):
        s.list("")
    assert s.in_flight == [] and s.get("k").body == b"1"
    assert s.requests == {"PUT": 1, "GET": 2, "HEAD": 1, "LIST": 1}


def test_a_lost_complete_answer_made_the_object_and_a_late_part_changes_nothing() -> None:
    s = MemStore(Script(Fate.DELIVER, Fate.DELIVER, Fate.DELAY, Fate.LOSE_RESPONSE))
    upload = s.create_upload("k", {"attempt": "1"})
    first = s.upload_part("k", upload, 1, b"ab")
    with pytest.raises(Ambiguous):  # part 2 in flight
        s.upload_part("k", upload, 2, b"cd")
    s.deliver_all()
    with pytest.raises(Ambiguous):  # the Complete landed; its answer did not
        s.complete_upload("k", upload, [(1, first), (2, f'"{md5(b"cd")}"')], if_none_match=True)
    assert s.get("k").body == b"abcd" and s.head("k").etag == multipart_etag([b"ab", b"cd"])
    with pytest.raises(NotFound):  # sent again: the upload is no more (AWS's NoSuchUpload)
        s.complete_upload("k", upload, [(1, first)], if_none_match=True)
    with pytest.raises(NotFound):
        s.upload_part("k", upload, 3, b"late")
    assert s.get("k").body == b"abcd" and s.list_uploads("") == []
