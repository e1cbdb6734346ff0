"""PySpark's Python worker daemon with kafka-archive's task code imported before it forks.

Spark starts one daemon per executor (``spark.python.daemon.module``) and forks a worker
from it for each Python task slot. PySpark's own daemon imports nothing, so each forked
worker imports ``pyspark.worker`` and then our task modules (boto3, confluent-kafka, the
encoders: ~0.4 s of CPU per worker, paid while the JVM is still warming up). Imported
here once, the workers inherit them. These imports start no thread (forking after one
would be unsafe); ``tests/unit/test_spark_start.py`` checks that.
"""

from __future__ import annotations

import pyspark.worker  # noqa: F401  (inherited by the forked workers)
from pyspark.daemon import manager

import kafka_archive.archiver.driver  # its task timer wraps every task
import kafka_archive.archiver.task  # noqa: F401  (inherited by the forked workers)

if __name__ == "__main__":
    manager()
