"""Progress of long work said in the stage's own lines: at most one line every `EVERY_S` seconds, with the count
done, the total where known and the time left at the rate so far (`prepare: hashed 2.1 of 4.0 GB in 30 s, about
27 s left`). Work shorter than that says nothing, so small data sets print what they did before."""

from __future__ import annotations

import logging
import time

EVERY_S = 30.0
GB = 1e9

log = logging.getLogger(__name__)


class Progress:
    """One piece of long work: `what` it does ('hashed', 'read'), its `unit` ('GB', 'samples', 'steps') and,
    where known, its `total`; `advance` by what was done, and a line is logged when `EVERY_S` passed since the
    last."""

    def __init__(self, stage: str, what: str, unit: str, total: float | None = None, scale: float = 1.0) -> None:
        self.stage, self.what, self.unit, self.total, self.scale = stage, what, unit, total, scale
        self.done = 0.0
        self.started = self.said = time.monotonic()

    def advance(self, amount: float) -> None:
        self.done += amount
        now = time.monotonic()
        if now - self.said >= EVERY_S:
            self.said = now
            log.info(self.line(now - self.started))

    def line(self, elapsed: float) -> str:
        """`stage: what done [of total] unit in elapsed [, about left]`."""
        done = self._shown(self.done)
        if self.total is None or not self.done:
            return f"{self.stage}: {self.what} {done} {self.unit} in {elapsed:.0f} s"
        left = elapsed * (self.total - self.done) / self.done
        return (
            f"{self.stage}: {self.what} {done} of {self._shown(self.total)} {self.unit} in {elapsed:.0f} s, "
            f"about {_duration(left)} left"
        )

    def _shown(self, amount: float) -> str:
        value = amount / self.scale
        return f"{value:,.1f}" if self.scale != 1.0 else f"{value:,.0f}"


def _duration(seconds: float) -> str:
    """Seconds as people read a time left: 45 s, 3 min 20 s, 2 h 5 min."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"
