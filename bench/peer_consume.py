"""The hand-rolled peer's consumer: every value of a topic to stdout, one per line, until
the end of each partition (what ``kcat -C -e -f '%s\\n'`` does)."""

import sys

from confluent_kafka import Consumer, TopicPartition

broker, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
consumer = Consumer(
    {
        "bootstrap.servers": broker,
        "group.id": "peer",
        "enable.partition.eof": True,
        "enable.auto.commit": False,
    }
)
consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
out = sys.stdout.buffer
done: set[int] = set()
while len(done) < partitions:
    for message in consumer.consume(10_000, 1.0):
        if message.error() is not None:
            done.add(message.partition())
            continue
        out.write(message.value() or b"")
        out.write(b"\n")
out.flush()
consumer.close()
