"""How kafka-archive starts Spark: the preloading worker daemon, the conf, the JVM stderr filter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


def test_daemon_module_starts_no_thread_before_forking_workers() -> None:
    # The daemon forks a worker per task; a thread alive at fork time would leave its locks
    # held forever in the child. Importing the module must leave the process single-threaded.
    count = _run(
        "import os, kafka_archive.archiver.spark.daemon as d; d.prepare();"
        "print(len(os.listdir('/proc/self/task')))"
    )
    assert count == "1"


def test_the_workers_import_no_planning_code() -> None:
    # The daemon's imports are what every worker inherits: the task's modules, not KCQL's
    # parser (Lark), the driver's planning or Spark's start.
    out = _run(
        "import sys, kafka_archive.archiver.spark.daemon as d; d.prepare();"
        "print(sorted(m for m in ('lark', 'kafka_archive.kcql.parser',"
        " 'kafka_archive.archiver.spark.driver', 'kafka_archive.archiver.plan.units',"
        " 'kafka_archive.archiver.spark.context', 'pyarrow') if m in sys.modules))"
    )
    assert out == "[]"


def test_daemon_module_preloads_task_code_and_serves_pyspark_manager() -> None:
    out = _run(
        "import sys, kafka_archive.archiver.spark.daemon as d, pyspark.daemon;"
        "print('kafka_archive.archiver.write.task' in sys.modules, 'pyspark.worker' in sys.modules,"
        " d.manager is pyspark.daemon.manager)"
    )
    assert out == "True True True"


def test_only_local_runs_use_the_daemon_a_cluster_could_not_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a cluster kafka-archive reaches the executors as a --py-files zip, put on sys.path
    # per task: a daemon module of ours could not be imported when the executor starts it.
    from pyspark import SparkContext

    from kafka_archive.archiver.config.settings import KafkaSettings, Settings
    from kafka_archive.archiver.spark.context import spark_conf

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    # A conf built while a JVM runs (the integration tests' context) starts from that JVM's
    # spark.* system properties; build these from nothing, as a fresh process does.
    monkeypatch.setattr(SparkContext, "_jvm", None)
    daemon = "spark.python.daemon.module"
    local = spark_conf(Settings(KafkaSettings("b:9092"), master="local[2]"), "job")
    assert local.get(daemon) == "kafka_archive.archiver.spark.daemon"
    assert local.get("spark.pyspark.python") == sys.executable
    cluster = spark_conf(Settings(KafkaSettings("b:9092"), master="spark://h:7077"), "job")
    assert cluster.get(daemon) is None
    assert cluster.get("spark.master") == "spark://h:7077"


def test_the_jvm_stderr_filter_drops_only_the_incubator_warning(
    capfd: pytest.CaptureFixture[str],
) -> None:
    import os

    from kafka_archive.archiver.spark.context import _forward

    read_end, write_end = os.pipe()
    os.write(
        write_end,
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"kafka-archive: spark: ERROR Executor: boom\n"
        b"Traceback from a worker\n  line 2\nno newline at the end",
    )
    os.close(write_end)
    _forward(read_end)  # returns at end of input, as when the JVM exits
    assert capfd.readouterr().err == (
        "kafka-archive: spark: ERROR Executor: boom\nTraceback from a worker\n  line 2\n"
        "no newline at the end"
    )


def test_a_failed_class_archive_dump_is_dropped_only_once_the_jvm_exits(
    capfd: pytest.CaptureFixture[str],
) -> None:
    import os
    import threading

    from kafka_archive.archiver.spark.context import _forward

    failed = (
        b"An error has occurred while processing the shared archive file.\n"
        b"Unable to write to shared archive file.\n"
    )
    for exiting in (False, True):
        event = threading.Event()
        if exiting:
            event.set()
        read_end, write_end = os.pipe()
        os.write(write_end, b"a worker's line\n" + failed)
        os.close(write_end)
        _forward(read_end, 1, event)
        out = capfd.readouterr().out
        assert out == "a worker's line\n" + ("" if exiting else failed.decode())


def test_the_daemon_drops_only_spark_zips_that_duplicate_the_installed_pyspark(
    tmp_path: Path,
) -> None:
    from kafka_archive.archiver.spark.daemon import redundant_spark_zips

    site = tmp_path / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    for package in ("pyspark", "py4j"):
        (site / package).mkdir(exist_ok=True)
        (site / package / "__init__.py").write_text("")
    zips = [
        str(site / "pyspark" / "." / "python" / "lib" / "pyspark.zip"),
        str(lib / "py4j-0.10.9.9-src.zip"),
    ]
    (site / "pyspark" / "jars").mkdir()
    jar = str(site / "pyspark" / "jars" / "spark-core_2.13-4.3.0.jar")  # no Python in it
    other = str(tmp_path / "user" / "deps.zip")  # a user's --py-files zip stays
    user_jar = str(tmp_path / "user" / "lib.jar")
    assert redundant_spark_zips([*zips, jar, other, user_jar, str(site)]) == [*zips, jar]
    # Without the installed package on the path the zips are what provides PySpark.
    assert redundant_spark_zips([*zips, jar, other]) == []
    (site / "py4j" / "__init__.py").unlink()
    assert redundant_spark_zips([*zips, str(site)]) == zips[:1]


def test_workers_import_pyspark_from_files_not_from_spark_zips() -> None:
    import pyspark

    home = Path(pyspark.__file__).parent
    zips = sorted(str(p) for p in (home / "python" / "lib").glob("*.zip"))
    assert zips, "pip's pyspark ships its zips under python/lib"
    out = _run(
        f"import sys; sys.path[:0] = {zips!r};"
        "import kafka_archive.archiver.spark.daemon, pyspark;"
        "print(pyspark.__file__.endswith('.py'), any(p.endswith('.zip') and 'pyspark' in p"
        " for p in sys.path))"
    )
    assert out == "True False"


def test_workers_leave_spark_core_jar_off_their_path() -> None:
    """Spark puts its core jar on the workers' PYTHONPATH; it holds no Python, and a
    zipimporter of it re-reads ~6,000 entries at every task's invalidate_caches()."""
    import pyspark

    jars = sorted(str(p) for p in (Path(pyspark.__file__).parent / "jars").glob("spark-core_*"))
    assert jars, "pip's pyspark ships Spark's core jar"
    out = _run(
        f"import sys; sys.path[:0] = {jars!r};"
        "import zipimport, kafka_archive.archiver.spark.daemon;"
        "print(any(p.endswith('.jar') for p in sys.path), any(isinstance(i, zipimport.zipimporter)"
        " for i in sys.path_importer_cache.values()))"
    )
    assert out == "False False"
