"""Each sink's object names read back into topic, partition and offsets, for all inputs
(the names made the way each sink's source makes them: see the modules' docs)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read.foreign import layout_for
from kafka_archive.archiver.read.foreign.aiven import AivenLayout
from kafka_archive.archiver.read.foreign.confluent import ConfluentLayout
from kafka_archive.archiver.read.foreign.detect import detect
from kafka_archive.archiver.read.foreign.lenses import LensesLayout
from kafka_archive.archiver.read.foreign.model import Options
from kafka_archive.archiver.read.foreign.secor import SecorLayout

# Kafka's legal topic names: letters, digits, '.', '_' and '-'.
topics = st.text("abcXYZ019._-", min_size=1, max_size=20).filter(lambda t: t not in (".", ".."))
partitions = st.integers(0, 10_000)
offsets = st.integers(0, 2**62)


@given(
    topics,
    partitions,
    offsets,
    st.integers(1, 20),
    st.sampled_from([".json", ".avro", ".json.gz", ".bin", ".snappy.parquet"]),
)
def test_confluent_names_read_back(
    topic: str, partition: int, offset: int, pad: int, ext: str
) -> None:
    layout = ConfluentLayout(Options({"filename.offset.zero.pad.width": str(pad)}))
    key = layout.key_for(TopicPartition(topic, partition), offset, ext)
    parsed = layout.parse(key, 1)
    assert parsed is not None
    assert (parsed.tp, parsed.first_offset, parsed.group) == (
        TopicPartition(topic, partition),
        offset,
        (f"partition={partition}",),
    )


def test_confluent_quirks_zero_padding_and_plus_separators() -> None:
    layout = ConfluentLayout()
    key = layout.key_for(TopicPartition("orders", 3), 42, ".avro")
    assert key == "topics/orders/partition=3/orders+3+0000000042.avro"
    # a wider offset than the padding is written whole (%010d)
    assert layout.key_for(TopicPartition("o", 0), 12_345_678_901, ".json").endswith(
        "o+0+12345678901.json"
    )
    # field and time partitioners' folders are the group
    parsed = layout.parse("topics/orders/'year'=2024/'month'=05/orders+3+0000000042.json", 5)
    assert parsed is not None and parsed.group == ("'year'=2024", "'month'=05")
    # store.kafka.keys / store.kafka.headers siblings are not value objects
    assert layout.parse("topics/orders/partition=3/orders+3+0000000042.keys.avro", 5) is None
    assert layout.parse("topics/orders/partition=3/orders+3+0000000042.headers.avro", 5) is None


@given(
    topics,
    partitions,
    offsets,
    st.integers(0, 2**41),
    st.integers(0, 2**41),
    st.integers(1, 20),
    st.sampled_from("0x#"),
)
def test_lenses_names_read_back(
    topic: str, partition: int, last: int, earliest: int, latest: int, pad: int, char: str
) -> None:
    layout = LensesLayout(Options({"padding.length.offset": str(pad), "padding.char": char}))
    key = layout.key_for(TopicPartition(topic, partition), last, "json", earliest, latest)
    parsed = layout.parse(key, 1)
    assert parsed is not None
    assert (parsed.tp, parsed.last_offset, parsed.first_offset) == (
        TopicPartition(topic, partition),
        last,
        -1,
    )


def test_lenses_quirks_padding_indexes_and_partitioned_names() -> None:
    layout = LensesLayout()
    assert layout.key_for(TopicPartition("orders", 0), 99, "json", 5, 9) == (
        "orders/0/000000000099_5_9.json"
    )
    assert layout.parse(".indexes/sink/.locks/orders/0.lock", 10) is None
    parsed = layout.parse("region=eu/orders(3_000000000099).json", 10)  # KeysAndValues
    assert parsed is not None
    assert (parsed.tp, parsed.last_offset, parsed.group) == (
        TopicPartition("orders", 3),
        99,
        ("region=eu",),
    )


templates = st.sampled_from(
    [
        "{{topic}}-{{partition}}-{{start_offset}}",
        "{{topic}}-{{partition:padding=true}}-{{start_offset:padding=true}}",
        "{{topic}}/{{partition}}/{{start_offset}}",
        "logs/{{topic}}/p{{partition}}_{{start_offset:padding=true}}",
    ]
)


@given(topics, partitions, offsets, templates, st.sampled_from(["", ".gz", ".zst", ".snappy"]))
def test_aiven_names_read_back(
    topic: str, partition: int, offset: int, template: str, ext: str
) -> None:
    layout = AivenLayout(Options({"file.name.template": template}))
    key = layout.key_for(TopicPartition(topic, partition), offset, ext)
    parsed = layout.parse(key, 1)
    assert parsed is not None
    assert (parsed.tp, parsed.first_offset) == (TopicPartition(topic, partition), offset)


@given(topics.filter(lambda t: "/" not in t), partitions, offsets)
def test_secor_names_read_back(topic: str, partition: int, offset: int) -> None:
    layout = SecorLayout()
    key = layout.key_for(TopicPartition(topic, partition), offset)
    parsed = layout.parse(key, 1)
    assert parsed is not None
    assert (parsed.tp, parsed.first_offset) == (TopicPartition(topic, partition), offset)
    assert key.rpartition("/")[2] == f"1_{partition}_{offset:020d}"


def _keys(name: str, topic: str) -> list[tuple[str, int]]:
    tp = TopicPartition(topic, 0)
    if name == "confluent":
        return [(ConfluentLayout().key_for(tp, o, ".json"), 1) for o in (0, 10, 20)]
    if name == "lenses":
        return [(LensesLayout().key_for(tp, o, "json", 1, 2), 1) for o in (9, 19)] + [
            (f".indexes/c/.locks/{topic}/0.lock", 1)
        ]
    if name == "aiven":
        return [(AivenLayout().key_for(tp, o, ".gz"), 1) for o in (0, 10)]
    return [(SecorLayout().key_for(tp, o), 1) for o in (0, 10)]


@pytest.mark.parametrize("name", ["confluent", "lenses", "aiven", "secor"])
@given(topic=topics)
def test_detection_tells_each_sink_by_its_names(name: str, topic: str) -> None:
    assert detect(_keys(name, topic), "s3://b/p") == name


def test_detection_asks_for_layout_when_names_are_ours_or_unknown() -> None:
    from kafka_archive.archiver.core.errors import ConfigError, NotInArchiveError

    with pytest.raises(NotInArchiveError):
        detect([(".kafka-archive/state/t/0.json", 1)], "s3://b/p")
    with pytest.raises(ConfigError, match="Pass --layout"):
        detect([("notes.txt", 1), ("x/y.csv", 1)], "s3://b/p")


def test_layout_for_refuses_an_unknown_sink() -> None:
    from kafka_archive.archiver.core.errors import ConfigError

    with pytest.raises(ConfigError, match="--layout takes one of confluent, lenses, aiven, secor"):
        layout_for("camel")
