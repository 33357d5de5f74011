"""Hardware gatherers: CPU model, identity, caches and the instruction sets that change numerics, OS and kernel,
GPUs.

Virtual machines often show a generic model name ("AMD EPYC") for CPUs of different generations, whose kernels
may block and sum in another order (oneDNN and Eigen size their blocks by the caches): the vendor's family, model
and stepping numbers and the cache sizes tell them apart where the name cannot.

GPU facts come from three places, each optional: the Keras backend's devices, `nvidia-smi`, and NVML
(`nvidia-ml-py`, in the `gpu` extra). On a machine without a GPU the record says so plainly.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

from tracking.determinism import settings
from tracking.determinism.backend import configured

NUMERIC_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "neon", "asimd")
# Linux's description of the first CPU's caches, one index* folder per cache.
CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
_CACHE_KINDS = {"Data": "d", "Instruction": "i", "Unified": ""}
NVIDIA_SMI_FIELDS = ("index", "name", "driver_version", "memory.total", "compute_cap", "uuid")


def gather_cpu(cpuinfo: Path = Path("/proc/cpuinfo"), caches: Path = CPU_CACHES) -> dict[str, Any]:
    parsed = parse_cpuinfo(cpuinfo.read_text() if cpuinfo.is_file() else "")
    return {
        "model": parsed.model or platform.processor() or platform.machine(),
        "id": parsed.identity,
        "architecture": platform.machine(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cache": _read_caches(caches),
        "numeric_flags": {flag: flag in parsed.flags for flag in NUMERIC_FLAGS},
    }


class CpuInfo(NamedTuple):
    """The first processor's model name, identity numbers (None where the text has none) and flag set."""

    model: str | None
    identity: str | None
    flags: set[str]


def parse_cpuinfo(text: str) -> CpuInfo:
    """The first processor's fields of /proc/cpuinfo text (x86 or Arm; some Arm kernels name the board last)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    model = fields.get("model name") or fields.get("hardware") or fields.get("cpu model")
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    return CpuInfo(model, _identity(fields), flags)


def _identity(fields: dict[str, str]) -> str | None:
    """`GenuineIntel family 6 model 143 stepping 8` (x86), `implementer 0x41 part 0xd0c variant 0x3 revision 1`
    (Arm): the numbers that name a CPU generation when the model name does not."""
    if "cpu family" in fields:
        names = (("vendor_id", ""), ("cpu family", "family "), ("model", "model "), ("stepping", "stepping "))
    else:
        names = tuple((f"cpu {name}", f"{name} ") for name in ("implementer", "part", "variant", "revision"))
    found = [f"{label}{fields[key]}" for key, label in names if fields.get(key)]
    return " ".join(found) or None


def _read_caches(folder: Path) -> dict[str, str]:
    """The first CPU's cache sizes by level and kind (`l1d`, `l1i`, `l2`, `l3`) as Linux's sysfs gives them
    (`48K`); empty where the kernel does not say."""
    caches = {}
    for index in sorted(folder.glob("index[0-9]*")):
        try:
            level, kind, size = ((index / name).read_text().strip() for name in ("level", "type", "size"))
        except OSError:
            continue
        caches[f"l{level}{_CACHE_KINDS.get(kind, '')}"] = size
    return caches


def gather_os() -> dict[str, Any]:
    return {
        "system": platform.system(),
        "release": platform.release(),
        "version": platform.version(),
        "platform": platform.platform(),
    }


def gather_gpus() -> dict[str, Any]:
    """Every GPU with model, driver, memory and compute capability, which source said so, and the GPUs Keras's
    backend sees in this process (`backend_visible`: what training can use, after CUDA_VISIBLE_DEVICES)."""
    visible = settings.module().visible_gpus()
    smi = query_nvidia_smi()
    devices = smi if smi else query_nvml()
    source = "nvidia-smi" if smi else ("nvml" if devices else None)
    if not devices and visible:
        devices, source = visible, configured()
    record: dict[str, Any] = {
        "count": len(devices),
        "devices": devices,
        "source": source,
        "backend_visible": visible,
    }
    if not devices:
        record["note"] = f"no GPU: nvidia-smi and NVML found none and {configured()} sees none; training ran on the CPU"
    return record


def query_nvidia_smi(binary: str = "nvidia-smi") -> list[dict[str, Any]]:
    """GPUs as `nvidia-smi` reports them; empty where it is absent or fails."""
    path = shutil.which(binary)
    if path is None:
        return []
    command = [path, f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=15, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_nvidia_smi(done.stdout)


def parse_nvidia_smi(text: str) -> list[dict[str, Any]]:
    """Rows of `nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap,uuid` CSV output."""
    gpus = []
    for line in text.strip().splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(NVIDIA_SMI_FIELDS):
            continue
        index, name, driver, memory, capability, uuid = cells
        gpus.append(
            {
                "index": _int_or_none(index),
                "name": name,
                "driver": driver,
                "memory_mib": _int_or_none(memory),
                "compute_capability": _na_to_none(capability),
                "uuid": _na_to_none(uuid),
            }
        )
    return gpus


def query_nvml() -> list[dict[str, Any]]:
    """GPUs as NVML reports them; empty where `nvidia-ml-py` or the driver is absent."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(
                {
                    "index": index,
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "driver": driver,
                    "memory_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024),
                    "compute_capability": f"{major}.{minor}",
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                }
            )
        return gpus
    finally:
        pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _int_or_none(value: str) -> int | None:
    try:
        return int(float(value))
    except ValueError:
        return None


def _na_to_none(value: str) -> str | None:
    return None if value.strip("[]").lower() in ("n/a", "not supported", "") else value
