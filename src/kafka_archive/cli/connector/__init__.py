"""`kafka-archive import-connector`: a Kafka Connect S3 sink configuration as KCQL."""
