"""A judged run's name: its verdict and changed params in front of its own name, replaced when judged again, and a
rerun's name (tracking/noise/run_name.py), which MLflow's run list shows without configuration."""

from tracking.noise.policy import OUTCOMES
from tracking.noise.run_name import LABELS, SEPARATOR, VISIBLE_EM, changes, judged_name, own_name, rerun_name, width_em


def test_the_verdict_and_the_changed_params_go_in_front_of_the_name_once():
    changed = changes(
        {"train.learning_rate": 0.001, "compare.alpha": 0.05}, {"train.learning_rate": 1e-05}, ("train.",)
    )
    assert changed == {"train.learning_rate": "1e-05"}
    name = judged_name("slung-jinn", "exceeds_noise", changed)
    assert name == "exceeds lr=1e-05 · slung-jinn"  # `exceeds_noise · train.learning_rate=1e-05` was cut in the list
    assert judged_name(name, "inconclusive", {}) == "inconclusive · slung-jinn"  # judged again: replaced
    assert own_name(name) == "slung-jinn" and own_name("a · b") == "a · b"  # only a verdict is taken off
    assert own_name("exceeds_noise · train.learning_rate=1e-05 · slung-jinn") == "slung-jinn"  # an earlier name
    assert rerun_name(name) == "rerun of slung-jinn"


def test_many_changed_params_are_cut_and_a_missing_one_is_unset():
    changed = changes({f"train.k{i}": i for i in range(40)}, {f"train.k{i}": i + 1 for i in range(39)}, ("train.",))
    assert changed["train.k39"] == "unset"
    assert judged_name("run", "within_noise", changed) == "within k0=1 +39 · run"  # the first, and how many more


def test_the_verdict_and_the_first_changed_param_fit_the_run_list_s_name_cell():
    """The run list shows 122 px of a name (12 px DejaVu Sans: 8.95 ems of Arial's widths): each verdict's label with
    a change stays within VISIBLE_EM, the key said as briefly as it needs (issue 67)."""
    cases = {
        "train.learning_rate": ("1e-05", {"exceeds_noise": "lr=1e-05", "inconclusive": "lr=1e-05"}),
        "seeds.base": ("7", {"inconclusive": "base=7", "within_noise": "base=7"}),
        "model.kwargs.units": ("128", {"within_noise": "units=128"}),
    }
    for key, (value, expected) in cases.items():
        for verdict in OUTCOMES:
            name = judged_name("slung-jinn", verdict, {key: value})
            shown = name.rsplit(SEPARATOR, 1)[0]
            assert width_em(shown) <= VISIBLE_EM and shown.startswith(f"{LABELS[verdict]} "), name
            assert verdict not in expected or shown == f"{LABELS[verdict]} {expected[verdict]}", name
    assert judged_name("a", "within_noise", {"data.n": "9"}) == "within data.n=9 · a"  # whole where it fits
    assert abs(width_em("inconclusive · lr=1e-05") * 12 * 1.136 - 138.5) < 4  # Chromium measured 138.5 px


def test_a_judged_run_is_still_found_by_its_own_name(tmp_path):
    from mlflow import MlflowClient

    from tracking.inspect.diff import load_run

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("team", artifact_location=(tmp_path / "artifacts").as_uri())
    judged = client.create_run(experiment, run_name=judged_name("slung-jinn", "within_noise", {})).info.run_id
    assert load_run(client, "slung-jinn").run_id == judged
