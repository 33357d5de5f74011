"""Who decided each source of randomness of a script's run (`prov.seeds.<source>`): the run's seed where the
script used it (handed its model to `run.seeded`, read `run.seeds`, drew `run.batches`), else the script itself,
so a seed that went unused is never recorded as used.
"""

from __future__ import annotations

from typing import Any

from tracking.determinism.seeds import Seeds

# Who decided a source of randomness the script did not hand to the run, as its `prov.seeds.<source>` says.
DECIDED_BY_SCRIPT = {
    "init": "script: the model's own initializers (not passed to run.seeded), drawn from seeds.base",
    "dropout": "script: the model's own generators (not passed to run.seeded), drawn from seeds.base",
    "augment": "script: the model's own generators (not passed to run.seeded), drawn from seeds.base",
    "shuffle": "script: Keras fit's own order (run.batches not used), drawn from seeds.base",
}
# `prov.seeds.shuffle` of a run whose models were not trained by Keras's `fit` (a `GradientTape` loop, say).
OWN_ORDER = "script: its own order (no Keras fit seen, run.batches not used), drawn from seeds.base"


class ReadSeeds:
    """A run's `Seeds` as its script reads them: reading a source (`init`, `shuffle`, `dropout`, `augment`) records
    it as used by the run."""

    def __init__(self, seeds: Seeds, used: dict[str, Any]) -> None:
        self._seeds, self._used = seeds, used

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._seeds, name)
        if name in DECIDED_BY_SCRIPT:
            self._used[name] = value
        return value

    def __repr__(self) -> str:
        return f"ReadSeeds({self._seeds!r})"
