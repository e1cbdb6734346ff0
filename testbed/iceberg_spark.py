"""Spark's Iceberg runtime for the integration tests, fetched once from Maven Central, and the
Spark it runs on.

``testbed/iceberg/pom.xml`` names ``org.apache.iceberg:iceberg-spark-runtime-4.1_2.13`` (the
newest Spark 4 runtime there is), ``iceberg-aws-bundle`` (S3FileIO, to reach the test S3
endpoint) and ``org.xerial:sqlite-jdbc`` (Iceberg's JdbcCatalog on the tests' pyiceberg SQL
catalog, a SQLite file); :func:`ensure_jars` copies them with Maven into
``~/.cache/kafka-archive/iceberg-spark-<iceberg version>`` (``$XDG_CACHE_HOME`` honoured)
once, as the Kafka broker's jars are (``testbed/maven.py``).

The runtime is built against one Spark minor version, and Maven Central has none for Spark
4.2 or 4.3 (the installed pyspark is 4.3.0; refused: ``iceberg-spark-runtime-4.3_2.13`` and
``-4.2_2.13`` at 1.11.0, 1.11.1 and 1.12.0); the 4.1 runtime on Spark 4.3 fails at the first
query (``IncompatibleClassChangeError``: Spark 4.3's ``connector.catalog.View`` is no longer
an interface). So the reader runs on the Spark the runtime is for: :func:`ensure_pyspark`
installs ``pyspark==`` :data:`SPARK_VERSION` with pip into ``~/.cache/kafka-archive/`` once
(a directory put first on the reader process's ``PYTHONPATH``), beside the venv's own; both
are installed whole or not at all (``staged.py``).

Run ``python testbed/iceberg_spark.py`` to fetch both ahead of a test run (``make test`` does).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from maven import MavenError, cache_root, fetch_jars
from staged import installed, staged

POM = Path(__file__).resolve().parent / "iceberg" / "pom.xml"


SPARK_VERSION = "4.1.4"  # the Spark of iceberg-spark-runtime-4.1_2.13


def ensure_pyspark(version: str = SPARK_VERSION) -> Path:
    """A directory holding pyspark ``version`` (and its py4j), installed with pip once.

    Raises:
        RuntimeError: pip failed (its last lines).
    """
    target = cache_root() / f"pyspark-{version}"
    if installed(target, version):
        return target
    with staged(target, version) as site:
        spec = f"pyspark=={version}"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(site), spec],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise RuntimeError(f"pip could not install pyspark=={version}:\n{tail}")
    return target


def iceberg_version(pom: Path = POM) -> str:
    found = re.search(r"<iceberg\.version>([^<]+)</iceberg\.version>", pom.read_text())
    assert found is not None, f"{pom} names no iceberg.version"
    return found.group(1)


def ensure_jars(pom: Path = POM) -> list[Path]:
    """The jars Spark needs to read the tests' Iceberg tables (fetched unless cached).

    Raises:
        MavenError: Maven could not fetch them (``MavenMissing``: no ``mvn``).
    """
    libs = fetch_jars(pom.read_text(), cache_root() / f"iceberg-spark-{iceberg_version(pom)}")
    return sorted(libs.glob("*.jar"))


if __name__ == "__main__":
    try:
        print("\n".join(str(jar) for jar in ensure_jars()))
        print(ensure_pyspark())
    except MavenError as exc:
        sys.exit(f"mvn could not fetch Spark's Iceberg runtime ({POM}):\n{exc.tail()}")
    except RuntimeError as exc:
        sys.exit(str(exc))
