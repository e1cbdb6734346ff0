"""Spark plumbing: the context, mapping units over tasks, the worker daemon, the JVM
cache, progress."""
