"""SeaweedFS's S3 gateway: a second, real S3 implementation for the tests that depend on S3's
conditional requests (moto is a mock).

``weed_binary`` builds SeaweedFS's ``weed`` command once per pinned version into
``$XDG_CACHE_HOME/kafka-archive/seaweedfs-<version>/weed`` (default ``~/.cache``): the module's
source comes by name from the Go module proxy (``go mod download``; ``go install`` refuses the
module for its ``replace`` directives) and is built with ``go build ./weed`` in a writable copy
(about 6 minutes on 2 cores; a fresh machine's ``make test`` and ``.ci/run`` do it once). No
SeaweedFS source is kept in this repository. The binary is built in a staging directory and
renamed into place (``staged.py``), so an interrupted build leaves nothing that looks complete.

``start_seaweedfs`` runs ``weed server -s3`` (master, volume server, filer and S3 gateway in one
process) on free loopback ports with its data in a directory of the caller's, telemetry off.
``-volume.max`` and a small ``-master.volumeSizeLimitMB``: SeaweedFS grows a few volumes per
bucket (a collection: 7 at its first write), and with the defaults each new bucket soon finds
no writable volume and answers 500 ("failed to find writable volumes"). 1,000 volumes are
about 140 buckets per test session (volumes are sparse files; none is preallocated). Without
an IAM configuration the gateway accepts any signed request (as moto).

``python testbed/seaweedfs.py`` builds (or finds) the binary and prints its path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from devstack import LOOPBACK, Service, StackError, _http_ok, free_port, start_service
from maven import cache_root
from staged import staged

MODULE = "github.com/seaweedfs/seaweedfs"
# SeaweedFS tags its releases "3.99", not semver: the module proxy serves pseudo-versions.
VERSION = "v0.0.0-20261109003541-7506e5f91cd6"
BUILD_TIMEOUT = 40 * 60.0


def weed_binary(*, timeout: float = BUILD_TIMEOUT) -> Path:
    """The ``weed`` command of :data:`VERSION`, built on the first call (then cached)."""
    target = cache_root() / f"seaweedfs-{VERSION}"
    binary = target / "weed"
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    go = shutil.which("go")
    if go is None:
        raise StackError("building SeaweedFS for the tests needs Go (https://go.dev/doc/install)")
    deadline = time.monotonic() + timeout
    with staged(target, VERSION) as built:
        scratch = built.parent
        download = _go(
            [go, "mod", "download", "-json", f"{MODULE}@{VERSION}"], scratch, deadline, "download"
        )
        source_dir = json.loads(download.stdout)["Dir"]
        # The module cache is read-only; go build writes nothing there but wants a module
        # root it may lock: build in a copy.
        source = scratch / "src"
        shutil.copytree(source_dir, source, symlinks=True)
        for path in (source, *source.rglob("*")):
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o200)
        _go([go, "build", "-o", str(built / "weed"), "./weed"], source, deadline, "build")
    return binary


def _go(argv: list[str], cwd: Path, deadline: float, what: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOTOOLCHAIN": "local"}
    try:
        result = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=max(1.0, deadline - time.monotonic()),
        )
    except subprocess.TimeoutExpired:
        raise StackError(f"SeaweedFS's {what} did not finish in time") from None
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise StackError(f"SeaweedFS's {what} failed (go exited {result.returncode}):\n{tail}")
    return result


def start_seaweedfs(data_dir: Path, log_dir: Path, *, timeout: float = 120.0) -> Service:
    """``weed server -s3`` on loopback; its S3 endpoint is ``http://127.0.0.1:<port>``."""
    binary = weed_binary()
    data_dir.mkdir(parents=True, exist_ok=True)
    ports = {
        name: free_port()
        for name in (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port",
            "s3.port.grpc",
        )
    }
    s3_port = ports["s3.port"]
    argv = [
        str(binary),
        "server",
        f"-dir={data_dir}",
        f"-ip={LOOPBACK}",
        f"-ip.bind={LOOPBACK}",
        *(f"-{name}={port}" for name, port in ports.items()),
        "-s3",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.localSocket={data_dir / 's3.sock'}",
        f"-filer.localSocket={data_dir / 'filer.sock'}",
        "-master.telemetry=false",
        "-volume.max=1000",
        "-master.volumeSizeLimitMB=64",
    ]
    return start_service(
        "seaweedfs",
        argv,
        s3_port,
        lambda: _http_ok(f"http://{LOOPBACK}:{s3_port}/"),
        log_dir,
        timeout=timeout,
    )


if __name__ == "__main__":
    started = time.monotonic()
    try:
        path = weed_binary()
    except StackError as exc:
        print(f"seaweedfs: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"{path} ({time.monotonic() - started:.0f} s)")
