"""What the CLI calls: run and follow sessions, status, verify, restore, reports and metrics."""
