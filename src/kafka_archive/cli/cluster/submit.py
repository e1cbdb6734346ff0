"""``kafka-archive submit``: the same job as ``run``, handed to a Spark cluster by spark-submit.

What reaches the cluster:

- the package itself as a zip (``--py-files``), built once per version and source hash under
  ``~/.cache/kafka-archive/`` (``$XDG_CACHE_HOME`` respected; :mod:`.shipping`). It holds
  only our code: the cluster's Python must have the dependencies (pyspark, confluent-kafka,
  boto3, lark, fastavro, pyarrow, pyyaml, cramjam) — or pass a packed virtualenv with
  ``--archives env.tar.gz#env --conf spark.pyspark.python=./env/bin/python`` (see README);
- the entry script :mod:`kafka_archive.cli.cluster.entry`, which runs ``kafka-archive run``
  with the same run options, so driver and executors execute exactly the code path of ``run``.

Nothing secret is put on a command line (``ps``, the Spark UI's ``sun.java.command``, event
logs, YARN/Kubernetes specs all show it): the values of secret-looking ``-X`` properties and
the userinfo of ``--schema-registry-url``/``--endpoint-url`` are moved into an owner-only
(0600) JSON file in a private temporary directory, which the entry script reads and puts back
into the in-process arguments of ``run``; secret-looking ``--conf`` values go into an
owner-only ``--properties-file`` (over ``spark-defaults.conf``), which Spark redacts in its UI
and event log (:mod:`.secrets_file`). Both files are removed when spark-submit exits. AWS
credentials come from the standard chain on the driver and executors. ``--print-command``
redacts every secret value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafka_archive.archiver.config.secrets import REDACTED, is_secret, redact_url
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.cache import user_cache_dir
from kafka_archive.cli.cluster.secrets_file import (
    SECRETS_FLAG,
    Secrets,
    split_secrets,
    write_secrets,
)

ENTRY_SCRIPT = Path(__file__).resolve().with_name("entry.py")
"""The script spark-submit runs (:mod:`.entry`): named by its path, not imported (it imports
the CLI, which imports this module)."""


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
    import pyspark  # heavy (Spark's Python side): imported for its spark-submit alone

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def cache_dir(environ: Mapping[str, str]) -> Path:
    return user_cache_dir(environ)


@contextlib.contextmanager
def private_files(
    spark: SparkOptions,
    run_args: Sequence[str],
    py_files: Path,
    environ: Mapping[str, str],
    extra_py_files: Sequence[Path] = (),
    files: Sequence[Path] = (),
) -> Iterator[list[str]]:
    """The spark-submit command whose secrets are in owner-only files, removed on exit."""
    public, secret_args = split_secrets(run_args)
    public_conf = tuple((k, v) for k, v in spark.conf if not is_secret(k))
    secrets = Secrets(secret_args, tuple((k, v) for k, v in spark.conf if is_secret(k)))
    if not secrets:
        yield command(spark, run_args, py_files, environ, extra_py_files, files=files)
        return
    with tempfile.TemporaryDirectory(prefix="kafka-archive-submit-") as directory:
        os.chmod(directory, 0o700)
        args_file, props_file = write_secrets(Path(directory), secrets)
        yield command(
            dataclasses.replace(spark, conf=public_conf),
            public,
            py_files,
            environ,
            extra_py_files,
            secrets_file=args_file,
            properties_file=props_file,
            files=files,
        )


_PYTHONS = frozenset({"spark.pyspark.python", "spark.pyspark.driver.python"})
_PYTHONS_ENV = frozenset({"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"})


def command(
    spark: SparkOptions,
    run_args: Sequence[str],
    py_files: Path,
    environ: Mapping[str, str],
    extra_py_files: Sequence[Path] = (),
    *,
    secrets_file: Path | None = None,
    properties_file: Path | None = None,
    files: Sequence[Path] = (),
) -> list[str]:
    """The spark-submit command line that runs ``kafka-archive run <run_args>`` on Spark;
    in cluster mode ``files`` (and the secrets file) go with it (``--files``), into the
    driver's working directory."""
    argv = [
        spark_submit_path(spark.spark_submit, environ),
        "--master",
        spark.master,
        "--deploy-mode",
        spark.deploy_mode,
        "--name",
        "kafka-archive",
    ]
    if properties_file is not None:
        argv += ["--properties-file", str(properties_file)]
    for key, value in spark.conf:
        argv += ["--conf", f"{key}={value}"]
    given = {key for key, _ in spark.conf}
    if (
        spark.master.startswith("local")
        and not given & _PYTHONS
        and not _PYTHONS_ENV & set(environ)
    ):
        # A local master runs the driver and workers here: with this Python, which has our
        # dependencies (spark-submit would take the python3 on PATH).
        argv += ["--conf", f"spark.pyspark.python={sys.executable}"]
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
    shipped_files = [*files, *([secrets_file] if secrets_file is not None else [])]
    if shipped_files and spark.deploy_mode == "cluster":  # the driver runs elsewhere
        argv += ["--files", ",".join(str(p) for p in shipped_files)]
    shipped = ",".join(str(p) for p in (py_files, *extra_py_files))  # + user transforms
    argv += ["--py-files", shipped, str(ENTRY_SCRIPT)]
    if secrets_file is not None:
        argv += [SECRETS_FLAG, str(secrets_file)]
    return [*argv, "--master", spark.master, *run_args]


def redacted(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of every secret-looking ``key=value`` and the password of
    every URL replaced."""
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and is_secret(key.removeprefix("-X")):
            out.append(f"{key}={REDACTED}")
        elif sep and key.startswith("--") and "://" in value:
            out.append(f"{key}={redact_url(value)}")
        else:
            out.append(redact_url(arg) if "://" in arg else arg)
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
