"""YAML and params as DVC and MLflow hold them: parsed and written as DVC does (ruamel.yaml, YAML 1.2), flattened
to dotted keys, a value as MLflow's text. On the ground floor: the config, provenance and inspect rooms all read
params files, and none of them need the others for it."""

from __future__ import annotations

import functools
import json
from typing import Any


def parse_yaml(text: str) -> Any:
    """YAML text as DVC reads params files and dvc.lock (`dvc.utils.serialize.parse_yaml`: ruamel.yaml, safe)."""
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(text)


def parse_dvc_file(text: str) -> Any:
    """A DVC file (dvc.yaml, dvc.lock, a `.dvc` pointer) as mappings and lists of text, each scalar as written (`on`,
    `1e5`, `2024-01-02` stay file names) and merge keys (`<<: *shared`) merged. Paths and hashes need no types, and
    libyaml reads the default dvc.yaml in 0.7 ms against ruamel.yaml's 10 (every training run reads the project's
    DVC files). Raises ValueError on text that is not YAML."""
    import yaml

    try:
        return yaml.load(text, Loader=_text_loader())
    except yaml.YAMLError as err:
        raise ValueError(str(err)) from err


@functools.cache
def _text_loader() -> type:
    """libyaml's safe loader with no implicit types but the merge key: every plain scalar is a string."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    merge = [resolver for resolver in base.yaml_implicit_resolvers.get("<", []) if resolver[0].endswith(":merge")]
    return type("TextLoader", (base,), {"yaml_implicit_resolvers": {"<": merge}})


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
