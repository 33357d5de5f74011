"""Progress of long work: a line at most every 30 s, with the count, the total and the time left; short work says
nothing."""

from __future__ import annotations

import pytest

from tracking import progress


def test_long_work_says_its_count_total_and_time_left_at_most_every_interval(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    hashing = progress.Progress("prepare", "hashed", "GB", 4e9, progress.GB)
    reading = progress.Progress("prepare", "read", "batches of the loader's dataset")
    with caplog.at_level("INFO", logger="tracking.progress"):
        for at, amount in ((10, 1e9), (30, 1e9), (40, 1e9), (65, 5e8)):
            clock[0] = at
            hashing.advance(amount)
        clock[0] = 3725
        reading.advance(120)
    assert [record.getMessage() for record in caplog.records] == [
        "prepare: hashed 2.0 of 4.0 GB in 30 s, about 30 s left",
        "prepare: hashed 3.5 of 4.0 GB in 65 s, about 9 s left",
        "prepare: read 120 batches of the loader's dataset in 3725 s",
    ]
    assert progress._duration(200) == "3 min 20 s" and progress._duration(7500) == "2 h 5 min"
