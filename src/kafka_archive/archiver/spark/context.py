"""Starting and stopping Spark for a run: the SparkContext, its conf, the JVM's stderr.

A bare SparkContext (the job uses the RDD API only). On a local master kafka-archive
launches Spark's JVM itself, so that it can check for Java first and pass the JVM's stderr
through a filter that drops the one line every start prints ("WARNING: Using incubator
modules", Spark 4 always adds that module); everything else the JVM and the Python workers
write is passed on unchanged. It also gives the JVM its class-data-sharing archive
(``jvm_cache``); a run that dumps one waits for its JVM's exit to publish it.

PySpark is imported by the functions that start Spark, not at the top: every command
imports this module (``cli.app``, for its error texts), and ``import pyspark`` costs
seconds (2.8 s measured with ``-X importtime`` on a busy 2-core host).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import threading
import traceback
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import SparkStartError, SparkTaskError
from kafka_archive.archiver.spark import jvm_cache

_DROPPED = (b"WARNING: Using incubator modules:",)
# What a JVM that cannot write its class archive (a full disk) prints as it exits, on its
# stdout or stderr: dropped once its context stopped (the run goes on without the archive).
_DUMP_FAILED = (
    b"An error has occurred while processing the shared archive file.",
    b"Unable to write to shared archive file.",
    b"Error occurred during initialization of VM",
    b"Unable to use shared archive.",
)


def spark_context(settings: Settings, app_name: str) -> tuple[Any, bool]:
    """The active SparkContext, or a new one; the bool says whether we own (must stop) it.

    A bare SparkContext, not a SparkSession: the job uses the RDD API only, and the SQL
    session's start-up cost ~1.2 s more on every run (measured, 2 cores).
    """
    from pyspark import SparkContext  # heavy: imported when Spark starts (module doc)

    active = SparkContext._active_spark_context
    if active is not None:
        return active, False
    conf = spark_conf(settings, app_name)
    gateway = None
    if settings.master.startswith("local") and SparkContext._gateway is None:
        java = find_java(os.environ)
        cache = _class_cache(conf, java) if settings.jvm_class_cache else None
        # A JVM that cannot write its archive says so as it exits (_DUMP_FAILED).
        exiting = threading.Event() if cache is not None and cache.dump is not None else None
        gateway = _launch_gateway(conf, exiting)
        if cache is not None and exiting is not None:
            _DUMPS[id(gateway)] = (cache, exiting)
    context = SparkContext(conf=conf, gateway=gateway)
    context.setLogLevel("ERROR")
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        # We use no accumulators: the server's errors (a JVM that stopped closes its
        # connection) are no news, and socketserver would print each with a traceback.
        server.handle_error = lambda request, client_address: None
    return context, True


# Gateways whose JVM dumps a class-data-sharing archive at its exit (stop_spark publishes it).
_DUMPS: dict[int, tuple[jvm_cache.ClassCache, threading.Event]] = {}
# How long stop_spark waits for a dumping JVM to exit (measured: ~1.5 CPU-s for 70 MB).
_DUMP_TIMEOUT_SECONDS = 30.0
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def _class_cache(conf: Any, java: str) -> jvm_cache.ClassCache | None:
    """The class-data-sharing archive for the JVM about to start, its options added to
    ``conf`` (:mod:`kafka_archive.archiver.spark.jvm_cache`); None when there is none to use or
    make (a cache directory that cannot be written)."""
    # Heavy: imported when Spark starts (module doc).
    import pyspark
    from pyspark.find_spark_home import _find_spark_home

    options = conf.get(_JAVA_OPTIONS, "")
    spark_home = Path(os.environ.get("SPARK_HOME") or _find_spark_home())
    lines = jvm_cache.key_inputs(java, spark_home, pyspark.__version__, options, os.environ)
    cache = jvm_cache.prepare(jvm_cache.cache_dir(os.environ), jvm_cache.cache_key(lines))
    if cache is not None:
        conf.set(_JAVA_OPTIONS, f"{options} {cache.java_options()}".strip())
    return cache


def _launch_gateway(conf: Any, exiting: threading.Event | None = None) -> Any:
    """Spark's JVM and its py4j gateway, with the JVM's stderr read through a filter (with
    ``exiting``, its stdout too, and the lines of a failed class archive dump are dropped
    once that event is set).

    The pipe is read from before the JVM starts, so what a JVM that dies at start says
    reaches the user before our own error line.
    """
    from pyspark.java_gateway import launch_gateway  # heavy: imported when Spark starts

    read_end, write_end = os.pipe()
    forwarder = threading.Thread(
        target=_forward, args=(read_end, 2, exiting), daemon=True, name="spark-stderr"
    )
    forwarder.start()
    popen_kwargs = {"stderr": write_end}
    if exiting is not None:
        out_read, out_write = os.pipe()
        threading.Thread(
            target=_forward, args=(out_read, 1, exiting), daemon=True, name="spark-stdout"
        ).start()
        popen_kwargs["stdout"] = out_write
    try:
        return launch_gateway(conf, popen_kwargs=popen_kwargs)  # type: ignore[no-untyped-call]
    except Exception as exc:
        if getattr(exc, "getCondition", lambda: None)() != "JAVA_GATEWAY_EXITED":
            raise
        os.close(write_end)
        write_end = -1
        forwarder.join(timeout=5)  # the JVM is gone: its last words, then ours
        raise SparkStartError(
            "Spark's JVM exited before it started (its own message is above)",
            hint="Spark needs Java 17 or later: check `java -version`, JAVA_HOME and SPARK_HOME",
        ) from None
    finally:
        if write_end >= 0:
            os.close(write_end)  # the JVM (and the workers it starts) hold their copies
        if exiting is not None:
            os.close(out_write)


def _forward(read_end: int, fd: int = 2, exiting: threading.Event | None = None) -> None:
    """Copy the JVM's stderr (or stdout) to ours, line by line, without the lines in
    ``_DROPPED``, nor once ``exiting`` is set those in ``_DUMP_FAILED``.

    Never stops before the JVM closes its end: a reader that gave up would leave the JVM
    blocked once the pipe filled. Lines that cannot be written (our stderr closed) are lost.
    """
    with os.fdopen(read_end, "rb", buffering=0) as source:
        pending = b""
        while chunk := source.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            dropped = _DROPPED + _DUMP_FAILED if exiting and exiting.is_set() else _DROPPED
            out = b"".join(line + b"\n" for line in lines if not line.startswith(dropped))
            _write(out, fd)
        if not (exiting and exiting.is_set() and pending.startswith(_DUMP_FAILED)):
            _write(pending, fd)


def _write(data: bytes, fd: int = 2) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass


def find_java(environ: Mapping[str, str]) -> str:
    """The java command Spark's launcher will run: $JAVA_HOME/bin/java, else java on PATH.

    Raises:
        SparkStartError: there is none (Spark would fail with a shell error and a traceback).
    """
    home = environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if os.access(java, os.X_OK):
            return str(java)
        raise SparkStartError(
            f"JAVA_HOME is {home}, which has no bin/java to run Spark",
            hint="Point JAVA_HOME at a Java 17+ installation, or unset it to use java on PATH",
        )
    found = shutil.which("java", path=environ.get("PATH"))
    if found is None:
        raise SparkStartError(
            "no java on PATH to run Spark",
            hint="Install Java 17 or later (e.g. `apt install openjdk-17-jre-headless`), "
            "or set JAVA_HOME",
        )
    return found


def spark_conf(settings: Settings, app_name: str) -> Any:
    """The SparkConf of a context kafka-archive starts (under spark-submit, on top of the
    spark.* properties spark-submit passed)."""
    from pyspark import SparkConf  # heavy: imported when Spark starts (module doc)

    conf = (
        SparkConf()
        .setMaster(settings.master)
        .setAppName(app_name)
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.task.maxFailures", "4")
    )
    if settings.master.startswith("local"):
        # On a cluster the workers' Python is the cluster's (spark.pyspark.python/--archives).
        # PySpark's RDD API starts workers with $PYSPARK_PYTHON, else `python3` on PATH
        # (not the conf below), which may lack kafka-archive (pipx, an unactivated venv).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        log_config = Path(__file__).with_name("log4j2.properties")
        (
            conf.set("spark.pyspark.python", sys.executable)
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.driver.host", "127.0.0.1")
            # The driver JVM only schedules: C1 and the serial collector start it ~3 s sooner.
            .set(
                "spark.driver.extraJavaOptions",
                f"-Dlog4j2.configurationFile={log_config} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            )
            # Workers fork from a daemon that has our task modules imported. Local only: a
            # cluster's executors get kafka-archive as a --py-files zip, which Spark puts on
            # sys.path per task, after the daemon has started (it could not import us).
            .set("spark.python.daemon.module", "kafka_archive.archiver.spark.daemon")
        )
    return conf


def stop_spark(context: Any) -> None:
    """Stop a SparkContext we own, without PySpark's ~1 s wait on its accumulator server.

    ``SparkContext.stop`` shuts that server down by waiting for its handler thread, which
    polls its socket once a second; kafka-archive uses no accumulators, so the server is
    told to stop and left to end on its own (a daemon thread) while the JVM stops.
    """
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        server.server_shutdown = True
        context._accumulatorServer = None
        threading.Thread(target=server.shutdown, name="accumulator-shutdown", daemon=True).start()
    gateway = getattr(context, "_gateway", None)
    try:
        with warnings.catch_warnings():
            # PySpark warns when its stop reaches no JVM (SPARK-18523): a stop's news, not ours.
            warnings.simplefilter("ignore", RuntimeWarning)
            context.stop()
    except Exception as exc:
        # The JVM is gone already (a signal to the whole process group reaches it first):
        # nothing is left to stop, and a session that no longer needed it ended well.
        if jvm_stopped(exc) is None:
            raise
        with type(context)._lock:
            type(context)._active_spark_context = None
        if type(context)._gateway is gateway:
            type(context)._gateway = type(context)._jvm = None
    dump = _DUMPS.pop(id(gateway), None)
    jvm = getattr(gateway, "proc", None)
    if dump is not None and jvm is not None and jvm.stdin is not None:
        cache, exiting = dump
        exiting.set()
        # Spark's JVM exits when its stdin closes; its class archive is written at exit.
        with contextlib.suppress(OSError):
            jvm.stdin.close()
        if type(context)._gateway is gateway:  # a later context must start a new JVM
            type(context)._gateway = type(context)._jvm = None
        cache.publish(jvm, _DUMP_TIMEOUT_SECONDS)


# What py4j and Spark say when the JVM stopped under the driver: its shutdown hook stopped
# the SparkContext, or the JVM is gone.
_JVM_STOPPED = (
    "Cannot call methods on a stopped SparkContext",
    "because SparkContext was shut down",
    "Answer from Java side is empty",
    "Error while sending or receiving",
)


def error_text(exc: BaseException) -> str | None:
    """``str(exc)``, or None when making the text failed: py4j's ``Py4JJavaError`` asks the
    JVM for it, which raises once the JVM is gone."""
    try:
        return str(exc)
    except Exception:
        return None


def jvm_stopped(exc: BaseException) -> SparkTaskError | None:
    """Spark's JVM stopped while the driver used it (a signal to the whole process group or
    cgroup reaches the JVM too: it runs its shutdown hooks and exits), as one line; None for
    anything else."""
    name = type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    from_py4j = any("/py4j/" in frame.filename for frame in frames)
    # A Py4JJavaError's text is fetched from the JVM: when that fails, the JVM is gone.
    text = error_text(exc) if name.startswith("Py4J") else ""
    stopped = (
        name.startswith("Py4J") and (text is None or any(sign in text for sign in _JVM_STOPPED))
    ) or (isinstance(exc, ConnectionError) and from_py4j)
    return jvm_stopped_error() if stopped else None


def jvm_stopped_error() -> SparkTaskError:
    """Spark's JVM stopped under the run, as one line (see :func:`jvm_stopped`)."""
    return SparkTaskError(
        "Spark's JVM stopped while the run was using it (a signal sent to kafka-archive's "
        "whole process group or cgroup reaches the JVM too)",
        hint="Stop kafka-archive with SIGTERM to its own process (systemd: KillMode=mixed): "
        "it then commits the batch in flight. Nothing uncommitted counts as archived; the "
        "next run resumes from the last committed offset",
    )


