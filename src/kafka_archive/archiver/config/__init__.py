"""Run settings: the option table, settings merged from file, environment and flags, secrets."""
