"""The run record: the one MLflow run of a pipeline execution, its background writer, and how it ends."""
