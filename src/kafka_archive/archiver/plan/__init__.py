"""Driver side, before any record is read: checks, partition views, work units, start
positions, pieces."""
