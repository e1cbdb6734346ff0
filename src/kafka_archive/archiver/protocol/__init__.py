"""The commit protocol of issue 37: one create-only commit log per target (not wired yet).

`log` is the entry/checkpoint model and codec, `core` the pure decisions, `store` the narrow
store interface, `memstore` an in-memory S3 model with faults, `writer` the step machines that
do what the core decides, `simulation` the deterministic simulation that checks them.
"""
