"""A model's `.keras` file as a function of its weights and config: Keras stamps the save time into the zip's
`model.weights.h5` entry and into `metadata.json`'s `date_saved`, and numbers shared objects in `config.json` by
their memory address (`shared_object_id`), so equal weights gave a new file, and DVC a new output, on every run."""

from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from tracking.whole_file import written_whole

METADATA = "metadata.json"
SAVE_TIME = "date_saved"
CONFIG = "config.json"
SHARED_ID = "shared_object_id"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def save_model(model: Any, path: Path) -> None:
    """Save `model` as Keras does, then rewrite the archive without the save time: same members, same order, each
    stamped with the zip format's first date. The run's MLflow record keeps when it was saved. The file appears
    whole or not at all; a folder that cannot be written is reported against `path`, the file the user knows."""
    with tempfile.TemporaryDirectory(prefix="tracking-save-") as scratch:
        keras_file = Path(scratch) / "model.keras"  # Keras wants the .keras suffix
        model.save(keras_file)
        with written_whole(path) as partial:  # a Ctrl-C mid-rewrite too: the stage's clean-up knows only `path`
            _rewrite(keras_file, partial)


def _rewrite(source_path: Path, target_path: Path) -> None:
    """Copy the archive member by member, without the save time and with shared objects numbered in order."""
    with zipfile.ZipFile(source_path) as source, zipfile.ZipFile(target_path, "w") as target:
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
