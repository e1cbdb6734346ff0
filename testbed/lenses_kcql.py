"""Lenses' own KCQL parser as a test oracle (tests/unit/kcql/test_lenses_parity.py).

``com.datamountaineer:kcql`` from Maven Central is the ANTLR parser (``Kcql.parse``) of the
stream-reactor connectors; 3.0.0 is its last release and the first with ``PROPERTIES(…)``.
``LensesKcql`` fetches it once (``maven.fetch_jars``), compiles ``kcql_oracle/KcqlOracle.java``
against it with ``javac`` into the same cache (a directory named by the digest of the source
and the jars: a changed source compiles again, nothing compiled is committed; whole or not at
all, ``staged.py``), and runs ONE
JVM that reads statements as JSON strings on stdin and answers each with one JSON line: the
parse error, or what the parsed ``Kcql`` object says.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from maven import MavenError, cache_root, fetch_jars
from staged import staged

VERSION = "3.0.0"
_SOURCE = Path(__file__).parent / "kcql_oracle" / "KcqlOracle.java"
_MAIN = "KcqlOracle"
_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-archive</groupId>
  <artifactId>lenses-kcql-oracle</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>com.datamountaineer</groupId>
      <artifactId>kcql</artifactId>
      <version>{VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""


class OracleUnavailable(RuntimeError):
    """The oracle cannot run here (no Java, no Maven, the fetch or the compile failed)."""


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise OracleUnavailable(
            f"the Lenses KCQL oracle needs {tool} (JDK 17+): "
            "apt-get install openjdk-17-jdk-headless"
        )
    return path


def classpath() -> str:
    """The oracle's class path: Lenses' jars and the compiled harness (built once, cached)."""
    _need("java")
    javac = _need("javac")
    try:
        jars = fetch_jars(_POM, cache_root() / f"lenses-kcql-{VERSION}")
    except MavenError as err:
        raise OracleUnavailable(
            f"cannot fetch com.datamountaineer:kcql:{VERSION}: {err.first_error()}"
        ) from None
    jar_paths = sorted(jars.glob("*.jar"))
    digest = hashlib.sha256(_SOURCE.read_bytes())
    for jar in jar_paths:
        digest.update(jar.name.encode())
    classes = cache_root() / f"kcql-oracle-{digest.hexdigest()[:16]}"
    jar_cp = ":".join(str(jar) for jar in jar_paths)
    if not (classes / f"{_MAIN}.class").is_file():
        with staged(classes, classes.name) as compiled:
            result = subprocess.run(
                [javac, "-nowarn", "-d", str(compiled), "-cp", jar_cp, str(_SOURCE)],
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise OracleUnavailable(f"javac {_SOURCE.name} failed:\n{result.stderr}")
    return f"{classes}:{jar_cp}"


class LensesKcql:
    """One JVM running ``Kcql.parse`` on each statement it is given."""

    def __init__(self) -> None:
        java = _need("java")
        # The JVM's stderr, for the message if it dies; open as long as the JVM runs.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self._process = subprocess.Popen(
            [java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath(), _MAIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            start_new_session=True,
        )
        self._lock = threading.Lock()

    def read(self, statement: str) -> dict[str, Any]:
        """What Lenses makes of ``statement``: ``{"ok": False, "error": …}`` or its parts."""
        return self.read_many([statement])[0]

    def read_many(self, statements: Sequence[str]) -> list[dict[str, Any]]:
        """``read`` of each statement, sent in one batch."""
        stdin, stdout = self._pipes()
        with self._lock:
            writer = threading.Thread(target=_write, args=(stdin, statements), daemon=True)
            writer.start()
            answers = [stdout.readline() for _ in statements]
            writer.join()
        if any(not answer for answer in answers):
            raise OracleUnavailable(f"the Lenses KCQL oracle stopped: {self._error()}")
        return [json.loads(answer) for answer in answers]

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        return stdin, stdout

    def _error(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-2000:] or "no output"

    def close(self) -> None:
        stdin, _ = self._pipes()
        stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._stderr.close()


def _write(stdin: IO[str], statements: Sequence[str]) -> None:
    for statement in statements:
        stdin.write(json.dumps(statement) + "\n")
    stdin.flush()
