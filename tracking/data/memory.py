"""The memory this process may still take: the machine's available memory, or less where a memory cgroup (a
container, a job scheduler's allocation) limits it. A check against the machine alone passes inside a container
whose limit is far below it, and the kernel then kills the process instead of a line saying why."""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
# A limit at or above this is none (cgroup v1 writes 2^63 rounded down to a page for "no limit").
NO_LIMIT = 2**62


def available_memory() -> int:
    """Bytes this process may still allocate: the least of the machine's available memory and each enclosing
    cgroup's limit less what the cgroup holds (its file cache, which the kernel reclaims, left out)."""
    import psutil

    found = psutil.virtual_memory().available
    for limit, used in _cgroup_limits():
        found = min(found, max(0, limit - used))
    return found


def _cgroup_limits() -> list[tuple[int, int]]:
    """(limit, bytes held less reclaimable file cache) of this process's memory cgroup and its parents, v2 or v1."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and (CGROUP_ROOT / "cgroup.controllers").is_file():
            found += _walk(CGROUP_ROOT, path, "memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):
            found += _walk(
                CGROUP_ROOT / "memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
            )
    return found


def _walk(mount: Path, path: str, limit_file: str, usage_file: str, cache_key: str) -> list[tuple[int, int]]:
    """The limits of the cgroup at `path` under `mount` and of every parent that sets one."""
    found = []
    folder = mount / path.lstrip("/")
    while folder.is_relative_to(mount):
        try:
            limit = (folder / limit_file).read_text().strip()
            usage = int((folder / usage_file).read_text())
            stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines())
        except (OSError, ValueError):
            limit = "max"
        else:
            if limit != "max" and int(limit) < NO_LIMIT:
                found.append((int(limit), usage - int(stat.get(cache_key, 0))))
        if folder == mount:
            break
        folder = folder.parent
    return found
