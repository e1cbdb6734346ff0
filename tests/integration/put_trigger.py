"""A signal sent to a whole-process `kafka-archive` at its Nth data PUT, through the fault
proxy (tests/integration/faultproxy.py): the kill and freeze points of the commit-log tests
(log-mode runs and compact), written once."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence

from archive_helpers import KAFKA_ARCHIVE, run_args


class Stopped(Exception):
    """Raised in the proxy's handler: the request is never forwarded."""


class Trigger:
    """Sends ``sig`` to a subprocess's process group at its ``nth`` data PUT (an object, not
    the log); SIGKILL drops that request and every later one, SIGSTOP lets them through."""

    def __init__(self, sig: signal.Signals, nth: int) -> None:
        self.sig, self.nth, self.seen = sig, nth, 0
        self.fired = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None

    def on_request(self, method: str, path: str, headers: dict[str, str]) -> bool:
        key = path.split("?", 1)[0].split("/", 2)[-1]
        if method != "PUT" or "/.kafka-archive/" in f"/{key}" or self.fired.is_set():
            if self.fired.is_set() and self.sig is signal.SIGKILL:
                raise Stopped(path)
            return False
        self.seen += 1
        if self.seen == self.nth and self.process is not None:
            self.fired.set()
            os.killpg(self.process.pid, self.sig)
            if self.sig is signal.SIGKILL:
                raise Stopped(path)
        return False


@contextlib.contextmanager
def log_mode_process(args: Sequence[str], **extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """`kafka-archive <args>` with commit_protocol=log (and the environment ``extra``) in its
    own process group; what is left of it (stopped or not) killed at the end."""
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "KAFKA_ARCHIVE_COMMIT_PROTOCOL": "log",
        **extra,
    }
    process = subprocess.Popen(
        [KAFKA_ARCHIVE, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGCONT)
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


def log_mode_run(
    kcql: str, broker: str, endpoint: str, **extra: str
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """A log-mode `kafka-archive run` of ``kcql`` on two local task slots (see above)."""
    return log_mode_process([*run_args(kcql, broker, endpoint), "--master", "local[2]"], **extra)
