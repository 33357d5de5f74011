"""One calibration repeat of a team's script as its process sees it: parent run, variant and index, from the environment.

`tracking calibrate` tells each run of the script through `TRACKING_REPEAT` which parent run it belongs to, its
variant and its index.

An ALGO repeat varies every seed the run hands out (tracking/repeats/variants.py's `ALGO_SOURCES`) and `seeds.base`
too, since what the script decides itself (Keras's own shuffle, a model it did not pass to `run.seeded`) draws
from the global streams `seeds.base` seeds; the hash seed follows. A CONTROL repeat keeps every seed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from tracking.determinism.seeds import Seeds
from tracking.env import TRACKING_REPEAT
from tracking.errors import SettingError
from tracking.names import NOISE_REPEAT_TAG, NOISE_VARIANT_TAG, REPEAT_KEY_TAG
from tracking.repeats.variants import ALGO_SOURCES, algo_seeds

# The variants a script's calibration offers: seeds varied, or nothing varied (kernel noise needs our own fit).
SCRIPT_VARIANTS = ("algo", "control")


@dataclass(frozen=True)
class ScriptRepeat:
    """Where this process's run belongs in a calibration: parent run, variant, index and the key it is kept under."""

    parent_run_id: str
    variant: str
    repeat: int
    key: str

    def to_env(self) -> str:
        return json.dumps(
            {"parent": self.parent_run_id, "variant": self.variant, "repeat": self.repeat, "key": self.key}
        )

    def seeds(self, seeds: Seeds) -> Seeds:
        """The seeds of this repeat: all derived afresh from the script's base for ALGO, unchanged for CONTROL."""
        if self.variant != "algo":
            return seeds
        return algo_seeds(seeds, self.repeat, sources=(*ALGO_SOURCES, "hash", "base"))

    def tags(self) -> dict[str, str]:
        return {NOISE_VARIANT_TAG: self.variant, NOISE_REPEAT_TAG: str(self.repeat), REPEAT_KEY_TAG: self.key}


def repeat_from_env() -> ScriptRepeat | None:
    """The repeat `tracking calibrate` started this process as, or None when it did not."""
    text = os.environ.get(TRACKING_REPEAT)
    if not text:
        return None
    try:
        found = json.loads(text)
        repeat = ScriptRepeat(str(found["parent"]), str(found["variant"]), int(found["repeat"]), str(found["key"]))
    except (ValueError, KeyError, TypeError) as err:
        raise SettingError(
            f"{TRACKING_REPEAT}={text!r} is not what tracking calibrate sets", fix=f"unset {TRACKING_REPEAT}"
        ) from err
    if repeat.variant not in SCRIPT_VARIANTS:
        raise SettingError(
            f"{TRACKING_REPEAT}: unknown variant {repeat.variant!r}", fix=f"use one of {', '.join(SCRIPT_VARIANTS)}"
        )
    return repeat
