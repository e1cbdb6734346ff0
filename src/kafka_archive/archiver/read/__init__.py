"""The read side: every archive ``run`` writes, read back by ``cat``, ``verify`` and
``restore``.

- :mod:`.listing`: which objects hold which records, from their keys alone (and where an
  archive is, its default-layout route, its committed offsets);
- :mod:`.decoding`: an object's bytes as records, in each format, and the form a Kafka
  record takes in it (what ``verify`` compares);
- :mod:`.seek`: a partition's records in offset order from any offset, reading only the
  objects (or gzip blocks) that hold them;
- :mod:`.display`: how ``cat`` prints a record;
- :mod:`.verdict`: what ``verify`` concludes of a partition's objects and records (pure).
"""
