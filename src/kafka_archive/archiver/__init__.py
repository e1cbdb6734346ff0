"""The runtime: settings, the Spark job, Kafka reading, formats, S3 store, state and commit.

It consumes a :class:`kafka_archive.kcql.plan.Plan` and never sees KCQL text.
"""
