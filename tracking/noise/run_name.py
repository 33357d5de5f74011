"""A judged run's name as MLflow's run list shows it: its verdict and what changed, in front of its own name.

MLflow 3.17's run list shows each run's name without configuration; tags and params appear only as columns a user
adds. So the verdict goes where a user looks first, and a rerun is named `rerun of slung-jinn`. The verdict stays in
its tag `noise.verdict` for searches, every changed param on the run's page.

The name's cell shows 122 px of text in Chromium on Debian (12 px DejaVu Sans; 146 px where the experiment has no
nested runs, but the calibration's repeats are nested) at 1400x1000 and 1920x1080 alike, and cuts the rest with an
ellipsis: `exceeds_noise · train.learning_rate=1e-05 · slung-jinn` showed `exceeds_noise · train.l…`. So a name
with a change opens with the verdict's short label (`LABELS`) and the changed params as briefly as needed to stay
in view (`VISIBLE_EM`): each key whole, else its last part, else that part's initials, several as the first and how
many more: `exceeds lr=1e-05 · slung-jinn`, `inconcl. base=7 · reseeded`. A name with no change keeps the verdict
whole: `within_noise · train-662aae`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracking.noise.policy import EXCEEDS, INCONCLUSIVE, OUTCOMES, WITHIN, WITHIN_TOLERANCE, changed_keys, logged_text

SEPARATOR = " · "
# The section of the params that holds a pipeline run's seeds: a candidate that differs only there says so by name.
SEEDS = "seeds."
RERUN_PREFIX = "rerun of "
# Each verdict as the front of a name with a change says it: the word itself where it is short, else its start.
LABELS = {EXCEEDS: "exceeds", WITHIN: "within", WITHIN_TOLERANCE: "within tol.", INCONCLUSIVE: "inconcl."}
# How wide the label and the changed params may be, in ems of Arial's advance widths (`ADVANCE`): the run list's
# 122 px of 12 px DejaVu Sans, 13.6% wider than Arial (measured in Chromium: the alphabet 175.8 px), hold 8.95 ems;
# 8.6 leaves room for the ellipsis's rounding. macOS's and Windows's sans-serif are narrower than DejaVu.
VISIBLE_EM = 8.6
# Advance widths in ems of Arial's metrics (Liberation Sans, Helvetica alike), which Chromium's measured widths follow
# within 1%; a character not listed takes DEFAULT_EM.
ADVANCE = {
    **dict.fromkeys("ijl", 0.222),
    **dict.fromkeys("ft .,:;·'|!I", 0.278),
    **dict.fromkeys("r-()", 0.333),
    **dict.fromkeys("ckvxyzs", 0.5),
    **dict.fromkeys("=+", 0.584),
    **dict.fromkeys("ABEKPSVXY", 0.667),
    **dict.fromkeys("CDHNRUw", 0.722),
    **dict.fromkeys("mGOQ", 0.778),
    **dict.fromkeys("MW", 0.833),
}
DEFAULT_EM = 0.556
ELLIPSIS = "…"


def judged_name(name: str, verdict: str, changes: Mapping[str, str]) -> str:
    """`name` with `verdict` and the params that differ from the baseline's (`changes`: key to logged value) in
    front, said briefly enough to stay in view in the run list (`LABELS`, `brief_changes`); a verdict already there
    is replaced, so judging a run again does not stack them."""
    if not changes:
        return f"{verdict}{SEPARATOR}{own_name(name)}"
    label = LABELS.get(verdict, verdict)
    shown = brief_changes(changes, VISIBLE_EM - width_em(label + " "))
    return f"{label} {shown}{SEPARATOR}{own_name(name)}"


def brief_changes(changes: Mapping[str, str], room_em: float) -> str:
    """The changed params in at most `room_em` ems: every key whole, else by its last part, else by that part's
    initials (`learning_rate` as `lr`); several, all of them or the first and how many more; failing all, the
    shortest form cut with an ellipsis."""
    if not changes:
        return ""
    forms = []
    for brief in (lambda key: key, _last_part, _initials):
        pairs = [f"{brief(key)}={value}" for key, value in changes.items()]
        forms.append(", ".join(pairs))
        if len(pairs) > 1:
            forms.append(f"{pairs[0]} +{len(pairs) - 1}")
    fitting = next((form for form in forms if width_em(form) <= room_em), None)
    if fitting is not None:
        return fitting
    cut = forms[-1]
    while cut and width_em(cut + ELLIPSIS) > room_em:
        cut = cut[:-1]
    return cut.rstrip(" ,+") + ELLIPSIS


def width_em(text: str) -> float:
    """How wide `text` is drawn in a sans-serif font, in ems (`ADVANCE`)."""
    return sum(ADVANCE.get(char, DEFAULT_EM) for char in text)


def _last_part(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _initials(key: str) -> str:
    """A key's last part by the initials of its words (`learning_rate` as `lr`); a one-word part as it is."""
    words = [word for word in _last_part(key).split("_") if word]
    return "".join(word[0] for word in words) if len(words) > 1 else _last_part(key)


def changes(reference: Mapping[str, Any], candidate: Mapping[str, Any], prefixes: tuple[str, ...]) -> dict[str, str]:
    """The flat params under `prefixes` the candidate holds otherwise than the reference, with the candidate's
    value as MLflow logs it (`unset` where it has none)."""
    return {
        key: logged_text(key, candidate[key]) if key in candidate else "unset"
        for key in changed_keys(reference, candidate, prefixes)
    }


def own_name(name: str) -> str:
    """The run's name without the verdict `judged_name` put in front of it (or an earlier version put there:
    `exceeds_noise · train.learning_rate=1e-05 · slung-jinn`)."""
    parts = name.split(SEPARATOR)
    front = parts[0]
    judged = front in OUTCOMES or any(front.startswith(f"{label} ") for label in LABELS.values())
    return parts[-1] if len(parts) > 1 and judged else name


def rerun_name(original: str) -> str:
    """The name of a run that re-creates the run named `original`."""
    return RERUN_PREFIX + own_name(original)
