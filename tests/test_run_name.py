"""A judged run's name: its verdict and changed params in front of its own name, replaced when judged again, and a
rerun's name (tracking/noise/run_name.py), which MLflow's run list shows without configuration."""

from tracking.noise.run_name import MAX_CHANGES, changes, judged_name, own_name, rerun_name


def test_the_verdict_and_the_changed_params_go_in_front_of_the_name_once():
    changed = changes(
        {"train.learning_rate": 0.001, "compare.alpha": 0.05}, {"train.learning_rate": 1e-05}, ("train.",)
    )
    assert changed == {"train.learning_rate": "1e-05"}
    name = judged_name("slung-jinn", "exceeds_noise", changed)
    assert name == "exceeds_noise · train.learning_rate=1e-05 · slung-jinn"
    assert judged_name(name, "inconclusive", {}) == "inconclusive · slung-jinn"  # judged again: replaced
    assert own_name(name) == "slung-jinn" and own_name("a · b") == "a · b"  # only a verdict is taken off
    assert rerun_name(name) == "rerun of slung-jinn"


def test_many_changed_params_are_cut_and_a_missing_one_is_unset():
    changed = changes({f"train.k{i}": i for i in range(40)}, {f"train.k{i}": i + 1 for i in range(39)}, ("train.",))
    assert changed["train.k39"] == "unset"
    shown = judged_name("run", "within_noise", changed).split(" · ")[1]
    assert len(shown) == MAX_CHANGES and shown.endswith("…")


def test_a_judged_run_is_still_found_by_its_own_name(tmp_path):
    from mlflow import MlflowClient

    from tracking.inspect.diff import load_run

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("team", artifact_location=(tmp_path / "artifacts").as_uri())
    judged = client.create_run(experiment, run_name=judged_name("slung-jinn", "within_noise", {})).info.run_id
    assert load_run(client, "slung-jinn").run_id == judged
