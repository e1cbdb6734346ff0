from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.protocol import log
from kafka_archive.archiver.protocol.naming import log_head, partition_ref, topic_partition
from kafka_archive.kcql.plan import Target


def test_a_partition_round_trips_through_its_log_name() -> None:
    tp = TopicPartition("orders", 3)
    assert topic_partition(partition_ref(tp)) == tp


def test_the_log_sits_beside_the_states_under_the_prefix() -> None:
    assert log.log_prefix(log_head(Target("b", "archive/x"))) == "archive/x/.kafka-archive/log/"
    assert log.log_prefix(log_head(Target("b", ""))) == ".kafka-archive/log/"
