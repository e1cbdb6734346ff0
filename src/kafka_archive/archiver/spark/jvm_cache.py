"""A class-data-sharing (AppCDS) archive for Spark's JVM on a local master.

Spark's driver JVM spends most of its start loading and verifying the same ~10,000 classes
at every run. JDK 13+ can dump the classes a run loaded into a dynamic archive when the JVM
exits (``-XX:ArchiveClassesAtExit``) and map them at the next start
(``-XX:SharedArchiveFile``): measured on 2 cores, a SparkContext's start and stop went from
3.4 to 1.75 CPU-seconds of the JVM.

The archive lives in the user's cache directory, one file per key (:func:`cache_key`): the
java binary and its build, Spark's jars and version, and the JVM's options, so that an
upgrade or another option never maps an archive made for something else. The first run of a
key dumps to a unique temporary name; only once its JVM has exited cleanly is the file
renamed into place, and a fingerprint of the published file (size, mtime, inode) written
beside it. A run uses an archive only when the fingerprint matches: a truncated archive
makes the JVM die of SIGBUS (measured, JDK 17), so anything damaged, half written or
replaced is dumped anew instead; a file of garbage the JVM itself ignores. A java that exits
cleanly without a usable dump is not asked to dump again for a day (a dumping run costs ~5
CPU-s more). CDS's logging is turned off, so no ``[warning][cds]`` line reaches the user's
terminal.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka_archive.cache import user_cache_dir

# Unified logging of CDS off (the dump warns for every class it skips, on the JVM's stdout).
LOG_OFF = "-Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"
# The first bytes of a dynamic archive (0xf00baba8, little-endian; JDK 13-21).
_DYNAMIC_MAGIC = bytes.fromhex("a8ab0bf0")
# Environment that changes the JVM's classes or options, so part of the key.
_KEY_ENVIRONMENT = (
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "SPARK_SUBMIT_OPTS",
    "SPARK_CLASSPATH",
    "SPARK_DIST_CLASSPATH",
    "HADOOP_CONF_DIR",
)
# A temporary dump older than this belongs to a run that died (SIGKILL, full disk).
_STALE_SECONDS = 3600.0
_UNUSED_SECONDS = 30 * 86400.0
# A java that exited cleanly without a usable dump is not asked again for this long.
_REFUSED_SECONDS = 86400.0
_FORMAT = 1


def cache_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/kafka-archive/jvm``, else ``~/.cache/kafka-archive/jvm``."""
    return user_cache_dir(environ) / "jvm"


def _stat_entry(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:absent"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def key_inputs(
    java: str,
    spark_home: Path,
    spark_version: str,
    java_options: str,
    environ: Mapping[str, str],
) -> list[str]:
    """Everything the archive depends on, as lines (:func:`cache_key` hashes them).

    The java binary's real path and its build (libjvm and the ``release`` file, no process
    started), Spark's home, version and jar set (names, sizes, mtimes), the JVM options and
    the environment that adds to them.
    """
    real_java = Path(os.path.realpath(java))
    home = real_java.parent.parent
    lines = [f"format {_FORMAT}", f"java {real_java}"]
    lines += [
        _stat_entry(home / "lib" / "server" / "libjvm.so"),
        _stat_entry(home / "lib" / "modules"),
    ]
    with contextlib.suppress(OSError):
        lines.append((home / "release").read_text(errors="replace"))
    lines += [f"spark {os.path.realpath(spark_home)} {spark_version}"]
    jars = spark_home / "jars"
    try:
        names = sorted(os.listdir(jars))
    except OSError:
        names = []
    lines += [_stat_entry(jars / name) for name in names]
    lines.append(f"options {java_options}")
    lines += [f"env {name}={environ[name]}" for name in _KEY_ENVIRONMENT if name in environ]
    return lines


def cache_key(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]


def _fingerprint(path: Path) -> dict[str, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


@dataclass(frozen=True, slots=True)
class ClassCache:
    """The archive of one key: used by this run (``dump`` None) or dumped by it."""

    archive: Path
    dump: Path | None = None

    @property
    def stamp(self) -> Path:
        return self.archive.with_suffix(".ok")

    @property
    def refused(self) -> Path:
        """Marks a key whose JVM exited cleanly without a usable dump."""
        return self.archive.with_suffix(".nodump")

    def java_options(self) -> str:
        """The JVM options that use (or dump) the archive, with CDS's logging off."""
        target = self.dump if self.dump is not None else self.archive
        flag = "ArchiveClassesAtExit" if self.dump is not None else "SharedArchiveFile"
        return f"{LOG_OFF} {_quoted(f'-XX:{flag}={target}')}"

    def usable(self) -> bool:
        """Whether the archive is the file that was published (not truncated, replaced or
        half written)."""
        try:
            recorded = json.loads(self.stamp.read_text())
        except (OSError, ValueError):
            return False
        found = _fingerprint(self.archive)
        return found is not None and recorded == found

    def publish(self, jvm: subprocess.Popen[bytes], timeout: float) -> bool:
        """After the JVM that dumps was told to exit: wait for it (at most ``timeout``
        seconds), and make its complete dump the archive. False when nothing was published
        (the JVM still running or failed, no dump, not an archive); never raises."""
        if self.dump is None:
            return False
        try:
            code = jvm.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False  # still writing, or stuck: the next run removes the stale file
        try:
            if code != 0 or not _is_archive(self.dump):
                if code == 0:  # this java cannot dump: runs stop paying for trying, a while
                    self.refused.touch()
                self.dump.unlink(missing_ok=True)
                return False
            os.replace(self.dump, self.archive)
            stamp = self.stamp.with_name(f"{self.stamp.name}.{secrets.token_hex(4)}.tmp")
            stamp.write_text(json.dumps(_fingerprint(self.archive)))
            os.replace(stamp, self.stamp)
            return True
        except OSError:  # a full disk, a cache directory gone: the next run tries again
            with contextlib.suppress(OSError):
                self.dump.unlink(missing_ok=True)
            return False


def _quoted(option: str) -> str:
    # Spark's launcher splits extraJavaOptions like a shell: quote a path with spaces.
    return f'"{option}"' if any(c.isspace() for c in option) else option


def _is_archive(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == _DYNAMIC_MAGIC and path.stat().st_size > 4096
    except OSError:
        return False


def prepare(directory: Path, key: str) -> ClassCache | None:
    """The archive of ``key`` to use, or a new dump to make; None when the cache directory
    cannot be written, or when this key's JVM failed to dump in the last day (the run goes
    on without an archive)."""
    cache = ClassCache(directory / f"{key}.jsa")
    if cache.usable():
        with contextlib.suppress(OSError):
            os.utime(cache.stamp)  # in use: kept by _remove_stale
        return cache
    with contextlib.suppress(OSError):
        if time.time() - cache.refused.stat().st_mtime < _REFUSED_SECONDS:
            return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _remove_stale(directory)
    except OSError:
        return None
    if not os.access(directory, os.W_OK):
        return None
    dump = directory / f"{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp.jsa"
    return ClassCache(cache.archive, dump)


def _remove_stale(directory: Path) -> None:
    """Temporary dumps of runs that died, and archives no run used for 30 days (another
    Spark or java since)."""
    now = time.time()
    for path in directory.glob("*.tmp*"):
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > _STALE_SECONDS:
                path.unlink()
    for stamp in [*directory.glob("*.ok"), *directory.glob("*.nodump")]:
        with contextlib.suppress(OSError):
            if now - stamp.stat().st_mtime > _UNUSED_SECONDS:
                stamp.with_suffix(".jsa").unlink(missing_ok=True)
                stamp.unlink()
