"""The Python that checks manifests with KServe's own models in the tests, as `tritonctl export
kserve` picks it: $TRITONCTL_KSERVE_PYTHON when set (.ci/run makes a virtualenv for kserve, which
caps pandas below 3), else this one; None when that Python has no kserve."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

HAS_KSERVE = "import importlib.util as u, sys; sys.exit(not (u.find_spec('kserve') and u.find_spec('kubernetes')))"


@functools.cache
def kserve_python() -> str | None:
    python = os.environ.get("TRITONCTL_KSERVE_PYTHON") or sys.executable
    try:
        found = subprocess.run([python, "-c", HAS_KSERVE], capture_output=True, timeout=60).returncode == 0
    except OSError:
        found = False
    return python if found else None


needs_kserve = pytest.mark.skipif(
    kserve_python() is None,
    reason="the manifests are checked with KServe's own models: pip install 'tritonctl[export]' here, or point "
    "TRITONCTL_KSERVE_PYTHON at a Python that has kserve and kubernetes (.ci/run makes one)")
