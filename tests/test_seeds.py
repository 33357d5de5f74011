import hashlib
import json
import subprocess
import sys

import pytest
from conftest import REPO

from tracking.config.params import DEFAULT_SPLIT_SEED, Params, SeedParams
from tracking.config.params_file import load_params
from tracking.determinism.seeds import derive_seed, resolve_seeds
from tracking.inspect.diff import RunSnapshot
from tracking.inspect.diff.legacy import project_builders, upgrade_logged
from tracking.inspect.diff.ranked_groups import group_diffs
from tracking.inspect.restore import params_from_logged


def test_derivation_is_the_documented_one():
    expected = int.from_bytes(hashlib.sha256(b"42:dropout").digest()[:4], "big") & 0x7FFFFFFF
    assert derive_seed(42, "dropout") == expected


def test_unset_seeds_derive_from_base_and_differ_by_source():
    seeds = resolve_seeds(SeedParams(base=7))
    values = [seeds.init, seeds.shuffle, seeds.dropout, seeds.augment, seeds.hash]
    assert len(set(values)) == len(values)
    assert seeds.init == derive_seed(7, "init")


def test_explicit_seed_changes_only_that_source():
    default = resolve_seeds(SeedParams(base=7))
    varied = resolve_seeds(SeedParams(base=7, dropout=123))
    assert varied.dropout == 123
    assert {k: v for k, v in varied.as_dict().items() if k != "dropout"} == {
        k: v for k, v in default.as_dict().items() if k != "dropout"
    }


def test_hash_seed_is_pinned_by_reexecution(tmp_path):
    script = tmp_path / "show_hash.py"
    script.write_text(
        "from tracking.determinism.seeds import ensure_hash_seed\nensure_hash_seed(1234)\nprint(hash('provenance'))\n"
    )
    env_a = {"PYTHONHASHSEED": "1"}
    outputs = {
        subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=True).stdout
        for env in (env_a, {"PYTHONHASHSEED": "99"}, {})
    }
    assert len(outputs) == 1


def test_default_split_is_the_one_seeds_base_42_gave():
    """The split seed left the seeds section without moving the default pipeline's split."""
    assert derive_seed(42, "split") == DEFAULT_SPLIT_SEED
    assert load_params(REPO / "params.yaml").data.split_seed == DEFAULT_SPLIT_SEED


@pytest.mark.parametrize(
    ("params", "tags", "split_seed"),
    [
        ({"seeds.base": "7", "seeds.split": "null"}, {"prov.seeds.split": "123", "prov.seeds.base": "7"}, "123"),
        ({"seeds.base": "7", "seeds.split": "null"}, {}, str(derive_seed(7, "split"))),
        ({"seeds.base": "7", "seeds.split": "99"}, {}, "99"),
    ],
)
def test_runs_logged_with_seeds_split_read_it_as_data_split_seed(params, tags, split_seed):
    upgraded, kept = upgrade_logged(params, tags, None)
    assert upgraded == {"seeds.base": "7", "data.split_seed": split_seed}
    assert "prov.seeds.split" not in kept and kept.get("prov.seeds.base") == tags.get("prov.seeds.base")
    assert Params.model_validate(params_from_logged(upgraded)).data.split_seed == int(split_seed)


def test_rerun_writes_an_old_run_s_keys_as_logged():
    """`tracking rerun` re-creates a run at its own commit, whose schema has `seeds.split`, not `data.split_seed`."""
    tree = params_from_logged({"seeds.base": "7", "seeds.split": "null"})
    assert tree == {"seeds": {"base": 7, "split": None}}


def snapshot(params: dict[str, str], tags: dict[str, str]) -> RunSnapshot:
    return RunSnapshot("0" * 32, "run", "1", "FINISHED", params, {}, tags, None, "")


