"""Run settings: the option table (each default once), the frozen Settings, loading file <
environment < flags, --start positions, the spool directory, what counts as secret."""
