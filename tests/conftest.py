"""Session-wide test settings."""

from __future__ import annotations

import os
import sys

import pytest

_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """End the process with pytest's own status as soon as pytest is done. The tests start servers
    in this process whose native threads (gRPC's C++ core, libevent, onnxruntime's pools) may still
    be winding down when the interpreter finalizes; in a few full runs that finalization crashed
    (status 139) after every test had passed and the report was written. Nothing is left to do
    after the last hook, so the interpreter's teardown is skipped."""
    if _EXIT_STATUS and os.environ.get("TRITONCTL_TESTS_FINALIZE") != "1":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
