"""How many GPUs the server machine has, as tritonserver would see them.

Triton decides at load time whether KIND_GPU instance groups can run, and which
`gpus` ids are valid (ids count from 0 over the visible devices). tritonctl answers
the same question offline:

``tritonctl validate`` checks against the target server's GPUs instead: ``--gpus N``
(or ``TRITONCTL_ASSUME_GPUS=N``), ``--gpus local`` for this machine, unknown otherwise
(``target_gpus``). The library and the other commands use ``detect_gpus``:

1. ``TRITONCTL_ASSUME_GPUS=N`` (N >= 0) wins: validate as if the server had N GPUs.
   CI machines without a GPU set it to check repositories meant for GPU servers.
2. Otherwise the local machine is asked, once per process: ``nvidia-smi -L`` lists
   one ``GPU <i>: ...`` line per device; without nvidia-smi, the driver's
   ``/proc/driver/nvidia/gpus/*`` entries are counted. ``CUDA_VISIBLE_DEVICES``
   narrows the count the way CUDA does for the server.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ASSUME_GPUS_ENV = "TRITONCTL_ASSUME_GPUS"
PROC_GPUS = Path("/proc/driver/nvidia/gpus")
MAX_GPUS = 1024  # far above any one machine; a larger count is a typo


@dataclass(frozen=True)
class GpuInfo:
    count: int
    source: str  # how the count was found, for messages: "TRITONCTL_ASSUME_GPUS=2", "nvidia-smi", ...

    @property
    def ids(self) -> list[int]:
        return list(range(self.count))


def parse_nvidia_smi_list(output: str) -> int:
    """Number of devices in ``nvidia-smi -L`` output (MIG lines are not devices)."""
    return sum(1 for line in output.splitlines() if re.match(r"\s*GPU \d+:", line))


def visible_count(physical: int, cuda_visible_devices: str | None) -> int:
    """Devices a CUDA process sees given CUDA_VISIBLE_DEVICES (unset: all of them).

    CUDA stops at the first entry that is not a valid device, so "0,7,1" on a
    two-GPU machine shows one device; UUID and MIG entries count as one each.
    """
    if cuda_visible_devices is None:
        return physical
    count = 0
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not entry:
            break
        if entry.isdigit():
            if int(entry) >= physical:
                break
        elif not entry.startswith(("GPU-", "MIG-")):
            break
        count += 1
    return count


@lru_cache(maxsize=1)
def _physical_gpus() -> tuple[int, str]:
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            done = None
        if done is not None and done.returncode == 0:
            return parse_nvidia_smi_list(done.stdout), "nvidia-smi -L"
    try:
        return sum(1 for p in PROC_GPUS.iterdir() if p.is_dir()), str(PROC_GPUS)
    except OSError:
        return 0, "no NVIDIA driver found"


def assumed_gpus() -> int | None:
    """The count from TRITONCTL_ASSUME_GPUS, or None when unset or not a number >= 0."""
    raw = os.environ.get(ASSUME_GPUS_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) <= MAX_GPUS else None


def local_gpus() -> GpuInfo:
    """The GPUs a server started on this machine would see."""
    physical, source = _physical_gpus()
    count = visible_count(physical, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return GpuInfo(count, source)


def detect_gpus() -> GpuInfo:
    assumed = assumed_gpus()
    if assumed is not None:
        return GpuInfo(assumed, f"{ASSUME_GPUS_ENV}={assumed}")
    return local_gpus()


def target_gpus(value: str | None, source: str = "--gpus") -> GpuInfo | None:
    """The GPUs ``validate --gpus VALUE`` means: a count N >= 0, "local" for this
    machine's, None (unset or empty) for unknown. Raises ValueError on anything else."""
    text = (value or "").strip()
    if not text:
        return None
    if text.lower() == "local":
        return local_gpus()
    if text.isdigit() and int(text) > MAX_GPUS:
        raise ValueError(f"{source} {text} is more GPUs than one server has (at most {MAX_GPUS}); give the "
                         "target server's GPU count")
    if text.isdigit():
        return GpuInfo(int(text), f"{source} {int(text)}" if source.startswith("-") else f"{source}={int(text)}")
    raise ValueError(f"{source} takes a GPU count (0, 1, 2, ...) or 'local', not {text!r}")
