"""What a benchmarked run waited on: each phase's wall time, the main thread's context switches in it, and its
wait channel (the kernel function it sleeps in, /proc/<pid>/task/<tid>/wchan) sampled every 50 ms, so a slow run
says where its time went and what held it: its own work, a thread of this process, the disk, a socket, or CPU
taken by other processes. Linux only (/proc).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_S = 0.05
# Not sleeping: on a CPU, or waiting for one (`involuntary` switches count the second).
RUNNING = "running"
# What the common wait channels mean, by the start of their kernel function's name.
MEANINGS = (
    ("futex", "a lock or another thread of this process"),
    ("io_schedule", "the disk"),
    ("folio_wait", "the disk"),
    ("wait_on_page", "the disk"),
    ("jbd2", "the disk (the file system's journal)"),
    ("ext4_sync", "the disk (fsync)"),
    ("xfs_", "the disk"),
    ("do_epoll_wait", "a socket or pipe"),
    ("do_select", "a socket or pipe"),
    ("do_sys_poll", "a socket or pipe"),
    ("poll_schedule", "a socket or pipe (a child process's output, a server)"),
    ("sk_wait", "a socket"),
    ("wait_woken", "a socket"),
    ("unix_stream", "a socket"),
    ("pipe_", "a pipe"),
    ("hrtimer_nanosleep", "a sleep"),
    ("do_nanosleep", "a sleep"),
    ("do_wait", "a child process"),
    (RUNNING, "the CPU (running, or runnable while other processes had it)"),
)


def meaning(channel: str) -> str:
    """What the wait channel `channel` is a wait for, where it is a common one."""
    return next((what for start, what in MEANINGS if channel.startswith(start)), "other")


def _switches(tid: int) -> tuple[int, int]:
    """The thread's voluntary and involuntary context switches so far."""
    found = {}
    for line in Path(f"/proc/self/task/{tid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            found[name] = int(value)
    return found["voluntary_ctxt_switches"], found["nonvoluntary_ctxt_switches"]


@dataclass
class Phase:
    """One phase of a run: its wall seconds, the main thread's switches, and its wait-channel samples."""

    seconds: float = 0.0
    voluntary: int = 0
    involuntary: int = 0
    channels: Counter = field(default_factory=Counter)


class WaitSampler:
    """Samples the wait channel of the thread that made it (the main thread) every `SAMPLE_S`, counting each
    sample under the phase the thread is in. A run is timed in laps: `lap(phases, name)` ends the phase under way
    and starts `name` (added to it when the name comes again), `lap(phases, None)` ends the last."""

    def __init__(self) -> None:
        self.tid = threading.get_native_id()
        self._path = Path(f"/proc/self/task/{self.tid}/wchan")
        self._phase: Phase | None = None
        self._began = 0.0
        self._switches = (0, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="wait-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            phase = self._phase
            if phase is not None:
                channel = self._path.read_text().strip()
                phase.channels[RUNNING if channel in ("", "0") else channel] += 1

    def lap(self, phases: dict[str, Phase], name: str | None) -> None:
        """End the phase under way (if any) and start phase `name` of `phases` (none when `name` is None)."""
        now, switches = time.perf_counter(), _switches(self.tid)
        ended, self._phase = self._phase, None
        if ended is not None:
            ended.seconds += now - self._began
            ended.voluntary += switches[0] - self._switches[0]
            ended.involuntary += switches[1] - self._switches[1]
        if name is not None:
            self._began, self._switches = now, switches
            self._phase = phases.setdefault(name, Phase())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def described(phase: Phase, top: int = 3) -> str:
    """The phase's main waits, e.g. `futex_wait_queue 1.20 s (a lock or another thread of this process)`, with its
    context switches."""
    waits = ", ".join(
        f"{channel} {count * SAMPLE_S:.2f} s ({meaning(channel)})" for channel, count in phase.channels.most_common(top)
    )
    return f"{waits or 'no sample'}; {phase.voluntary} voluntary / {phase.involuntary} involuntary switches"
