"""A model's `.keras` file as a function of its weights and config: Keras stamps the save time into the zip's
`model.weights.h5` entry and into `metadata.json`'s `date_saved`, and numbers shared objects in `config.json` by
their memory address (`shared_object_id`), so equal weights gave a new file, and DVC a new output, on every run."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

METADATA = "metadata.json"
SAVE_TIME = "date_saved"
CONFIG = "config.json"
SHARED_ID = "shared_object_id"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def save_model(model: Any, path: Path) -> None:
    """Save `model` as Keras does, then rewrite the archive without the save time: same members, same order, each
    stamped with the zip format's first date. The run's MLflow record keeps when it was saved."""
    staging = path.with_name(f".saving-{path.name}")  # Keras wants the .keras suffix
    model.save(staging)
    try:
        with zipfile.ZipFile(staging) as source, zipfile.ZipFile(path, "w") as target:
            for member in source.infolist():
                content = source.read(member)
                if member.filename == METADATA:
                    metadata = json.loads(content)
                    metadata.pop(SAVE_TIME, None)
                    content = json.dumps(metadata).encode()
                elif member.filename == CONFIG:
                    content = json.dumps(_numbered(json.loads(content), {})).encode()
                stamped = zipfile.ZipInfo(member.filename, date_time=ZIP_EPOCH)
                stamped.compress_type = member.compress_type
                stamped.external_attr = member.external_attr
                target.writestr(stamped, content)
    finally:
        os.unlink(staging)


def _numbered(config: Any, numbers: dict[int, int]) -> Any:
    """`config` with each shared object's id (a memory address) replaced by its order of first appearance: objects
    shared in the model stay shared when Keras loads it, and the same model gives the same text in every process."""
    if isinstance(config, dict):
        return {
            key: numbers.setdefault(value, len(numbers) + 1) if key == SHARED_ID else _numbered(value, numbers)
            for key, value in config.items()
        }
    if isinstance(config, list):
        return [_numbered(item, numbers) for item in config]
    return config
