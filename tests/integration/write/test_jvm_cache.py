"""The class-data-sharing archive of Spark's JVM with a real JVM: the second run of a local
master maps the archive the first one made, with the same output; a garbage or truncated
file at the archive's path never fails a start.

Each test has its own XDG_CACHE_HOME: the other tests' runs share the user's cache."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_archive.archiver.spark.context import find_java
from kafka_archive.archiver.spark.jvm_cache import ClassCache, prepare

pytestmark = pytest.mark.integration

_SPARK_RUN = """
import os, resource, sys
if os.environ.get("TEST_FILE_SIZE_LIMIT"):  # as a full disk: writing past it fails (EFBIG)
    limit = int(os.environ["TEST_FILE_SIZE_LIMIT"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from kafka_archive.archiver.config.load import load_settings
from kafka_archive.archiver.spark.context import spark_context, stop_spark
settings = load_settings(None, os.environ, {"bootstrap_servers": "127.0.0.1:1"}).settings
context, _ = spark_context(settings, "jvm-cache-test")
with open(sys.argv[1], "wb") as f:
    f.write(open(f"/proc/{context._gateway.proc.pid}/cmdline", "rb").read())
print(context.parallelize(range(100), 2).map(lambda x: x * 2).sum())
stop_spark(context)
if sys.argv[2:] == ["again"]:  # the dumping JVM exited: a new context starts a new one
    context, _ = spark_context(settings, "jvm-cache-test")
    assert context.parallelize(range(3)).count() == 3
    stop_spark(context)
"""


def _spark_run(
    tmp_path: Path, name: str, *args: str, **extra_env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), **extra_env}
    env.pop("KAFKA_ARCHIVE_JVM_CLASS_CACHE", None)
    cmdline = tmp_path / name
    done = subprocess.run(
        [sys.executable, "-c", _SPARK_RUN, str(cmdline), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, cmdline.read_bytes().decode().split("\0")


def test_the_second_local_run_maps_the_archive_the_first_made(tmp_path: Path) -> None:
    first, first_jvm = _spark_run(tmp_path, "first", "again")
    assert first.returncode == 0, first.stderr
    archives = list((tmp_path / "cache" / "kafka-archive" / "jvm").glob("*.jsa"))
    assert len(archives) == 1 and not archives[0].name.count(".tmp")
    assert any(arg.startswith("-XX:ArchiveClassesAtExit=") for arg in first_jvm)
    second, second_jvm = _spark_run(tmp_path, "second")
    assert second.returncode == 0, second.stderr
    assert f"-XX:SharedArchiveFile={archives[0]}" in second_jvm
    assert not any("ArchiveClassesAtExit" in arg for arg in second_jvm)
    assert (second.stdout, second.stderr) == (first.stdout, first.stderr)
    assert first.stdout == "9900\n"
    assert "cds" not in first.stdout + first.stderr + second.stdout + second.stderr


@pytest.mark.full
def test_a_dump_that_cannot_be_written_fails_nothing_and_says_nothing(tmp_path: Path) -> None:
    done, jvm = _spark_run(tmp_path, "full", TEST_FILE_SIZE_LIMIT=str(8 << 20))
    assert any(arg.startswith("-XX:ArchiveClassesAtExit=") for arg in jvm)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("9900\n", "")
    assert list((tmp_path / "cache" / "kafka-archive" / "jvm").iterdir()) == []


def _launcher(java: str, options: str) -> subprocess.CompletedProcess[bytes]:
    """A short real JVM: Spark's launcher printing the command it would run."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_SCALA_VERSION": "2.13"}
    command = [java, *shlex.split(options), "-cp", f"{spark_home / 'jars'}/*"]
    command += ["org.apache.spark.launcher.Main", "org.apache.spark.deploy.SparkSubmit"]
    command += ["--master", "local", "pyspark-shell"]
    return subprocess.run(command, env=env, capture_output=True, timeout=120)


def _dump(java: str, directory: Path) -> ClassCache:
    cache = prepare(directory, "k")
    assert cache is not None and cache.dump is not None
    jvm = subprocess.Popen(
        [java, *shlex.split(cache.java_options()), "-version"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert cache.publish(jvm, timeout=120)
    return ClassCache(cache.archive)


def test_garbage_or_a_truncated_file_at_the_archive_path_never_fails_a_start(
    tmp_path: Path,
) -> None:
    java = find_java(os.environ)
    plain = _launcher(java, "")
    assert plain.returncode == 0 and plain.stdout
    cache = _dump(java, tmp_path)
    assert prepare(tmp_path, "k") == cache
    used = _launcher(java, cache.java_options())
    assert (used.returncode, used.stdout, used.stderr) == (0, plain.stdout, plain.stderr)

    # Garbage, even with a forged stamp that makes us use it: the JVM ignores it.
    size = cache.archive.stat().st_size
    cache.archive.unlink()
    cache.archive.write_bytes(os.urandom(size))
    st = cache.archive.stat()
    cache.stamp.write_text(
        json.dumps({"size": size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino})
    )
    assert prepare(tmp_path, "k") == cache
    garbage = _launcher(java, cache.java_options())
    assert (garbage.returncode, garbage.stdout, garbage.stderr) == (0, plain.stdout, plain.stderr)

    # Truncated (which makes JDK 17 die of SIGBUS when mapped): detected, dumped again.
    cache.stamp.unlink()
    cache = _dump(java, tmp_path)
    cache.archive.chmod(0o644)
    os.truncate(cache.archive, cache.archive.stat().st_size // 2)
    again = prepare(tmp_path, "k")
    assert again is not None and again.dump is not None
    rebuilt = _launcher(java, again.java_options())
    assert (rebuilt.returncode, rebuilt.stdout, rebuilt.stderr) == (0, plain.stdout, plain.stderr)
