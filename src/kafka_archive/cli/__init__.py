"""The command line (``kafka-archive``, entry point ``kafka_archive.cli:main``).

- :mod:`.commands`: the click commands; flags -> Settings + Plan, the library called, errors
  mapped to one line and an exit code;
- :mod:`.render`: every text a command prints for a result; :mod:`.console`: progress;
- :mod:`.cluster.submit` and :mod:`.cluster.entry`: ``submit``, the same run on a Spark cluster.
"""

import gc

# The commands' imports create ~10^5 objects that live as long as the process; the cyclic
# collector's passes over them while they are created cost ~0.04 CPU-s of every start
# (measured): collect after the imports, with what they made frozen out of its sight.
_collecting = gc.isenabled()
gc.disable()
try:
    from kafka_archive.cli.commands import cli, main
finally:
    gc.freeze()
    if _collecting:
        gc.enable()

__all__ = ["cli", "main"]
