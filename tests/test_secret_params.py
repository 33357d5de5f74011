"""Secrets by reference in params (tracking/config/references.py): `env:NAME` read when the stage runs and
recorded as written; a credential-looking key or value refused before any run opens, with that fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_redaction import SECRET_KEYS, WRITTEN

from tracking.config.params_file import load_params
from tracking.errors import ParamsError, UserCodeError
from tracking.redaction import redact_param

LOADER = "team_secret_loader:load"


def params_text(kwargs: str) -> str:
    return f"data:\n  source: null\n  loader: {LOADER}\n  kwargs:\n{kwargs}"


@pytest.mark.parametrize("key", [key.rsplit(".", 1)[-1] for key in SECRET_KEYS if key.count(".") == 2])
def test_a_key_named_like_a_credential_is_refused_with_the_reference_as_fix(key: str, tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text(params_text(f"    {key}: plain words\n"))
    with pytest.raises(ParamsError) as raised:
        load_params(path)
    said = str(raised.value)
    assert f"data.kwargs.{key}: its name says it holds a credential" in said and "env:" in said
    assert "plain words" not in said


@pytest.mark.parametrize(("text", "secret"), WRITTEN.values(), ids=list(WRITTEN))
def test_a_value_holding_a_credential_is_refused_under_any_name(text: str, secret: str, tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text(params_text(f"    connection: {json.dumps(text)}\n"))  # JSON's string: YAML's too
    with pytest.raises(ParamsError, match=r"data\.kwargs\.connection: its value holds a credential") as raised:
        load_params(path)
    assert secret not in str(raised.value)


def test_a_reference_is_read_when_the_loader_runs_and_recorded_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from tracking.data.dataset import load_from_loader

    (tmp_path / "team_secret_loader.py").write_text(
        "def load(db_pw, dsn):\n    raise ValueError(f'refused {db_pw} at {dsn}')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "params.yaml"
    path.write_text(params_text("    db_pw: env:TEAM_DB_PW\n    dsn: env:TEAM_DSN\n"))
    params = load_params(path)
    assert redact_param("data.kwargs.db_pw", params.data.kwargs["db_pw"]) == ("env:TEAM_DB_PW", None)
    with pytest.raises(ParamsError, match=r"data\.kwargs\.db_pw is env:TEAM_DB_PW, but TEAM_DB_PW is not set"):
        load_from_loader(LOADER, params.data.kwargs, tmp_path, "classification")
    monkeypatch.setenv("TEAM_DB_PW", "plainRefPw49")
    monkeypatch.setenv("TEAM_DSN", "db.internal/ml")
    with pytest.raises(UserCodeError) as raised:
        load_from_loader(LOADER, params.data.kwargs, tmp_path, "classification")
    said = str(raised.value)
    assert "refused <redacted> at <redacted>" in said and "plainRefPw49" not in said, "the loader got the values"
