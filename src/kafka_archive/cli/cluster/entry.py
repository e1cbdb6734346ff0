"""The script spark-submit runs for ``kafka-archive submit``: ``kafka-archive run`` with the
arguments it is given, so a cluster job takes exactly the code path of a local run.

``--secrets-file PATH`` first: the secret arguments ``submit`` kept off the command line,
put back into the in-process arguments of ``run`` (never into a command line).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# Of ours, only what imports no dependency (the standard library alone) at the top: the
# driver's Python may lack them, which :func:`entry` says in one line, not a traceback.
from kafka_archive.archiver.core.errors import ConfigError


def run_args(argv: Sequence[str]) -> list[str]:
    """``run``'s arguments: ``argv`` with the secrets file's arguments put back."""
    # Imported here: kafka_archive.cli imports the dependencies (see entry()).
    from kafka_archive.cli.cluster.submit import SECRETS_FLAG, read_secrets

    args = list(argv)
    if len(args) >= 2 and args[0] == SECRETS_FLAG:
        return [*args[2:], *read_secrets(args[1])]
    return args


def entry(argv: Sequence[str]) -> int:
    try:
        # Imported here: the optional heavy part, whose lack is told in one line.
        from kafka_archive.cli import main
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
