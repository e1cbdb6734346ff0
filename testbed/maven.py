"""Jars from Maven Central, fetched once into the cache (the test broker's, the bench's peers').

``fetch_jars`` hands a pom to ``mvn dependency:copy-dependencies`` and keeps what it copies in
a directory of ``$XDG_CACHE_HOME/kafka-archive`` (default ``~/.cache``), marked with the
pom's digest: a later call with the same pom finds it there and runs no Maven; a changed pom
fetches again. The directory is filled in a staging directory and renamed into place
(``staged.py``), so an interrupted fetch leaves nothing that looks complete.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from staged import installed, staged

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


class MavenError(RuntimeError):
    """Maven could not fetch the jars; ``lines`` is what it printed."""

    def __init__(self, message: str, lines: list[str] | None = None) -> None:
        super().__init__(message)
        self.lines = lines or []

    def first_error(self) -> str:
        """The first line Maven marked ERROR (else its last line, else the message)."""
        return next(
            (line.strip() for line in self.lines if "ERROR" in line),
            self.lines[-1].strip() if self.lines else str(self),
        )

    def tail(self, count: int = 15) -> str:
        return "\n".join(self.lines[-count:]) or str(self)


class MavenMissing(MavenError):
    """``mvn`` is not on the PATH (and the jars are not in the cache)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-archive"


def fetch_jars(pom_text: str, target: Path, *, timeout: float = 900) -> Path:
    """``target`` filled with the runtime jars of the pom ``pom_text`` (Maven runs once)."""
    digest = hashlib.sha256(pom_text.encode()).hexdigest()
    if installed(target, digest):
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenMissing("needs Maven (apt-get install maven)")
    with staged(target, digest) as jars:
        pom = jars.parent / "pom.xml"
        pom.write_text(pom_text)
        try:
            result = subprocess.run(
                [
                    mvn,
                    "-q",
                    "-B",
                    "-f",
                    str(pom),
                    f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                    f"-DoutputDirectory={jars}",
                    "-DincludeScope=runtime",
                ],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise MavenError(f"Maven did not finish within {timeout / 60:g} minutes") from None
        if result.returncode != 0:
            lines = (result.stdout + result.stderr).splitlines()
            raise MavenError(f"mvn exited with {result.returncode}", lines)
    return target
