"""The command line (``kafka-archive``, entry point ``kafka_archive.cli:main``).

- :mod:`.app`: the click group ``cli`` and ``main`` (logging, errors mapped to one line and
  an exit code); :mod:`.invocation`: how one invocation speaks on stderr;
- :mod:`.options`: the shared options (``RUN_OPTIONS``, ``RunFlags``) -> Settings + Plan;
- :mod:`.commands`: the commands by group (archive, inspect, restore, cluster, connector);
- :mod:`.output`: every text a command prints for a result; :mod:`.console`: progress;
- :mod:`.cluster`: ``submit``, the same run on a Spark cluster (submit, entry, shipping,
  secrets_file); :mod:`.connector`: ``import-connector`` (importer, lenses, confluent).
"""

import gc

# The commands' imports create ~10^5 objects that live as long as the process; the cyclic
# collector's passes over them while they are created cost ~0.04 CPU-s of every start
# (measured): collect after the imports, with what they made frozen out of its sight.
_collecting = gc.isenabled()
gc.disable()
try:
    from kafka_archive.cli.app import cli, main
finally:
    gc.freeze()
    if _collecting:
        gc.enable()

__all__ = ["cli", "main"]
