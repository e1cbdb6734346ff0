"""Produce sample orders into a Kafka topic: JSON values, string keys, a country header.

    python samples/produce_orders.py --bootstrap-servers 127.0.0.1:9092 --topic orders \
        --count 30000 --partitions 3

Order ``i`` goes to partition ``i % partitions``; its timestamp advances 100 ms per
order from 2026-01-01T00:00:00Z, so 36,000 orders span one hour of record time.
"""

from __future__ import annotations

import argparse
import json
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

COUNTRIES = ("DE", "FR", "GB", "NL", "US")
PRODUCTS = ("keyboard", "mouse", "monitor", "cable", "dock", "headset")
EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def order(i: int) -> dict[str, object]:
    return {
        "id": i,
        "customer": {"id": f"c{i % 997:04d}", "tier": ("gold", "silver", "bronze")[i % 3]},
        "product": PRODUCTS[i % len(PRODUCTS)],
        "quantity": 1 + i % 5,
        "price": round(9.99 + (i % 50) * 1.5, 2),
        "country": COUNTRIES[i % len(COUNTRIES)],
    }


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=10).topics:
        return
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=30)


def produce(bootstrap: str, topic: str, count: int, partitions: int, first: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(first, first + count):
        body = order(i)
        while True:
            try:
                producer.produce(
                    topic,
                    key=f"order-{i}".encode(),
                    value=json.dumps(body, separators=(",", ":")).encode(),
                    partition=i % partitions,
                    headers=[("country", str(body["country"]).encode())],
                    timestamp=EPOCH_MS + i * 100,
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(60)
    if left:
        raise SystemExit(f"{left} order(s) were not acknowledged by the broker")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--count", type=int, default=30_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--first", type=int, default=0, help="id of the first order")
    args = parser.parse_args(argv)
    create_topic(args.bootstrap_servers, args.topic, args.partitions)
    produce(args.bootstrap_servers, args.topic, args.count, args.partitions, args.first)
    print(f"produced {args.count} orders to {args.topic} ({args.partitions} partitions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
