"""The command line (``kafka-archive``, entry point ``kafka_archive.cli:main``).

- :mod:`.commands`: the click commands; flags -> Settings + Plan, the library called, errors
  mapped to one line and an exit code;
- :mod:`.render`: every text a command prints for a result; :mod:`.console`: progress;
- :mod:`.submit` and :mod:`.spark_entry`: ``submit``, the same run on a Spark cluster.
"""

from kafka_archive.cli.commands import cli, main

__all__ = ["cli", "main"]
