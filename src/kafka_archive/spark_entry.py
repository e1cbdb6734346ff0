"""The script spark-submit runs for ``kafka-archive submit``: ``kafka-archive run`` with the
arguments it is given, so a cluster job takes exactly the code path of a local run."""

from __future__ import annotations

import sys

from kafka_archive.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
