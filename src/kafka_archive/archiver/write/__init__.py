"""Executor side: one work unit's records read, transformed, routed to open objects,
encoded, uploaded and committed."""
