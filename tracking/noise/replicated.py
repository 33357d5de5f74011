"""A replicated candidate: the compare stage's extra runs of the candidate (`compare.candidate_repeats`).

One candidate run detects little: with 5 calibration repeats the two default metrics see a true shift of 5 band
stds 80% of the time, three candidate runs one of 2.9 (docs/noise-statistics.md). So the compare stage trains the
candidate N - 1 more times through the calibration's machinery (tracking/noise/calibration.py, worker.py): the
candidate's own params, its seeds varied as its band's variant varies them (on the `candidate` draws, so a
candidate that keeps the baseline's seeds never repeats a band run's), in this process or on Ray
(`compute.executor`), each a child of the candidate's MLflow run. Every finished run is kept as a calibration
repeat is (tracking/noise/repeats.py, under the compare stage's code), so an interrupted stage resumes where it
stopped and a re-run judges without training. Under CONTROL the extra runs would be copies of the candidate (same
seeds, op determinism): none is trained.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

from tracking.compute.ray_executor import RayPool
from tracking.config.params import LOCAL, RAY, Params
from tracking.config.project import COMPARE, REPEATS_DIR
from tracking.data.manifest import Manifest
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import gpu_present
from tracking.noise.calibration import (
    checked_model,
    repeat_identity,
    repeat_spec,
    train_and_keep,
    worker_credentials,
    worker_environment,
)
from tracking.noise.policy import CONTROL
from tracking.noise.repeats import KeptRepeat, RepeatStore, repeat_key
from tracking.noise.worker import CANDIDATE, RepeatWorker
from tracking.run.tracker import Tracker
from tracking.store.location import tracking_uri
from tracking.training.model import require_code_deps


def extra_runs(params: Params, variant: str) -> int:
    """The runs the compare stage trains beside the train stage's: N - 1, or none against CONTROL."""
    return 0 if variant == CONTROL else params.compare.candidate_repeats - 1


def train_candidate_repeats(
    params: Params,
    variant: str,
    seeds: Seeds,
    root: Path,
    data: tuple[Manifest, dict[str, dict]],
    candidate: Tracker,
) -> tuple[list[KeptRepeat], int]:
    """The candidate's extra runs 1 to N - 1 (`extra_runs`) as children of the `candidate` run, kept ones reused;
    and how many were reused. `seeds` are the candidate's (`reproducible_process(params)`, before TensorFlow)."""
    from tqdm import tqdm

    manifest = data[0]
    executor = params.compute.executor
    uri = tracking_uri(root)
    store = RepeatStore(root / REPEATS_DIR)
    with ExitStack() as stack:
        pool = stack.enter_context(RayPool(params.compute, uri, root)) if executor == RAY else None
        gpu = pool.gpus_per_run > 0 if pool else gpu_present()
        identity = {**repeat_identity(params, params, manifest, root, gpu, stage=COMPARE), "role": CANDIDATE}
        plan = [
            (variant, repeat, repeat_key(identity, variant, repeat))
            for repeat in range(1, extra_runs(params, variant) + 1)
        ]
        finished = {job: kept for job in plan if (kept := store.load(job[2])) is not None}
        reused = len(finished)
        pending = [job for job in plan if job not in finished]
        if pending:
            require_code_deps(params, COMPARE, root)
            models = checked_model(params, seeds, data, root) if executor == LOCAL else None
            if pool:
                pool.start(RepeatWorker, len(pending), worker_environment(), worker_credentials(uri))
            spec = repeat_spec(params, params, seeds, root, data, candidate.run_id, executor, CANDIDATE)
            with tqdm(total=len(plan), initial=reused, desc="candidate", unit="run", file=sys.stderr) as bar:
                train_and_keep(spec, pending, (pool, models), candidate, store, finished, bar)
    return [finished[job] for job in plan], reused
