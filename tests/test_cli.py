import subprocess
import sys

from conftest import BIN, run


def test_console_script_and_module_show_help():
    for command in ([str(BIN / "tracking"), "--help"], [sys.executable, "-m", "tracking", "--help"]):
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        assert "pin-data" in done.stdout and "provenance" in done.stdout


def test_help_does_not_import_tensorflow_or_mlflow():
    """Nor the params schema's pydantic (issue 50: `tracking --help` took 0.14 s, from 0.05, once it did)."""
    heavy = ("tensorflow", "mlflow", "keras", "pydantic")
    code = (
        f"import sys, tracking.cli; tracking.cli.build_parser(); print(sorted(m for m in {heavy} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_provenance_command_outside_a_project_is_one_line(tmp_path):
    (tmp_path / "params.yaml").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "tracking", "provenance"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and "git init" in done.stderr  # DVC is optional


def test_ray_is_imported_only_by_the_ray_executor():
    code = "import sys, pipelines.calibrate, tracking.repeats.worker, tracking.compute.ray_executor; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_doctor_and_sync_outside_a_project_use_the_uri_and_provenance_runs_from_a_subfolder(project, tmp_path):
    """With MLFLOW_TRACKING_URI set, `tracking doctor` checks that store from any folder and `tracking sync` says
    there is nothing to sync (journals live in a project); `tracking provenance` from a subfolder reads the
    project's params.yaml. Each refused before."""
    import json

    from conftest import project_env, run
    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{tmp_path / 'store/mlflow.db'}"
    (tmp_path / "store").mkdir()
    MlflowClient(tracking_uri=store).create_experiment("elsewhere")
    outside = tmp_path / "outside"
    outside.mkdir()
    env = project_env(MLFLOW_TRACKING_URI=store)
    doctor = run([sys.executable, "-m", "tracking", "doctor"], outside, env)
    assert doctor.stdout.startswith(f"{store}: 0 run(s) RUNNING"), doctor.stdout
    sync = run([sys.executable, "-m", "tracking", "sync"], outside, env)
    assert sync.stdout.startswith(f"nothing to sync: {outside} is not inside a DVC project"), sync.stdout
    record = json.loads(run([sys.executable, "-m", "tracking", "provenance"], project / "data").stdout)
    assert record["seeds"]["base"] == 42 and record["git"]["commit"], record["seeds"]


def test_every_command_ends_quietly_when_its_reader_stops_early(tmp_path):
    """`tracking provenance | head -20` in a team's project printed a BrokenPipeError traceback (two chained): every
    command, not only `tracking bands`, ends quietly when the reader of its output stops."""
    run(["git", "init", "-q"], tmp_path)
    (tmp_path / "params.yaml").write_text("train:\n  seed: 7\n  epochs: 2\n")
    run(["git", "add", "-A"], tmp_path)
    run(["git", "commit", "-qm", "a team's project"], tmp_path)
    done = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m tracking provenance | head -c 1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.stdout == "{" and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_each_commands_help_opens_with_its_description():
    """Issue 36: `tracking diff --help` had a usage and arguments but no line saying what the command does."""
    from tracking.cli import build_parser

    commands = next(action for action in build_parser()._actions if action.dest == "command")
    for listed in commands._choices_actions:
        _usage, description, *_ = commands.choices[listed.dest].format_help().split("\n\n")
        assert " ".join(description.split()) == " ".join(listed.help.split()), listed.dest
