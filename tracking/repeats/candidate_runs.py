"""A replicated candidate: the compare stage's extra runs of the candidate (`compare.candidate_repeats`).

One candidate run detects little: with 5 calibration repeats the two default metrics see a true shift of 5 band
stds 80% of the time, three candidate runs one of 2.9 (docs/noise-statistics.md). So the compare stage trains the
candidate N - 1 more times through the calibration's machinery (planning.py, running.py, worker.py): the
candidate's own params, its seeds varied as its band's variant varies them (on the `candidate` draws, so a
candidate that keeps the baseline's seeds never repeats a band run's), in this process or on Ray
(`compute.executor`), each a child of the candidate's MLflow run. Every finished run is kept as a calibration
repeat is (tracking/repeats/kept.py, under the compare stage's code), so an interrupted stage resumes where it
stopped and a re-run judges without training. Under CONTROL the extra runs would be copies of the candidate (same
seeds, op determinism): none is trained. Under `compare.candidate_repeats: auto` they train one at a time, until
the sequential design (tracking/noise/sequential.py) says the runs so far decide the verdict.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

from tracking.compute.ray_executor import RayPool
from tracking.config.params import RAY, CompareParams, Params
from tracking.data.manifest import Manifest
from tracking.determinism.seeds import Seeds
from tracking.determinism.settings import gpu_present
from tracking.layout import COMPARE, REPEATS_DIR
from tracking.noise.policy import CONTROL
from tracking.repeats.kept import Job, KeptRepeat, RepeatStore
from tracking.repeats.planning import checked_model, kept_before, planned, repeat_identity, repeat_spec
from tracking.repeats.running import train_and_keep, worker_credentials, worker_environment
from tracking.repeats.worker import CANDIDATE, RepeatSpec, RepeatWorker
from tracking.run.tracker import Tracker
from tracking.store.location import tracking_uri
from tracking.training.model import RepeatedModel, require_code_deps


def extra_runs(compare: CompareParams, variant: str) -> int:
    """The most runs the compare stage trains beside the train stage's: N - 1 (under `auto` the cap's), or none
    against CONTROL."""
    return 0 if variant == CONTROL else compare.candidate_runs() - 1


def train_candidate_repeats(
    params: Params,
    variant: str,
    seeds: Seeds,
    root: Path,
    data: tuple[Manifest, dict[str, dict]],
    candidate: Tracker,
    decided: Callable[[list[KeptRepeat]], bool] | None = None,
    repeats: Sequence[int] | None = None,
) -> tuple[list[KeptRepeat], int]:
    """The candidate's extra runs 1 to N - 1 (`extra_runs`), or the runs of the indices `repeats` (a sweep's
    confirmation: indices no extra run uses, so fresh seeds), as children of the `candidate` run, kept ones reused;
    and how many were reused. `seeds` are the candidate's (`reproducible_process(params)`, before TensorFlow).
    With `decided` (`compare.candidate_repeats: auto`), one run at a time, in order, until it says the runs so far
    decide the verdict."""
    from tqdm import tqdm

    manifest = data[0]
    executor = params.compute.executor
    uri = tracking_uri(root)
    store = RepeatStore(root / REPEATS_DIR)
    with ExitStack() as stack:
        pool = stack.enter_context(RayPool(params.compute, uri, root)) if executor == RAY else None
        gpu = pool.gpus_per_run > 0 if pool else gpu_present()
        identity = {**repeat_identity(params, params, manifest, root, gpu, stage=COMPARE), "role": CANDIDATE}
        indices = range(1, extra_runs(params.compare, variant) + 1) if repeats is None else repeats
        plan = planned(identity, ((variant, repeat) for repeat in indices))
        step = 1 if decided else max(len(plan), 1)
        finished: dict[Job, KeptRepeat] = {}
        reused = 0
        trainer = None
        bar = stack.enter_context(tqdm(total=len(plan), desc="candidate", unit="run", file=sys.stderr))
        for start in range(0, len(plan), step):
            if decided and decided([finished[job] for job in plan[:start]]):
                break
            chunk = plan[start : start + step]
            kept = kept_before(store, chunk, candidate)
            finished |= kept
            reused += len(kept)
            bar.update(len(kept))
            pending = [job for job in chunk if job not in kept]
            if pending:
                if trainer is None:
                    trainer = _trainer(params, seeds, root, data, candidate, pool, len(pending))
                train_and_keep(trainer[0], pending, trainer[1], candidate, store, finished, bar)
    return [finished[job] for job in plan if job in finished], reused


def _trainer(
    params: Params,
    seeds: Seeds,
    root: Path,
    data: tuple[Manifest, dict[str, dict]],
    candidate: Tracker,
    pool: RayPool | None,
    workers: int,
) -> tuple[RepeatSpec, tuple[RayPool | None, RepeatedModel | None]]:
    """What trains the candidate's runs, set up once the first is to train: its spec, and the Ray pool with
    `workers` workers started or the model built and checked in this process."""
    require_code_deps(params, COMPARE, root)
    models = checked_model(params, seeds, data, root) if pool is None else None
    if pool:
        pool.start(RepeatWorker, workers, worker_environment(), worker_credentials(tracking_uri(root)))
    spec = repeat_spec(params, params, seeds, root, data, candidate.run_id, params.compute.executor, CANDIDATE)
    return spec, (pool, models)
