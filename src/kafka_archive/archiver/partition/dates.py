"""Record time as text: see :mod:`kafka_archive.kcql.dates`, the one place that knows the
date letters (the compiler checks patterns with it; the archiver formats keys with it)."""

from kafka_archive.kcql.dates import DatePattern, compile_pattern, field_name, local_time, time_zone

__all__ = ["DatePattern", "compile_pattern", "field_name", "local_time", "time_zone"]
