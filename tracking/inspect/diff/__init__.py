"""`tracking diff`: what differed between two MLflow runs, ranked by how likely each is to move results.

Groups, in rank order: data, params, seeds, determinism, code, software, hardware, environment. Data,
params and code are *causes*: while one of them differs, a metric gap cannot be called chance. Seeds and
determinism are the sources of noise the calibration measures; software and hardware explain runs that
are not bitwise equal. Metric gaps are judged by `tracking.noise.policy`, the policy the compare stage uses:
the band that fits what differs, around the calibrated baseline's mean when run A trained that baseline
(as compare judges a candidate), else around run A's value.

The flow, one module each: `runs` loads the two runs (earlier versions' names upgraded), `ranked_groups`
compares them group by group (`code` the git and DVC code differences), `bands` finds the calibration and chooses
its band, `metrics` tests each metric's gap against it, `conclusion` puts it together with a one-sentence
conclusion (`diff_runs`), and `output` renders it as text, Markdown or JSON.
"""

from tracking.errors import RunNotFound
from tracking.inspect.diff.conclusion import RunDiff, diff_runs
from tracking.inspect.diff.runs import RunSnapshot, load_run

__all__ = ["RunDiff", "RunNotFound", "RunSnapshot", "diff_runs", "load_run"]
