"""kafka-archive: copy Kafka topics into S3 exactly once, driven by KCQL, run on Spark."""

__version__ = "0.1.0"
