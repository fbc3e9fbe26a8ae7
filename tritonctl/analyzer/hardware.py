"""The hardware a measurement was made on, recorded with every point.

Throughput and latency hold for the machine that measured them: analyze never ranks points of
different hardware against each other. The fingerprint is what decides that: the CPU model, the
logical cores this process may use, the GPUs (names and memory) and the memory, plus
``TRITONCTL_HARDWARE_TAG`` when set, for machines these cannot tell apart but that measure
differently (another driver, a VM with a CPU quota). Its ``id`` (a hash of those values) goes with
each point; the checkpoint reuses a point only for the same ``id``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

TAG_ENV = "TRITONCTL_HARDWARE_TAG"


def fingerprint() -> dict:
    """This machine's fingerprint: the values and their ``id``."""
    values = _values()
    tag = os.environ.get(TAG_ENV, "").strip()
    if tag:
        values = {**values, "tag": tag}
    return {"id": fingerprint_id(values), **values}


def fingerprint_id(values: dict) -> str:
    """A short hash of the fingerprint's values (the ``id`` key itself is left out)."""
    canonical = json.dumps({k: v for k, v in values.items() if k != "id"}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def describe(values: dict) -> str:
    """One line: ``Intel Xeon ..., 16 cores, 125 GiB, 1 x NVIDIA H100 80GB``."""
    gpus = values.get("gpus") or []
    names: dict[str, int] = {}
    for gpu in gpus:
        names[gpu] = names.get(gpu, 0) + 1
    parts = [values.get("cpu") or "unknown CPU", f"{values.get('cores')} cores", f"{values.get('memory_gib')} GiB"]
    parts += [f"{count} x {name}" for name, count in names.items()] or ["no GPU"]
    if values.get("tag"):
        parts.append(f"tag {values['tag']}")
    return ", ".join(parts)


@lru_cache(maxsize=1)
def _values() -> dict:
    return {"cpu": _cpu_model(), "cores": _cores(), "memory_gib": _memory_gib(), "gpus": _gpus(),
            "machine": platform.machine()}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "cpu model") and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _memory_gib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError, AttributeError):
        return 0


def _gpus() -> list[str]:
    """``NAME (MEMORY)`` of each GPU nvidia-smi lists, in its order; none without nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        output = subprocess.run([smi, "--query-gpu=name,memory.total", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_gpu_list(output)


def parse_gpu_list(output: str) -> list[str]:
    """``nvidia-smi --query-gpu=name,memory.total --format=csv,noheader`` -> ``NAME (MEMORY)`` each."""
    gpus = []
    for line in output.splitlines():
        name, _, memory = line.partition(",")
        if name.strip():
            gpus.append(f"{name.strip()} ({memory.strip()})" if memory.strip() else name.strip())
    return gpus
