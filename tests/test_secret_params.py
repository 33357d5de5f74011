"""Secrets by reference in params (tracking/config/references.py): `env:NAME` read when the stage runs and
recorded as written; a credential-looking key or value refused before any run opens, with that fix."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from test_redaction import SECRET_KEYS, WRITTEN

from tracking.config.params_file import load_params
from tracking.errors import ParamsError, UserCodeError
from tracking.redaction import REDACTED, redact_param, redact_printed

LOADER = "team_secret_loader:load"


def params_text(kwargs: str) -> str:
    return f"data:\n  source: null\n  loader: {LOADER}\n  kwargs:\n{kwargs}"


@pytest.mark.parametrize("key", [key.rsplit(".", 1)[-1] for key in SECRET_KEYS if key.count(".") == 2])
def test_a_key_named_like_a_credential_is_refused_with_the_reference_as_fix(key: str, tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text(params_text(f"    {key}: plain words\n"))
    with pytest.raises(ParamsError) as raised:
        load_params(path)
    said = raised.value.line(redact_printed)  # as the `error:` line prints it: key, why and fix all readable
    assert f"data.kwargs.{key} is refused, its name says it holds a credential" in said
    assert "write its value as the reference `env:" in said and REDACTED not in said
    assert "plain words" not in said


@pytest.mark.parametrize(("text", "secret"), WRITTEN.values(), ids=list(WRITTEN))
def test_a_value_holding_a_credential_is_refused_under_any_name(text: str, secret: str, tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text(params_text(f"    connection: {json.dumps(text)}\n"))  # JSON's string: YAML's too
    with pytest.raises(ParamsError) as raised:
        load_params(path)
    said = raised.value.line(redact_printed)
    assert "data.kwargs.connection is refused, its value holds a credential" in said and "`env:CONNECTION`" in said
    assert secret not in str(raised.value) and REDACTED not in said


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


# Params by form and by position (issue 64): each refused with a line naming its key (a token in the key replaced),
# why and the fix, and holding no part of the secret. One of each vendor format the rules had missed, header maps,
# keys named bearer/jwt/login, a W&B key under a wandb name, URLs carrying a key, a token used as a key.
ALNUM = "Zq3Xw7Rt2Yp8Lm4Kn6Bv1Cx5Dz9Fh0Gj"
FORMS = {
    "xai": ("model_name", f"xai-{ALNUM}{ALNUM}"),
    "pinecone": ("index", f"pcsk_{ALNUM}_{ALNUM}"),
    "langsmith": ("project", f"lsv2_pt_{ALNUM}_{ALNUM[:10]}"),
    "tencent": ("region", f"AKID{ALNUM[:32]}"),
    "google refresh": ("grant", f"1//0g{ALNUM}{ALNUM}"),
    "okta": ("org", f"00{ALNUM}{ALNUM[:8]}"),
    "cloudflare": ("zone", f"{ALNUM}_{ALNUM[:7]}"),
    "azure devops": ("org", "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"),
    "aws session token": ("session", f"IQoJb3JpZ2luX2VjE{ALNUM}{ALNUM}"),
    "neptune": ("project", f"eyJhcGlfYWRkcmVzcyI6{ALNUM}{ALNUM}"),
    "wandb key": ("wandb_entity", "9f2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e1b3d5f7a"),
    "url with key": ("hub", f"https://hub.example.com/v1/models?key={ALNUM}&page=2"),
    "url with token": ("hub", f"https://hub.example.com/x?access_token={ALNUM}"),
    "url with sig": ("blob", f"https://acct.blob.core.windows.net/c/x.npz?sv=2024&sig={ALNUM}"),
    "url with userinfo": ("hub", f"https://svc:{ALNUM}@hub.example.com/x"),
    "cookie header map": ("http_headers", [{"Cookie": f"session={ALNUM}"}]),
    "authorization header map": ("headers", {"Authorization": f"Token {ALNUM}"}),
    "bearer key": ("bearer", ALNUM),
    "jwt key": ("jwt", ALNUM),
    "login user:pw": ("login", f"svc:{ALNUM}"),
    # No vendor's format, in a credential's position: a random token, a hex key, a connection string's field.
    "random header value": ("http_headers", [{"X-Api-Hash": ALNUM}]),
    "hex under session": ("session", "9f2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e"),
    "connection field": ("connection", {"host": "db.internal", "sas": f"sv{ALNUM}"}),
}


@pytest.mark.parametrize(("key", "value"), FORMS.values(), ids=list(FORMS))
def test_a_param_holding_a_credential_by_its_form_or_position_is_refused_in_a_readable_line(
    key: str, value: object, tmp_path: Path
):
    path = tmp_path / "params.yaml"
    path.write_text(params_text(f"    {key}: {json.dumps(value)}\n"))
    with pytest.raises(ParamsError) as raised:
        load_params(path)
    said = raised.value.line(redact_printed)
    assert f"data.kwargs.{key}" in said and " is refused, " in said, said  # a header map: its header's key
    whys = ("holds a credential", "user:password", "W&B API key", "a credential's position")
    assert any(why in said for why in whys), said
    assert "`env:" in said and REDACTED not in said, said
    assert ALNUM not in said and "9f2c4e6a8b0d" not in said and "abcdefghijklmnopqrstuvwxyz234567" not in said


def test_a_token_used_as_a_key_is_refused_naming_the_key_with_the_token_replaced(tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text(params_text(f"    ghp_{ALNUM}xyz: 1\n"))
    with pytest.raises(ParamsError) as raised:
        load_params(path)
    said = raised.value.line(redact_printed)
    assert said.startswith(f"{path}: data.kwargs.{REDACTED} is refused, the key itself holds a token;"), said
    assert "rename the key" in said and ALNUM not in said


@pytest.mark.parametrize(
    "benign",
    [
        {"commit": "9f2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e1b3d5f7a"},  # 40 hex under a name that is not W&B's
        {"loader_spec": "team_data:load"},
        {"url": "https://hub.example.com/v1/models?page=2&sort=key"},
        {"layer_name": "dense_block_with_a_rather_long_name_v2"},
        {"user": "svc"},
    ],
)
def test_params_that_hold_no_credential_are_taken(benign: dict, tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text(params_text("".join(f"    {key}: {json.dumps(value)}\n" for key, value in benign.items())))
    load_params(path)


WANDB_KEY = "9f2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e1b3d5f7a"
# A team's exception quoting a credential, each form as it was printed whole in the `error: data.loader ...` line.
QUOTED = {
    "cookie header": f'401 for {{"Cookie": "session={ALNUM}"}} at https://hub.example.com/data',
    "w&b key assigned": f"wandb rejected WANDB_API_KEY={WANDB_KEY} for entity ml",
    "w&b login": f"wandb.login(key='{WANDB_KEY}') failed",
    "password unquoted": f"connect failed: password={ALNUM} user=svc",
    "bearer": f"GET /v1/data: 403 with Authorization: Bearer {ALNUM}",
}


@pytest.mark.parametrize("message", QUOTED.values(), ids=list(QUOTED))
def test_a_loaders_exception_quoting_a_credential_is_printed_redacted_in_a_readable_line(
    message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    """Issue 64: a loader module whose name holds `secret` keeps its name in the line (the assignment rule took
    `team_secrets_loader:` for a key and the rest of the line for its value), the team's exception loses its
    credential only, and the fix stays whatever the exception held."""
    from tracking.data.dataset import load_from_loader
    from tracking.entry import say_error

    (tmp_path / "team_secrets_loader.py").write_text(f"def load():\n    raise ConnectionError({message!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "team_secrets_loader", raising=False)  # the module each test writes
    with pytest.raises(UserCodeError) as raised:
        load_from_loader("team_secrets_loader:load", {}, tmp_path, "classification")
    say_error(raised.value)
    said = capsys.readouterr().err
    assert said.startswith("error: data.loader: 'team_secrets_loader:load' raised ConnectionError: "), said
    assert said.endswith("; fix the loader (team_secrets_loader.py) or data.kwargs in params.yaml\n"), said
    assert REDACTED in said and ALNUM not in said and WANDB_KEY not in said, said


def test_an_environment_value_holding_a_key_in_its_url_is_recorded_redacted():
    from tracking.provenance.environment import gather_environment

    env = {"KERAS_HUB_URL": f"https://hub.example.com/models?key={ALNUM}", "KERAS_HOME": "/data/keras"}
    assert gather_environment(env) == {"KERAS_HOME": "/data/keras", "KERAS_HUB_URL": REDACTED}


def _leaves(tree: object, key: str = "") -> dict[str, object]:
    """Every leaf of a YAML or JSON tree by its dotted path, into lists too (`stages.train.deps.0.md5`)."""
    if isinstance(tree, dict):
        return {path: leaf for name, child in tree.items() for path, leaf in _leaves(child, f"{key}{name}.").items()}
    if isinstance(tree, list) and tree and all(isinstance(item, (dict, list)) for item in tree):
        return {path: leaf for i, child in enumerate(tree) for path, leaf in _leaves(child, f"{key}{i}.").items()}
    return {key.rstrip("."): tree}


def _projects_own_params() -> dict[str, object]:
    """What the project itself records as params and beside them: the default pipeline's params.yaml, baseline.yaml,
    dvc.lock and audit/dvc.lock (their md5s), metrics/*.json (the weights' SHA-256), the examples' params and every
    zoo model's sections."""
    from test_zoo import MODELS

    from tracking.yaml_text import parse_yaml

    root = Path(__file__).parent.parent
    files = [root / name for name in ("params.yaml", "baseline.yaml", "dvc.lock", "audit/dvc.lock")]
    files += sorted((root / "examples").glob("*/params.yaml")) + sorted((root / "metrics").glob("*.json"))
    found: dict[str, object] = {}
    for file in files:
        tree = json.loads(file.read_text()) if file.suffix == ".json" else parse_yaml(file.read_text())
        found.update({f"{file.relative_to(root)}:{key}": value for key, value in _leaves(tree).items()})
    for model in MODELS.values():
        found.update({f"zoo/{model.name}:{key}": value for key, value in _leaves(model.sections).items()})
    return found


def test_the_projects_own_params_digests_and_ids_are_never_refused():
    """Issue 64: the rule that refuses a random token in a credential's position takes none of the project's own
    params (paths, model names, learning rates, the md5s and SHA-256s it records, the run ids), under their own
    names; and under a header map's key, none of them but the digests (a hex digest in a header is a credential's
    form)."""
    from tracking.redaction import why_secret

    params = _projects_own_params()
    assert len(params) > 400, len(params)  # measured: the files' leaves, most of them dvc.lock's paths and md5s
    refused = {key: why for key, value in params.items() if (why := why_secret(key.partition(":")[2], value))}
    assert not refused
    digest = re.compile(r"[0-9a-f]{16,}(?:\.dir)?")
    plain = {key: value for key, value in params.items() if not digest.fullmatch(str(value))}
    assert len(plain) > 150, len(plain)
    in_headers = {key: value for key, value in plain.items() if why_secret("data.kwargs.headers.X-Name", value)}
    assert not in_headers
    hexes = [value for value in params.values() if digest.fullmatch(str(value))]
    assert all(why_secret("data.kwargs.headers.X-Name", value) for value in hexes if len(str(value)) >= 32)
