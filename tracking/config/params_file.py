"""params.yaml read strictly (`load_params`): checked against the schema in tracking/config/params.py, every
problem (a missing file, bad YAML, a YAML bomb, a value that is not JSON, an unknown key, a wrong value, a param
MLflow would refuse) one
`ParamsError` line naming the key and the fix, before anything runs.

The YAML is read as DVC reads params files (YAML 1.2 through ruamel.yaml, tracking/yaml_text.py), so a value
means here what it means to `dvc exp run -S`, `dvc params diff` and `dvc exp show`: `1e-5` is a float and `yes`
a string, where a YAML 1.1 reader (PyYAML) would say string and true.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tracking.config.params import Params
from tracking.config.references import refuse_credentials
from tracking.errors import BadValue, ParamsError, UnknownKey, not_a_readable_file
from tracking.names import MAX_KEY_CHARS, MAX_PARAM_VALUE_CHARS
from tracking.yaml_text import param_text, parse_yaml

# What params.yaml may expand to once YAML aliases are followed: a real one holds a few hundred values, a YAML
# bomb (each level aliasing the one below nine times) billions, which flattening the params would write out.
MAX_YAML_VALUES = 10_000
MAX_YAML_DEPTH = 32
# What a param may hold: JSON's types, which DVC's lock file, MLflow's params and a rerun all write back the same.
# A YAML date (`2024-01-01`), time, `!!binary` or `!!set` is none of them.
JSON_TYPES = (dict, list, str, int, float, bool, type(None))


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate params.yaml; every problem becomes a `ParamsError` naming the key and the fix."""
    path = Path(path)
    kind = not_a_readable_file(path)
    if kind == "not found":
        raise ParamsError(
            f"{path}: file not found",
            fix="run from the project root or create it (every key: docs/configuration.md)",
        )
    if kind is not None:
        raise ParamsError(
            f"{path} is {kind}, not a file", fix="make it the YAML file of params (docs/configuration.md)"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise ParamsError(
            f"{path}: not UTF-8 text: byte 0x{err.object[err.start]:02x} at line {line} cannot be decoded",
            fix="save the file as UTF-8 (YAML's encoding)",
        ) from err
    from ruamel.yaml.error import YAMLError

    try:
        raw = parse_yaml(text)
    except RecursionError as err:
        raise ParamsError(f"{path}: a value is nested deeper than {MAX_YAML_DEPTH} levels", fix="flatten it") from err
    except YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise ParamsError(f"{path}: YAML syntax error{where}: {problem}", fix="fix the YAML there") from err
    if raw is None:
        raise ParamsError(
            f"{path} is empty: no section set, so every key would take its built-in default",
            fix="write the sections the pipeline reads (every key: docs/configuration.md); to run the built-in "
            "defaults on purpose, write `{}`",
        )
    if not isinstance(raw, dict):
        raise ParamsError(
            f"{path}: expected a mapping of sections at the top level, got {type(raw).__name__}",
            fix="write params.yaml as sections of keys (data:, train:, ...)",
        )
    check_values(path, raw)
    refuse_credentials(path, raw)
    try:
        params = Params.model_validate(raw)
    except ValidationError as err:
        raise _describe(path, err) from err
    _check_mlflow_limits(path, params)
    return params


def check_values(path: Path, raw: dict[str, Any]) -> None:
    """Refuse params whose YAML aliases expand beyond `MAX_YAML_VALUES` values or `MAX_YAML_DEPTH` levels (or refer
    to themselves), counting each alias as often as it is used, before anything copies them out; and any value of
    a type JSON lacks (`JSON_TYPES`), named by its key, before anything writes it as text. Params.yaml's and a
    team's own params file's alike (tracking/script/team_params.py)."""
    count = 0

    def walk(node: Any, key: str, depth: int) -> None:
        nonlocal count
        count += 1
        if count > MAX_YAML_VALUES:
            raise ParamsError(
                f"{path}: {key}: expands to more than {MAX_YAML_VALUES} values once its YAML aliases (*name) are "
                "followed (a YAML bomb?)",
                fix="write the values out, or pass a large structure through a file that data.loader reads",
            )
        if depth > MAX_YAML_DEPTH:
            raise ParamsError(
                f"{path}: {key}: nested deeper than {MAX_YAML_DEPTH} levels (or a YAML alias refers to itself)",
                fix="flatten it",
            )
        if not isinstance(node, JSON_TYPES):
            raise ParamsError(
                f"{path}: {key}: YAML reads {node} as a {type(node).__name__}, which params cannot hold (text, "
                "numbers, true/false, null, lists and mappings only: DVC and MLflow would each write it differently)",
                fix=f'quote it to keep it as text ({key.rpartition(".")[2]}: "{node}")',
            )
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for name, child in children:  # named down to the key under a section's kwargs, no deeper
            deeper = isinstance(node, dict) and key.count(".") < 2
            walk(child, f"{key}.{name}" if deeper else key, depth + 1)

    for section, value in raw.items():
        walk(value, str(section), 1)


def _check_mlflow_limits(path: Path, params: Params) -> None:
    """Refuse a param MLflow would reject when the run logs it: a name over `MAX_KEY_CHARS` characters, a value
    over `MAX_PARAM_VALUE_CHARS`; checked here so nothing is opened, trained or written first."""
    for key, value in params.flat().items():
        if len(key) > MAX_KEY_CHARS:
            raise ParamsError(
                f"{path}: {key[:60]}...: the param's name has {len(key)} characters, more than MLflow's "
                f"{MAX_KEY_CHARS}",
                fix="use shorter keys",
            )
        text = param_text(value)
        if len(text) > MAX_PARAM_VALUE_CHARS:
            raise ParamsError(
                f"{path}: {key}: holds {len(text)} characters as an MLflow param, more than MLflow's "
                f"{MAX_PARAM_VALUE_CHARS}",
                fix="pass large values through a file the loader or builder reads, and name the file here",
            )


def _describe(path: Path, err: ValidationError) -> ParamsError:
    """The first validation error as the error to raise, with the valid keys for an unknown one."""
    errors = err.errors()
    first = errors[0]
    loc = [str(part) for part in first["loc"] if not isinstance(part, int)]
    key = ".".join(loc)
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    if first["type"] == "extra_forbidden":
        section = _section_model(loc[:-1])
        return UnknownKey(str(path), key, list(section.model_fields), more)
    if first["type"] == "value_error":
        reason = first["msg"].removeprefix("Value error, ")
        where = f"{key}: " if key else ""
        return ParamsError(f"{path}: {where}{reason}", fix=f"fix it in {path}{more}")
    return BadValue(str(path), key, _expected(first), first.get("input"), more)


def _section_model(loc: list[str]) -> type[BaseModel]:
    model: type[BaseModel] = Params
    for part in loc:
        annotation = model.model_fields[part].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            break
        model = annotation
    return model


def _expected(error: dict[str, Any]) -> str:
    """Pydantic's message reworded as what was expected."""
    message = error["msg"]
    message = re.sub(r"^Input should be ", "expected ", message)
    message = re.sub(
        r"^String should match pattern '\^\[0-9a-f\]\{64\}\$'", "expected 64 lowercase hex digits (a SHA-256)", message
    )
    message = re.sub(r"^List should have ", "expected a list with ", message)
    message = re.sub(
        r"^String should match pattern '.*:\[A-Za-z_\]\[A-Za-z0-9_\]\*\$'",
        "expected 'package.module:function'",
        message,
    )
    message = re.sub(r"^Dictionary should have at least 1 item.*", "expected at least one metric: max|min", message)
    return message[0].lower() + message[1:]
