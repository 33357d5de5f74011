"""The provenance record of a team's script run (`provenance.json`, the `prov.*` tags): our stages' record with
the script's stage, command and seeds' origins; what `tracking.start` logs and `tracking provenance` shows.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

from tracking.config.params import DeterminismParams
from tracking.names import NOTEBOOK_COMMAND
from tracking.script.interpreter_setup import in_a_kernel
from tracking.script.team_params import ScriptParams


def script_record(
    root: Path,
    params: ScriptParams,
    determinism: DeterminismParams,
    effective: Any,
    seeds: dict[str, Any],
    stage: str | None,
) -> dict[str, Any]:
    """What a script's run records (`provenance.json`, the `prov.*` tags): our record (tracking/provenance) with
    `seeds` as given, the running DVC `stage`'s deps hashed now, and the script's stage, command and seeds' origins."""
    from tracking.determinism.settings import as_record
    from tracking.provenance import capture

    record = capture(root, seeds, as_record(determinism, effective), running=stage)
    record["script"] = {
        "stage": stage or "",
        "command": NOTEBOOK_COMMAND if in_a_kernel() else shlex.join(sys.orig_argv[1:]),
        "params": Path(os.path.relpath(params.path, root)).as_posix(),
        "seeds_from": dict(params.origins),
    }
    return record
