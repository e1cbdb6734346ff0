"""``kafka-archive submit``: the same job as ``run``, handed to a Spark cluster by spark-submit.

What reaches the cluster:

- the package itself as a zip (``--py-files``), built once per version and source hash under
  ``~/.cache/kafka-archive/`` (``$XDG_CACHE_HOME`` respected). It holds only our code: the
  cluster's Python must have the dependencies (pyspark, confluent-kafka, boto3, lark,
  fastavro, pyarrow, pyyaml, cramjam) — or pass a packed virtualenv with
  ``--archives env.tar.gz#env --conf spark.pyspark.python=./env/bin/python`` (see README);
- the entry script :mod:`kafka_archive.spark_entry`, which runs ``kafka-archive run`` with the
  same run options, so driver and executors execute exactly the code path of ``run``.

Nothing secret is put on the command line: credentials come from the standard AWS chain on
the driver and executors, and ``--print-command`` redacts any value whose name looks secret.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import kafka_archive
from kafka_archive.archiver.errors import ConfigError

_SECRET = re.compile(r"(secret|password|passwd|token|credential|sasl\.jaas|access\.?key)", re.I)
REDACTED = "*****"


@dataclass(frozen=True, slots=True)
class SparkOptions:
    """The spark-submit side of ``submit``."""

    master: str
    deploy_mode: str = "client"
    conf: tuple[tuple[str, str], ...] = ()
    num_executors: int | None = None
    executor_memory: str | None = None
    executor_cores: int | None = None
    driver_memory: str | None = None
    archives: tuple[str, ...] = ()
    spark_submit: str | None = None


def spark_submit_path(explicit: str | None, environ: Mapping[str, str]) -> str:
    """``explicit``, else ``$SPARK_HOME/bin/spark-submit``, else the one pyspark ships."""
    if explicit:
        return explicit
    home = environ.get("SPARK_HOME")
    if home:
        return str(Path(home) / "bin" / "spark-submit")
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def package_zip(cache_dir: Path) -> Path:
    """The zip of the ``kafka_archive`` package, reused while version and sources match."""
    root = Path(kafka_archive.__file__).resolve().parent
    files = sorted(
        p for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )  # fmt: skip
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    name = f"kafka_archive-{kafka_archive.__version__}-{digest.hexdigest()[:12]}.zip"
    target = cache_dir / name
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, str(Path("kafka_archive") / path.relative_to(root)))
    partial.replace(target)  # atomic: a concurrent submit sees a whole zip or none
    return target


def cache_dir(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-archive"


def command(
    spark: SparkOptions,
    run_args: Sequence[str],
    py_files: Path,
    environ: Mapping[str, str],
    extra_py_files: Sequence[Path] = (),
) -> list[str]:
    """The spark-submit command line that runs ``kafka-archive run <run_args>`` on Spark."""
    from kafka_archive import spark_entry

    argv = [spark_submit_path(spark.spark_submit, environ), "--master", spark.master,
            "--deploy-mode", spark.deploy_mode, "--name", "kafka-archive"]  # fmt: skip
    for key, value in spark.conf:
        argv += ["--conf", f"{key}={value}"]
    sizes: tuple[tuple[str, str | int | None], ...] = (
        ("--num-executors", spark.num_executors),
        ("--executor-memory", spark.executor_memory),
        ("--executor-cores", spark.executor_cores),
        ("--driver-memory", spark.driver_memory),
    )
    for flag, size in sizes:
        if size is not None:
            argv += [flag, str(size)]
    if spark.archives:
        argv += ["--archives", ",".join(spark.archives)]
    shipped = ",".join(str(p) for p in (py_files, *extra_py_files))  # + user transforms
    argv += ["--py-files", shipped, str(Path(spark_entry.__file__).resolve())]
    return [*argv, "--master", spark.master, *run_args]


def redacted(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of every secret-looking ``key=value`` replaced."""
    out = []
    for arg in argv:
        key, sep, _ = arg.partition("=")
        out.append(f"{key}={REDACTED}" if sep and _SECRET.search(key) else arg)
    return out


def render(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in redacted(argv))


def submit(argv: Sequence[str]) -> int:
    """Run spark-submit; its exit status is the job's."""
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        raise ConfigError(
            f"spark-submit not found at {argv[0]}",
            hint="Set SPARK_HOME, or pass --spark-submit PATH",
        )
    return subprocess.call(list(argv))
