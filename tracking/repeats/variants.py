"""The calibration's noise variants, shared by the `calibrate` stage and the audit's training.

Variants (Zhuang et al. 2021): `algo+impl` (seeds vary, non-deterministic kernels), `algo` (seeds vary,
deterministic), `impl` (seeds fixed, non-deterministic), `control` (both fixed: must be bit-identical).
On a CPU, kernel non-determinism is simulated when `calibration.simulate_impl_noise` is on: examples are
permuted inside each batch, which keeps each batch's gradient but changes the summation order. Where a GPU
is present its real kernel non-determinism is used instead.
"""

from __future__ import annotations

from dataclasses import replace

from tracking.config.params import Params
from tracking.determinism.seeds import Seeds, derive_seed

# The seeds an `algo` variant derives afresh for each repeat.
ALGO_SOURCES = ("init", "shuffle", "dropout", "augment")


def op_determinism(variant: str) -> bool:
    """Whether a variant's repeats train with op determinism on: besides the seeds, the one setting variants
    differ in, so repeats that agree on it share one built model (tracking/training/model.py's `RepeatedModel`)."""
    return variant not in ("algo+impl", "impl")


def algo_seeds(seeds: Seeds, repeat: int, stream: str = "repeat", sources: tuple[str, ...] = ALGO_SOURCES) -> Seeds:
    """`seeds` with each of `sources` drawn afresh for `repeat` of an ALGO variant, from the base seed and `stream`."""
    return replace(seeds, **{name: derive_seed(seeds.base, f"{name}:{stream}{repeat}") for name in sources})


def variant_setup(
    variant: str,
    repeat: int,
    baseline: Params,
    seeds: Seeds,
    simulate: bool,
    gpu: bool,
    stream: str = "repeat",
) -> tuple[Params, Seeds, int | None, str]:
    """The params, seeds, within-batch noise seed and kernel-noise source of one repeat of one variant.

    `stream` names the draws: the calibration's repeats take `repeat`, a candidate's repeats (tracking/noise/
    replicated.py) `candidate`, so a candidate that keeps the baseline's seeds never re-draws a band run's seeds.
    """
    vary_algo, vary_impl = variant in ("algo+impl", "algo"), not op_determinism(variant)
    if vary_algo:
        seeds = algo_seeds(seeds, repeat, stream)
    determinism = baseline.determinism.model_copy(update={"op_determinism": not vary_impl})
    params = baseline.model_copy(update={"determinism": determinism})
    if not vary_impl:
        return params, seeds, None, "none"
    if gpu:
        return params, seeds, None, "gpu-kernels"
    if simulate:
        return params, seeds, derive_seed(seeds.base, f"impl:{stream}{repeat}"), "simulated"
    return params, seeds, None, "cpu-kernels"