def test_diff_of_an_old_run_and_a_new_one_with_the_same_split_finds_nothing():
    old = snapshot(
        {"seeds.base": "42", "seeds.split": "null", "train.epochs": "2"},
        {"prov.seeds.base": "42", "prov.seeds.split": str(DEFAULT_SPLIT_SEED)},
    )
    new = snapshot(
        {"seeds.base": "42", "data.split_seed": str(DEFAULT_SPLIT_SEED), "train.epochs": "2"}, {"prov.seeds.base": "42"}
    )
    assert [group.name for group in group_diffs(old, new) if group.changes] == []
    moved = snapshot({**new.params, "data.split_seed": "5"}, new.tags)
    assert [group.name for group in group_diffs(old, moved) if group.changes] == ["data"]


def test_a_run_from_before_loss_weights_compiled_none():
    """`train.loss_weights`, `train.class_weight` and `train.augment` came after builders: a template run
    without them is read as `null`, so a diff against a run logged since finds nothing."""
    old = snapshot({"model.builder": "pipelines.models:small_cnn", "train.loss": "null"}, {})
    added = {"train.loss_weights": "null", "train.class_weight": "null", "train.augment": "null"}
    new = snapshot({**old.params, **added}, {})
    assert upgrade_logged(old.params, {}, None)[0] == new.params
    assert [group.name for group in group_diffs(old, new) if group.changes] == []
    weighted = snapshot({**old.params, "train.loss_weights": "[1.0, 0.2]"}, {})
    assert [group.name for group in group_diffs(old, weighted) if group.changes] != []


def test_runs_logged_since_are_read_as_they_are():
    params, tags = {"seeds.base": "7", "data.split_seed": "5"}, {"prov.seeds.base": "7"}
    assert upgrade_logged(params, tags, None) == (params, tags)


def logged(flat: dict) -> dict[str, str]:
    """Params as `Tracker.log_params` writes them."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in flat.items()}


def test_diff_of_a_pre_builder_run_and_a_new_one_of_the_same_model_finds_nothing():
    new = logged(load_params(REPO / "params.yaml").flat())
    added = ("model.", "train.loss", "train.metrics", "data.loader", "data.task", "compare.metrics")
    old = {key: value for key, value in new.items() if not key.startswith(added)}
    old.update(
        {
            "model.name": "small_cnn",
            "model.filters": "[32, 64, 128]",
            "model.hidden_units": "[64]",
            "model.dense_units": "128",
            "model.batch_norm": "false",
            "model.dropout": "0.2",
            "train.augment": "false",
            "compare.metrics": '["test_accuracy", "test_loss"]',
        }
    )
    tags = {"prov.seeds.base": "42"}
    assert [group.name for group in group_diffs(snapshot(old, tags), snapshot(new, tags), REPO) if group.changes] == []
    narrower = snapshot({**old, "model.dense_units": "64"}, tags)
    changed = [group for group in group_diffs(narrower, snapshot(new, tags), REPO) if group.changes]
    assert [group.name for group in changed] == ["params"]
    assert "model.kwargs.dense_units" in str(changed[0].changes)


def test_a_pre_builder_run_is_read_in_the_module_the_project_names_or_as_logged(tmp_path):
    """The template's built-ins live in the module of the builder params.yaml names; a project that names none
    (or has no params.yaml) has no module to read `model.name` in, so the run's model is shown as logged."""
    old = {"model.name": "mlp", "model.hidden_units": "[64]", "model.filters": "[32]", "train.augment": "true"}
    module = project_builders(REPO)
    upgraded, _ = upgrade_logged(old, {}, module)
    assert upgraded["model.builder"] == f"{module}:mlp" and upgraded["model.kwargs.hidden_units"] == "[64]"
    assert "model.name" not in upgraded and "model.kwargs.filters" not in upgraded
    assert project_builders(tmp_path) is None and project_builders(None) is None
    (tmp_path / "params.yaml").write_text("model:\n  builder: null\n")
    assert project_builders(tmp_path) is None
    (tmp_path / "params.yaml").write_text("model:\n  builder: team.models:build\n")
    assert project_builders(tmp_path) == "team.models"
    as_logged, _ = upgrade_logged(old, {}, None)
    assert {key: as_logged[key] for key in old} == old and "model.builder" not in as_logged
