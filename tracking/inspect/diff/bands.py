"""The noise band that judges a diff: the calibration to use, what differs as the band policy weighs it, and the
band it chooses."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracking.errors import RunSelectionError
from tracking.inspect.diff.changes import GroupDiff
from tracking.inspect.diff.ranked_groups import CAUSES, name_causes
from tracking.inspect.diff.runs import RunSnapshot, read_artifact
from tracking.layout import CALIBRATE, NOISE_FILE
from tracking.names import CALIBRATION_ROLE, NOISE_ROLE_TAG, SCRIPT_COMMAND_TAG, WEIGHTS_TAG, status_is, tag_is
from tracking.noise.policy import CONFIG_SECTIONS, CONTROL, BandChoice, Differences, changed_keys, choose_band
from tracking.noise.record import NoiseRecord
from tracking.store.reads import newest_run

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


def find_calibration(
    client: MlflowClient, experiment_ids: list[str], run_id: str | None = None
) -> tuple[str, NoiseRecord] | None:
    """The calibration parent run (`run_id`, else the latest finished one) and its `calibration/noise.json`."""
    if run_id is None:
        found = newest_run(
            client,
            sorted(set(experiment_ids)),
            f"{tag_is(NOISE_ROLE_TAG, CALIBRATION_ROLE)} and {status_is('FINISHED')}",
        )
        if found is None:
            return None
        run_id = found.info.run_id
    noise = read_artifact(client, run_id, NOISE_FILE.as_posix(), json.loads)
    if noise is None:
        raise RunSelectionError(
            f"run {run_id} has no {NOISE_FILE.as_posix()}", fix="pass the calibration parent run to --calibration"
        )
    return run_id, NoiseRecord.from_dict(noise, f"run {run_id}'s {NOISE_FILE.as_posix()}")


def trained_baseline(noise: NoiseRecord, params: Mapping[str, Any], data_sha256: str | None) -> bool:
    """Whether a run of flat `params` on data of content `data_sha256` trained the calibration's baseline: the same
    data content and configuration (seeds and determinism aside), so its band's mean is the reference."""
    baseline = {key: value for key, value in noise.baseline.items() if key.startswith(CONFIG_SECTIONS)}
    ran = {key: value for key, value in params.items() if key.startswith(CONFIG_SECTIONS)}
    return bool(baseline) and data_sha256 == noise.data_sha256 and not changed_keys(baseline, ran, CONFIG_SECTIONS)


def differences(groups: list[GroupDiff], a: RunSnapshot, b: RunSnapshot) -> Differences:
    """What differs between the runs, as the band policy weighs it: causes, seeds, kernel numerics."""
    changed = {group.name: group for group in groups if group.changes}
    causes = tuple(name_causes(changed[name]) for name in CAUSES if name in changed)
    kernels = [f"op determinism off in {label}" for label, run in (("A", a), ("B", b)) if not run.op_determinism]
    kernels += [f"{name} differs" for name in ("determinism", "software", "hardware") if name in changed]
    return Differences(causes, "seeds" in changed, tuple(kernels))


def band_for(noise: NoiseRecord, groups: list[GroupDiff], a: RunSnapshot, b: RunSnapshot) -> BandChoice:
    """The calibration variant that judges run B against run A: the band policy's choice from what differs, but
    CONTROL when B's weights are bit-identical to the CONTROL runs', whatever else differs (a file DVC wrote)."""
    if CONTROL in noise.variants and b.tags.get(WEIGHTS_TAG) in noise.variant(CONTROL).weights_sha256:
        return BandChoice(CONTROL, "run B's weights are bit-identical to the CONTROL runs': the same model")
    return choose_band(differences(groups, a, b), list(noise.variants))


@dataclass(frozen=True)
class ChosenBand:
    """The band that judges the metrics (None: no calibration, or no variant covers what differs), whether it is
    centred on the calibrated baseline's mean, and how the report describes the choice."""

    bands: dict[str, dict[str, Any]] | None
    baseline_reference: bool
    described: dict[str, Any]


def choose_calibrated_band(
    client: MlflowClient, groups: list[GroupDiff], a: RunSnapshot, b: RunSnapshot, calibration: str | None = None
) -> ChosenBand:
    """The band of the calibration (`calibration`, else the latest) that fits the runs (`band_for`)."""
    found = find_calibration(client, [a.experiment_id, b.experiment_id], calibration)
    described: dict[str, Any] = {
        "variant": None,
        # A team's script calibrates with its own command: its project has no calibrate stage.
        "reason": "no calibration found: run "
        + ("`tracking calibrate`" if SCRIPT_COMMAND_TAG in b.tags else f"`dvc repro {CALIBRATE}`")
        + " for noise bands",
    }
    bands, baseline_reference = None, False
    if found:
        run_id, noise = found
        choice = band_for(noise, groups, a, b)
        baseline_reference = trained_baseline(noise, a.params, a.manifest.content_sha256 if a.manifest else None)
        described = {
            "variant": choice.variant,
            "reason": choice.reason,
            "calibration_run": run_id,
            "repeats": noise.repeats,
            "data_sha256": noise.data_sha256,
            "reference": "the calibrated baseline's mean (run A trained its data and configuration)"
            if baseline_reference
            else "run A",
        }
        if choice.variant is not None:
            bands = noise.variant(choice.variant).bands
    return ChosenBand(bands, baseline_reference, described)
