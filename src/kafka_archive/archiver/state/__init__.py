"""Exactly once in S3 today: the lease per target prefix, per-partition states and
fencing, intent markers, watches of late creates, recovery (issue 37 replaces it by
:mod:`..protocol`)."""
