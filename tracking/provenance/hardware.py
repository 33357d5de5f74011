"""Hardware gatherers: CPU model and the instruction sets that change numerics, OS and kernel, GPUs.

GPU facts come from three places, each optional: TensorFlow's device details, `nvidia-smi`, and NVML
(`nvidia-ml-py`, in the `gpu` extra). On a machine without a GPU the record says so plainly.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

NUMERIC_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "neon", "asimd")
NVIDIA_SMI_FIELDS = ("index", "name", "driver_version", "memory.total", "compute_cap", "uuid")


def gather_cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    model, flags = parse_cpuinfo(cpuinfo.read_text() if cpuinfo.is_file() else "")
    return {
        "model": model or platform.processor() or platform.machine(),
        "architecture": platform.machine(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "numeric_flags": {flag: flag in flags for flag in NUMERIC_FLAGS},
    }


def parse_cpuinfo(text: str) -> tuple[str | None, set[str]]:
    """The first processor's model name and its flag set from /proc/cpuinfo text (x86 or Arm)."""
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and model is None:
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, flags


def gather_os() -> dict[str, Any]:
    return {
        "system": platform.system(),
        "release": platform.release(),
        "version": platform.version(),
        "platform": platform.platform(),
    }


def gather_gpus() -> dict[str, Any]:
    """Every GPU with model, driver, memory and compute capability, and which source said so."""
    tf_devices = tensorflow_gpus()
    smi = query_nvidia_smi()
    devices = smi if smi else query_nvml()
    source = "nvidia-smi" if smi else ("nvml" if devices else None)
    if not devices and tf_devices:
        devices, source = tf_devices, "tensorflow"
    record: dict[str, Any] = {
        "count": len(devices),
        "devices": devices,
        "source": source,
        "tensorflow_visible": tf_devices,
    }
    if not devices:
        record["note"] = "no GPU: nvidia-smi and NVML found none and TensorFlow sees none; training ran on the CPU"
    return record


def tensorflow_gpus() -> list[dict[str, Any]]:
    import tensorflow as tf

    found = []
    for device in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(device)
        capability = details.get("compute_capability")
        found.append(
            {
                "name": details.get("device_name", device.name),
                "tf_device": device.name,
                "compute_capability": ".".join(map(str, capability)) if capability else None,
            }
        )
    return found


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