def task_failure(exc: BaseException) -> SparkTaskError | None:
    """A Spark job that failed (a ``Py4JJavaError`` from ``collect``) as one line: the
    failed task and the last line of its Python error, without the Java and Python traces;
    or Spark's JVM gone (:func:`jvm_stopped`). None when ``exc`` is neither."""
    gone = jvm_stopped(exc)
    if gone is not None:
        return gone
    if type(exc).__name__ != "Py4JJavaError":
        return None
    text = error_text(exc) or ""
    cause = ""
    python = text.find("PythonException:")
    if python >= 0:
        trace = text[python:].split("\n\tat ", 1)[0]
        lines = [
            line.strip()
            for line in trace.splitlines()[1:]
            if line.strip() and not line[:1].isspace() and not line.lstrip().startswith("SQLSTATE")
        ]
        cause = lines[-1] if lines else ""
    if not cause:
        reason = re.search(r"(?:most recent failure|stage failure): ([^\n]*)", text)
        lines = [line for line in text.splitlines() if line.strip()]
        cause = (reason.group(1) if reason else (lines[1] if len(lines) > 1 else text))[:300]
    times = re.search(r"failed (\d+) times?", text)
    what = f"a Spark task failed {times.group(1)} time(s)" if times else "a Spark task failed"
    return SparkTaskError(
        f"{what}: {cause.strip()}",
        hint="Nothing a failed task did not commit counts as archived; the next run resumes "
        "from the last committed offset. Run with --debug for the executor's traceback",
    )
