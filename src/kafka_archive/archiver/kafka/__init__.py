"""Kafka, read with confluent-kafka: the partition reader of a task, the admin client of
the driver (offsets, groups, topic ids), and Schema Registry wire-format values."""
