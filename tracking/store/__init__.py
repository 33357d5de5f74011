"""The tracking store: where runs go, reads of runs, SQLite sharing, runs left RUNNING, the offline journal and its sync."""
