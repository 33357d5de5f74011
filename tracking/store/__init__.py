"""The tracking store: where runs go, SQLite sharing, runs left RUNNING, the offline journal and its sync."""
