"""The analyzer's unit tests plan candidates for a machine without GPUs, whatever machine runs them
(on a GPU machine, a model without instance_group would get KIND_GPU candidates)."""

from __future__ import annotations

import pytest

from tritonctl.repo_schema.gpus import ASSUME_GPUS_ENV


@pytest.fixture(scope="module", autouse=True)
def no_gpus():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ASSUME_GPUS_ENV, "0")
        yield
