"""YAML and params as DVC and MLflow hold them: parsed and written as DVC does (ruamel.yaml, YAML 1.2), flattened
to dotted keys, a value as MLflow's text. On the ground floor: the config, provenance and inspect rooms all read
params files, and none of them need the others for it."""

from __future__ import annotations

import json
from typing import Any


def parse_yaml(text: str) -> Any:
    """YAML text as DVC reads params files and dvc.lock (`dvc.utils.serialize.parse_yaml`: ruamel.yaml, safe)."""
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(text)


def yaml_editor() -> Any:
    """A round-trip YAML writer as DVC writes params files (comments, order and quotes kept), `null` spelled out."""
    from ruamel.yaml import YAML

    editor = YAML()
    editor.preserve_quotes = True
    editor.representer.add_representer(
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    return editor


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings to one level with dotted keys; lists stay values."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def param_text(value: Any) -> str:
    """A param value as MLflow holds it: text as is, anything else as JSON (null, true, [4, 4, 4])."""
    return value if isinstance(value, str) else json.dumps(value)
