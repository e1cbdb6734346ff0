"""STOREAS: one module per format, each a writer of objects and a reader of them (base.py the
seam, writers.py the table)."""
