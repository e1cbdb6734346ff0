import json

import pytest
from hypothesis import given, settings

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    FORMAT_VERSION,
    LogFormatError,
    checkpoint_key,
    checkpoint_seq,
    decode_checkpoint,
    decode_entry,
    encode_checkpoint,
    encode_entry,
    entry_key,
)

from .strategies import entries, valid_logs


def test_keys_sort_by_seq_and_tell_checkpoints_apart() -> None:
    assert entry_key("b/p", 7) == "b/p/.kafka-archive/log/00000000000000000007.json"
    assert (
        checkpoint_key("b/p/", 7) == "b/p/.kafka-archive/log/checkpoint/00000000000000000007.json"
    )
    assert entry_key("p", 10) > entry_key("p", 9)
    assert checkpoint_seq(checkpoint_key("p", 12)) == 12
    assert checkpoint_seq(entry_key("p", 12)) is None


@settings(max_examples=50)
@given(entries)
def test_entry_round_trips(entry: object) -> None:
    assert decode_entry(encode_entry(entry)) == entry  # type: ignore[arg-type]


@settings(max_examples=50)
@given(valid_logs())
def test_checkpoint_round_trips(log: list) -> None:  # type: ignore[type-arg]
    cp = core.fold_all(core.LogState(), log).checkpoint()
    assert decode_checkpoint(encode_checkpoint(cp)) == cp


def test_newer_format_is_refused_with_the_way_out() -> None:
    doc = json.loads(encode_entry(core.claim_entry(core.LogState(), "r", [])))
    doc["version"] = FORMAT_VERSION + 1
    with pytest.raises(LogFormatError, match=rf"format version {FORMAT_VERSION + 1}.*upgrade"):
        decode_entry(json.dumps(doc).encode())


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b'{"version": 1}', b'{"seq": 1}', b"\xff"])
def test_damaged_documents_are_refused(data: bytes) -> None:
    with pytest.raises(LogFormatError, match="damaged"):
        decode_entry(data)
    with pytest.raises(LogFormatError, match="damaged"):
        decode_checkpoint(data)
