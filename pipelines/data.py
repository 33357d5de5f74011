"""`python3 -m pipelines.data`, the prepare stage's command before its module was named after the stage.

A dvc.yaml written for an earlier version (a copy of an example) still names it; this says what to change,
in one line, instead of Python's "No module named" after the upgrade.
"""

import sys

from pipelines import USER_ERROR_EXIT

print(
    "error: the prepare stage's module is now pipelines.prepare; in dvc.yaml, change the prepare stage's "
    "cmd to `python3 -m pipelines.prepare`",
    file=sys.stderr,
)
sys.exit(USER_ERROR_EXIT)
