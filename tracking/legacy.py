"""Runs logged by earlier versions of the pipeline, read in today's names so they can be diffed against later runs."""

from __future__ import annotations

from tracking.provenance import TAG_PREFIX
from tracking.seeds import derive_seed

# Before the split seed moved to `data.split_seed`, runs carried it under these names.
LEGACY_SPLIT_PARAM = "seeds.split"
LEGACY_SPLIT_TAG = f"{TAG_PREFIX}seeds.split"
SPLIT_SEED_PARAM = "data.split_seed"


def upgrade_logged(params: dict[str, str], tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The params and tags of a run as today's pipeline names them (runs logged by it come back as they are).

    A run logged before the split seed moved to `data.split_seed` has `seeds.split` (`null` when derived from
    `seeds.base`) and the seed it used as the tag `prov.seeds.split`; that seed becomes its `data.split_seed`,
    so `tracking diff` compares it with later runs as data, not as a training seed. (`tracking rerun` writes
    the keys as logged: it re-creates the run at its own commit, whose schema has `seeds.split`.)
    """
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
