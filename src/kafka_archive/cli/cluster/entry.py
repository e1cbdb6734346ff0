"""The script spark-submit runs for ``kafka-archive submit``: ``kafka-archive run`` with the
arguments it is given, so a cluster job takes exactly the code path of a local run.

``--secrets-file PATH`` first: the secret arguments ``submit`` kept off the command line,
put back into the in-process arguments of ``run`` (never into a command line;
:mod:`kafka_archive.cli.cluster.secrets_file`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kafka_archive.archiver.core.errors import ConfigError  # needs the standard library alone


def entry(argv: Sequence[str]) -> int:
    # Imported here, where their ImportError is caught: the Python running the driver may
    # lack our dependencies, and this script must say so in one line.
    try:
        from kafka_archive.cli import main
        from kafka_archive.cli.cluster.secrets_file import run_args
    except ImportError as exc:  # the driver's Python lacks our dependencies
        print(
            f"kafka-archive: error: the Python running the Spark driver ({sys.executable}) "
            f"lacks kafka-archive's dependencies ({exc}). Install kafka-archive there, or "
            "ship a virtualenv (--archives env.tar.gz#env --conf "
            "spark.pyspark.python=./env/bin/python)",
            file=sys.stderr,
        )
        return ConfigError.exit_code

    try:
        args = run_args(argv)
    except ConfigError as exc:
        print(f"kafka-archive: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return main(["run", *args])


if __name__ == "__main__":
    sys.exit(entry(sys.argv[1:]))
