"""The recorded topic id of a route: recorded once, compared by every command reading Kafka."""

from __future__ import annotations

import uuid

import pytest

from kafka_archive.archiver.errors import FormatVersionError, TopicRecreatedError
from kafka_archive.archiver.state import identity
from kafka_archive.kcql.plan import Target

from .test_lock import OneObjectStore


def _target() -> Target:
    return Target(bucket=f"b{uuid.uuid4().hex[:8]}", prefix="arch")  # a fresh cache entry


def test_the_first_run_records_the_id_and_later_ones_accept_it() -> None:
    store, target = OneObjectStore(), _target()
    identity.check(store, [(target, "t")], {"t": "id-1"}, record=True)  # type: ignore[arg-type]
    assert store.doc is not None
    assert store.doc.body["topic_id"] == "id-1" and store.doc.body["version"] == 1
    identity.check(store, [(target, "t")], {"t": "id-1"}, record=True)  # type: ignore[arg-type]


def test_another_id_is_refused_also_once_confirmed_in_this_process() -> None:
    """A follow session confirms the document once; the topic re-created between two of its
    batches is still caught (the id Kafka reports is compared every time)."""
    store, target = OneObjectStore(), _target()
    identity.check(store, [(target, "t")], {"t": "id-1"}, record=True)  # type: ignore[arg-type]
    with pytest.raises(TopicRecreatedError) as caught:
        identity.check(store, [(target, "t")], {"t": "id-2"}, record=True)  # type: ignore[arg-type]
    assert caught.value.exit_code == 17
    assert "re-created" in str(caught.value) and "new prefix" in str(caught.value)
    assert store.doc is not None and store.doc.body["topic_id"] == "id-1", "never rewritten"


def test_readers_record_nothing_and_topics_without_an_id_are_not_checked() -> None:
    store, target = OneObjectStore(), _target()
    identity.check(store, [(target, "t")], {"t": "id-1"}, record=False)  # type: ignore[arg-type]
    assert store.doc is None, "status and verify write nothing"
    identity.check(store, [(target, "t")], {}, record=True)  # type: ignore[arg-type]
    assert store.doc is None


def test_a_newer_format_is_refused() -> None:
    store, target = OneObjectStore(), _target()
    store.put_document("b", "k", {"version": 2, "topic_id": "id-1"}, if_match=None)
    with pytest.raises(FormatVersionError):
        identity.check(store, [(target, "t")], {"t": "id-1"}, record=True)  # type: ignore[arg-type]
