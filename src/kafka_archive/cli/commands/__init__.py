"""The click commands, by group: ``archive`` (validate, plan, run), ``inspect`` (status,
verify, cat), ``restore``, ``cluster`` (submit) and ``connector`` (import-connector). Each
parses its flags, builds Settings and a Plan (:mod:`kafka_archive.cli.options`), calls the
library (``archiver.commands.api``) and prints (:mod:`kafka_archive.cli.output`); the group
and the errors' exit codes are :mod:`kafka_archive.cli.app`.
"""
