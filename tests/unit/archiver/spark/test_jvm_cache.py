"""The class-data-sharing archive of Spark's JVM: its key, publishing a dump only once
complete, and never using an archive that is not the file published."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_archive.archiver.spark import jvm_cache
from kafka_archive.archiver.spark.jvm_cache import (
    ClassCache,
    cache_dir,
    cache_key,
    key_inputs,
    prepare,
)

_ARCHIVE = bytes.fromhex("a8ab0bf0") + b"\0" * 8192  # the magic of a dynamic archive


def _install(tmp_path: Path) -> tuple[str, Path]:
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    (jdk / "lib" / "server").mkdir(parents=True)
    java = jdk / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    (jdk / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    (jdk / "release").write_text('JAVA_VERSION="17.0.15"\n')
    spark = tmp_path / "spark"
    (spark / "jars").mkdir(parents=True)
    (spark / "jars" / "spark-core.jar").write_bytes(b"core")
    return str(java), spark


def _key(
    java: str, spark: Path, version: str = "4.0.0", options: str = "-Xss1m", **env: str
) -> str:
    return cache_key(key_inputs(java, spark, version, options, env))


def test_the_key_changes_with_java_spark_and_jvm_options(tmp_path: Path) -> None:
    java, spark = _install(tmp_path)
    base = _key(java, spark)
    assert _key(java, spark) == base
    assert _key(java, spark, version="4.0.1") != base
    assert _key(java, spark, options="-Xss2m") != base
    assert _key(java, spark, JAVA_TOOL_OPTIONS="-Xint") != base
    assert _key(java, spark, UNRELATED="x") == base
    (spark / "jars" / "extra.jar").write_bytes(b"x")
    assert _key(java, spark) != base
    with_jar = _key(java, spark)
    os.utime(spark / "jars" / "spark-core.jar", ns=(1, 1))
    assert _key(java, spark) != with_jar
    changed = _key(java, spark)
    (Path(java).parent.parent / "release").write_text('JAVA_VERSION="17.0.16"\n')
    assert _key(java, spark) != changed
    other_java, _ = _install(tmp_path / "other")
    assert _key(other_java, spark) != _key(java, spark)


def test_java_on_a_symlink_keys_by_the_real_binary(tmp_path: Path) -> None:
    java, spark = _install(tmp_path)
    link = tmp_path / "java"
    link.symlink_to(java)
    assert _key(str(link), spark) == _key(java, spark)


def test_the_cache_is_under_xdg_cache_home_else_home(tmp_path: Path) -> None:
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "kafka-archive" / "jvm"
    home = Path.home() / ".cache" / "kafka-archive" / "jvm"
    assert cache_dir({}) == home
    assert cache_dir({"XDG_CACHE_HOME": "relative"}) == home  # the spec ignores relative ones


def _jvm(code: int, write: bytes | None, path: Path | None) -> subprocess.Popen[bytes]:
    """A process standing in for the JVM: writes its dump at exit, exits with ``code``."""
    script = "import sys\n"
    if write is not None and path is not None:
        script += f"open({str(path)!r}, 'wb').write({write!r})\n"
    script += f"sys.exit({code})\n"
    return subprocess.Popen([sys.executable, "-c", script])


def test_a_first_run_dumps_to_a_temporary_name_and_publishes_it_after_exit(
    tmp_path: Path,
) -> None:
    cache = prepare(tmp_path / "jvm", "k1")
    assert cache is not None and cache.dump is not None
    assert cache.dump != cache.archive and cache.dump.parent == cache.archive.parent
    assert f"-XX:ArchiveClassesAtExit={cache.dump}" in cache.java_options()
    assert jvm_cache.LOG_OFF in cache.java_options()
    assert cache.publish(_jvm(0, _ARCHIVE, cache.dump), timeout=60)
    assert cache.archive.read_bytes() == _ARCHIVE and not cache.dump.exists()
    used = prepare(tmp_path / "jvm", "k1")
    assert used == ClassCache(cache.archive)
    assert used.java_options().endswith(f"-XX:SharedArchiveFile={cache.archive}")


@pytest.mark.parametrize(
    ("code", "content"),
    [(1, _ARCHIVE), (0, None), (0, b"garbage" * 2000), (0, _ARCHIVE[:100])],
    ids=["jvm-failed", "no-dump", "not-an-archive", "too-short"],
)
def test_nothing_is_published_from_a_failed_or_incomplete_dump(
    tmp_path: Path, code: int, content: bytes | None
) -> None:
    cache = prepare(tmp_path, "k")
    assert cache is not None and cache.dump is not None
    assert not cache.publish(_jvm(code, content, cache.dump), timeout=60)
    assert not cache.archive.exists() and not cache.dump.exists()
    again = prepare(tmp_path, "k")
    if code == 0:  # the JVM could not dump: the next runs go without, for a day
        assert again is None
        old = time.time() - 2 * 86400
        os.utime(cache.refused, (old, old))
        again = prepare(tmp_path, "k")
    assert again is not None and again.dump is not None  # dumps again


def test_a_jvm_that_does_not_exit_in_time_publishes_nothing(tmp_path: Path) -> None:
    cache = prepare(tmp_path, "k")
    assert cache is not None and cache.dump is not None
    cache.dump.write_bytes(_ARCHIVE)  # half written, the JVM still at it
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not cache.publish(slow, timeout=0.2)
    finally:
        slow.kill()
        slow.wait()
    assert not cache.archive.exists()


def test_two_runs_dumping_at_once_leave_one_complete_archive(tmp_path: Path) -> None:
    first, second = prepare(tmp_path, "k"), prepare(tmp_path, "k")
    assert first is not None and second is not None and first.dump != second.dump
    assert first.publish(_jvm(0, _ARCHIVE, first.dump), timeout=60)
    assert second.publish(_jvm(0, _ARCHIVE + b"2", second.dump), timeout=60)
    assert prepare(tmp_path, "k") == ClassCache(second.archive)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.jsa", "k.ok"]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "replaced", "no-stamp"])
def test_an_archive_that_is_not_the_published_file_is_dumped_again(
    tmp_path: Path, damage: str
) -> None:
    cache = prepare(tmp_path, "k")
    assert cache is not None and cache.dump is not None
    assert cache.publish(_jvm(0, _ARCHIVE, cache.dump), timeout=60)
    cache.archive.chmod(0o644)
    if damage == "truncated":
        os.truncate(cache.archive, 1000)
    elif damage == "garbage":
        with cache.archive.open("r+b") as f:
            f.write(os.urandom(len(_ARCHIVE)))
        os.utime(cache.archive, ns=(1, 1))
    elif damage == "replaced":
        replacement = tmp_path / "other"
        replacement.write_bytes(_ARCHIVE)
        os.replace(replacement, cache.archive)
    else:
        cache.stamp.unlink()
    again = prepare(tmp_path, "k")
    assert again is not None and again.dump is not None
    assert again.archive == cache.archive


def test_stale_dumps_and_unused_archives_are_removed(tmp_path: Path) -> None:
    old = time.time() - 40 * 86400
    stale = tmp_path / "k.123.abcd.tmp.jsa"
    fresh = tmp_path / "k.456.abcd.tmp.jsa"  # a run dumping right now
    unused = tmp_path / "other.jsa"
    for path in (stale, fresh, unused, unused.with_suffix(".ok")):
        path.write_bytes(b"x")
    os.utime(stale, (old, old))
    os.utime(unused.with_suffix(".ok"), (old, old))
    prepare(tmp_path, "k")
    assert sorted(p.name for p in tmp_path.iterdir()) == [fresh.name]


def test_an_unwritable_cache_directory_means_no_archive(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert prepare(blocker / "jvm", "k") is None


def test_a_path_with_spaces_is_quoted_for_sparks_option_parser(tmp_path: Path) -> None:
    cache = ClassCache(tmp_path / "my cache" / "k.jsa")
    assert cache.java_options().endswith(f'"-XX:SharedArchiveFile={cache.archive}"')


def test_the_archive_is_on_by_default_and_turned_off_by_the_setting() -> None:
    from kafka_archive.archiver.config.load import load_settings

    assert load_settings(None, {}, {}).settings.jvm_class_cache is True
    off = load_settings(None, {"KAFKA_ARCHIVE_JVM_CLASS_CACHE": "false"}, {}).settings
    assert off.jvm_class_cache is False
