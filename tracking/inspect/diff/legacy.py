"""Runs logged by earlier versions of the pipeline, read in today's names so they can be diffed against later runs."""

from __future__ import annotations

import json
from pathlib import Path

from tracking.config.params import CLASSIFICATION, DEFAULT_COMPARE_METRICS
from tracking.config.params_file import load_params
from tracking.determinism.seeds import derive_seed
from tracking.errors import ParamsError
from tracking.layout import PARAMS_FILE
from tracking.names import PROV_PREFIX

# Before the split seed moved to `data.split_seed`, runs carried it under these names.
LEGACY_SPLIT_PARAM = "seeds.split"
LEGACY_SPLIT_TAG = f"{PROV_PREFIX}seeds.split"
SPLIT_SEED_PARAM = "data.split_seed"


# Before builders, runs named a built-in model (`model.name`) with its settings beside it, all of them logged
# whichever model used them, and `train.augment`; today the builder and only its own kwargs are logged.
LEGACY_MODEL_PARAM = "model.name"
LEGACY_MODEL_KWARGS = {
    "small_cnn": ("filters", "dense_units", "batch_norm", "dropout"),
    "mlp": ("hidden_units", "batch_norm", "dropout"),
}
LEGACY_MODEL_SETTINGS = ("filters", "hidden_units", "dense_units", "batch_norm", "dropout")
LEGACY_AUGMENT_PARAM = "train.augment"
# Keys added with builders whose value then was fixed: what such a run used, in today's spelling.
ADDED_WITH_BUILDERS = {
    "data.loader": "null",
    "data.task": CLASSIFICATION,
    "train.loss": "null",
    "train.metrics": "null",
}
# Keys added since builders: what a run of the template (it logs `model.builder`) used before it had them: no loss
# weights, no class weights, no augmentation of the input pipeline.
ADDED_SINCE_BUILDERS = {"train.loss_weights": "null", "train.class_weight": "null", "train.augment": "null"}
TEMPLATE_PARAM = "model.builder"
LEGACY_COMPARE_METRICS = "compare.metrics"
# Before backends, every run trained on TensorFlow and recorded its build under `prov.software.tensorflow_build.*`
# and the GPUs it saw under `prov.gpu.tensorflow_visible.*`.
BACKEND_PARAM = "determinism.backend"
LEGACY_BACKEND_TAGS = {
    f"{PROV_PREFIX}software.tensorflow_build.": f"{PROV_PREFIX}software.backend.",
    f"{PROV_PREFIX}gpu.tensorflow_visible": f"{PROV_PREFIX}gpu.backend_visible",
}


def project_builders(root: Path | None) -> str | None:
    """The module of the `model.builder` that the project at `root` names in its params.yaml: the template's
    built-in builders all live in that one module, so a run logged before builders is read in it. None where the
    project names no builder or has no params.yaml that reads (its old runs are then shown as logged)."""
    if root is None or not (root / PARAMS_FILE).is_file():
        return None
    try:
        builder = load_params(root / PARAMS_FILE).model.builder
    except ParamsError:
        return None
    return None if builder is None else builder.partition(":")[0]


def upgrade_logged(
    params: dict[str, str], tags: dict[str, str], builders: str | None
) -> tuple[dict[str, str], dict[str, str]]:
    """The params and tags of a run as today's pipeline names them (runs logged by it come back as they are).

    A run logged before builders has `model.name` (a built-in), the model settings and `train.augment`: they
    become `model.builder` (`<builders>:<name>`, `builders` the module of the project's built-ins,
    `project_builders`) and `model.kwargs.<setting>` for the settings that builder takes (`model.kwargs.augment`
    too); with no `builders` they stay as logged. The keys added since get the values such a run used
    (`train.loss: null` and so on), so `tracking diff` against a newer run of the same model finds nothing.
    A run of the template logged before `train.loss_weights`, `train.class_weight` or `train.augment` used none
    of them: each it lacks is `null`.

    A run logged before backends trained on TensorFlow: it gets `determinism.backend: tensorflow`, and its
    TensorFlow build and visible GPUs are read as the backend's.

    A run logged before the split seed moved to `data.split_seed` has `seeds.split` (`null` when derived from
    `seeds.base`) and the seed it used as the tag `prov.seeds.split`; that seed becomes its `data.split_seed`,
    so `tracking diff` compares it with later runs as data, not as a training seed. (`tracking rerun` writes
    the keys as logged: it re-creates the run at its own commit, whose schema has `seeds.split`.)
    """
    if LEGACY_MODEL_PARAM in params:
        params = _upgrade_model(params, builders)
    if TEMPLATE_PARAM in params and not ADDED_SINCE_BUILDERS.keys() <= params.keys():
        params = {**ADDED_SINCE_BUILDERS, **params}
    params, tags = _upgrade_backend(params, tags)
    if LEGACY_SPLIT_PARAM not in params:
        return params, tags
    params = dict(params)
    logged = params.pop(LEGACY_SPLIT_PARAM)
    used = tags.get(LEGACY_SPLIT_TAG)
    if used is None and logged != "null":
        used = logged
    if used is None and "seeds.base" in params:
        used = str(derive_seed(int(params["seeds.base"]), "split"))
    if used is not None:
        params.setdefault(SPLIT_SEED_PARAM, used)
    return params, {key: value for key, value in tags.items() if key != LEGACY_SPLIT_TAG}


def _upgrade_model(params: dict[str, str], builders: str | None) -> dict[str, str]:
    """A pre-builder run's params in today's names: its model (`model.name`, `model.filters`, ..., `train.augment`)
    as a builder of the `builders` module and its kwargs (as logged without one), and the keys added since."""
    params = dict(params)
    if builders is not None:
        name = params.pop(LEGACY_MODEL_PARAM)
        settings = {key: params.pop(f"model.{key}") for key in LEGACY_MODEL_SETTINGS if f"model.{key}" in params}
        params["model.builder"] = f"{builders}:{name}"
        for key in LEGACY_MODEL_KWARGS.get(name, ()):
            if key in settings:
                params[f"model.kwargs.{key}"] = settings[key]
        if LEGACY_AUGMENT_PARAM in params:
            params["model.kwargs.augment"] = params.pop(LEGACY_AUGMENT_PARAM)
    for key, value in ADDED_WITH_BUILDERS.items():
        params.setdefault(key, value)
    if LEGACY_COMPARE_METRICS in params and params[LEGACY_COMPARE_METRICS].startswith("["):
        named = json.loads(params[LEGACY_COMPARE_METRICS])
        default = DEFAULT_COMPARE_METRICS[CLASSIFICATION]
        modes = {metric: default.get(metric, "max") for metric in named}
        params[LEGACY_COMPARE_METRICS] = "null" if modes == default else json.dumps(modes)
    return params


def _upgrade_backend(params: dict[str, str], tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """A run from before `determinism.backend` in today's names: TensorFlow, its build as the backend's."""
    if not any(key.startswith(tuple(LEGACY_BACKEND_TAGS)) for key in tags) and (
        BACKEND_PARAM in params or not any(key.startswith("determinism.") for key in params)
    ):
        return params, tags
    renamed = {}
    for key, value in tags.items():
        for old, new in LEGACY_BACKEND_TAGS.items():
            if key.startswith(old):
                key = new + key[len(old) :]
        renamed[key] = value
    renamed.setdefault(f"{PROV_PREFIX}software.backend.name", "tensorflow")
    if any(key.startswith("determinism.") for key in params):
        params = {**params, BACKEND_PARAM: params.get(BACKEND_PARAM, "tensorflow")}
    return params, renamed
