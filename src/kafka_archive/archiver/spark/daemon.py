"""PySpark's Python worker daemon with kafka-archive's task code imported before it forks.

Spark starts one daemon per executor (``spark.python.daemon.module``) and forks a worker
from it for each Python task slot. PySpark's own daemon imports nothing, so each forked
worker imports ``pyspark.worker`` and then our task modules (botocore, confluent-kafka, the
encoders: ~0.4 s of CPU per worker, paid while the JVM is still warming up). Imported
here once, the workers inherit them. These imports start no thread (forking after one
would be unsafe); ``tests/unit/archiver/spark/test_context.py`` checks that. Only what tasks run
is imported: the task modules and :mod:`.tasktime`, not the driver's planning nor KCQL's
parser (``kafka_archive.kcql`` imports Lark only in ``parse``). Before serving, the daemon
loads botocore's S3 model (:func:`..store.client.preload_models`) and freezes what it holds
(``gc.freeze``): measured on the keyed 256 MB topic, the Python processes' CPU per run
went from 2.3 to 1.9 CPU-s and the run's peak RSS down by ~0.1 GB (``bench/RESULTS.md``).

Spark puts its ``pyspark.zip`` and ``py4j-*.zip`` first on the workers' ``PYTHONPATH``. With
pip's pyspark those zips lie inside the installed package, next to the same modules as
files: imported from the zip, every module is compiled from source (a zip holds no
bytecode), and every task pays a re-read of each zip's directory (PySpark calls
``importlib.invalidate_caches()`` when it adds the task's files directory to ``sys.path``;
~0.4 CPU-s per task for pyspark.zip's 1,485 entries). Spark also puts its core jar on that
path (``PythonUtils.sparkPythonPath``: for a PySpark packed into Spark's jars, which pip's
is not): it holds no Python module, but once an import has looked into it, every task
re-reads its directory of ~6,000 entries (~0.045 CPU-s a task, measured). The daemon drops
such redundant zips and jars before it imports anything of PySpark
(:func:`redundant_spark_zips`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

# (zip name pattern, the package it holds) of what Spark puts on the workers' path.
_SPARK_ZIPS = (("pyspark.zip", "pyspark"), ("py4j-*.zip", "py4j"))


def redundant_spark_zips(path: Sequence[str]) -> list[str]:
    """The entries of ``path`` that are Spark's zips inside an installed pyspark package
    (``<dir>/pyspark/python/lib/``) whose package ``<dir>`` on ``path`` also holds as files,
    and Spark's jars of that package (``<dir>/pyspark/jars/``: no Python in them)."""
    archives = (".zip", ".jar")
    dirs = {os.path.realpath(entry) for entry in path if entry and not entry.endswith(archives)}
    redundant = []
    for entry in path:
        zipped = Path(os.path.realpath(entry))
        if zipped.suffix not in archives or len(zipped.parents) < 4:
            continue
        if zipped.suffix == ".jar":
            home = zipped.parent.parent  # <dir>/pyspark
            site = home.parent
            if (
                (zipped.parent.name, home.name) == ("jars", "pyspark")
                and str(site) in dirs
                and (home / "__init__.py").is_file()
            ):
                redundant.append(entry)
            continue
        lib = zipped.parent
        home = lib.parent.parent  # <dir>/pyspark
        if (lib.name, lib.parent.name, home.name) != ("lib", "python", "pyspark"):
            continue
        site = home.parent
        if str(site) not in dirs:
            continue
        for pattern, package in _SPARK_ZIPS:
            if zipped.match(pattern) and (site / package / "__init__.py").is_file():
                redundant.append(entry)
    return redundant


def _drop_redundant_spark_zips() -> None:
    for entry in redundant_spark_zips(sys.path):
        sys.path.remove(entry)
        for cached in [k for k in sys.path_importer_cache if k == entry or k.startswith(entry)]:
            del sys.path_importer_cache[cached]  # and its importers of paths inside it


_drop_redundant_spark_zips()

import gc  # noqa: E402

# No collection while the imports create what the daemon keeps (and freezes: prepare).
_collecting = gc.isenabled()
gc.disable()

import pyspark.worker  # noqa: E402, F401  (inherited by the forked workers)
from pyspark.daemon import manager  # noqa: E402

from kafka_archive.archiver.spark import tasktime  # noqa: E402, F401  (its timer wraps every task)
from kafka_archive.archiver.store import client  # noqa: E402
from kafka_archive.archiver.write import task  # noqa: E402, F401  (inherited by the forked workers)

if _collecting:
    gc.enable()


def prepare() -> None:
    """What the daemon does before it serves: botocore's S3 model loaded (each worker's
    first client then costs ~0.01 CPU-s, not ~0.09), and everything it holds frozen."""
    client.preload_models()
    # What the daemon holds now is never freed: out of the collector's sight, so that a
    # worker's collections (PySpark's worker runs one after each task) neither walk it nor
    # write to its pages (each write copies a page the worker shares with the daemon).
    gc.freeze()


if __name__ == "__main__":
    prepare()
    manager()
