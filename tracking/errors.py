"""Errors a user can cause and fix: each carries one line saying what is wrong and how to fix it.

Commands and pipeline stages turn a `TrackingError` into that line on stderr and exit status 2
(`USER_ERROR_EXIT`); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

USER_ERROR_EXIT = 2


class TrackingError(Exception):
    """Root of the errors a user can fix; `str(err)` is the single line to show."""


class ParamsError(TrackingError):
    """params.yaml is missing, malformed, or has an unknown key or a bad value."""


class DataError(TrackingError):
    """The data source is missing, corrupt, or does not match what params.yaml pins."""


class DataPinMismatch(DataError):
    """The prepared data's content hash differs from `data.sha256`."""


class RepoError(TrackingError):
    """The working directory is not the git + DVC repository the pipeline expects."""


class TrackingServerError(TrackingError):
    """The MLflow tracking store cannot be reached or refused a write."""


class RunSelectionError(TrackingError):
    """An MLflow experiment, filter string or run id that selects no usable runs."""


class RunStateError(TrackingError):
    """A stage was run out of order, e.g. evaluate before train wrote its run id."""


class RerunError(TrackingError):
    """A logged run cannot be re-created: its commit, diff or data is not available as it was logged."""


class UserCodeError(TrackingError):
    """A "module:function" in params.yaml that does not import, is not callable, or returns the wrong thing."""
