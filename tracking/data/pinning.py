"""`tracking pin-data`: write the prepared data's content hash to `data.sha256`, keeping params.yaml's comments.

The manifest is also saved as `data/pins/<sha256>.json`, so that a later mismatch can say what changed in
the counts, not only that the hash differs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tracking.config.params_file import load_params
from tracking.data.manifest import MANIFEST, Manifest
from tracking.errors import ParamsError
from tracking.layout import PINS_DIR, PREPARED
from tracking.yaml_text import yaml_editor


def pin_prepared_data(root: Path, params_path: Path) -> tuple[str, Path]:
    """Pin `data/prepared`'s content hash; return it and the saved manifest's path."""
    load_params(params_path)
    manifest = Manifest.read(root / PREPARED)
    digest = manifest.content_sha256
    yaml = yaml_editor()
    document = yaml.load(params_path.read_text())
    if document.get("data") is None:
        raise ParamsError(f"{params_path}: no 'data' section to pin; add `data:` with `source:` first")
    document["data"]["sha256"] = digest
    pin_file = root / PINS_DIR / f"{digest}.json"
    pin_file.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / PREPARED / MANIFEST, pin_file)
    with open(params_path, "w") as handle:
        yaml.dump(document, handle)
    return digest, pin_file.relative_to(root)
