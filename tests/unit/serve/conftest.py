"""Fixtures shared by the serve unit tests."""

from __future__ import annotations

import pytest

from tritonctl.serve.core.scheduler import BatchingOptions, DynamicBatchScheduler
from tritonctl.serve.core.stats import ModelStats


@pytest.fixture
def scheduler_factory():
    """Makes schedulers of model "m" whose instances run batches with ``instance.run``; stops
    them all afterwards."""
    made: list[DynamicBatchScheduler] = []

    def make(options: BatchingOptions, instance, count: int = 1) -> DynamicBatchScheduler:
        scheduler = DynamicBatchScheduler("m", options, [object()] * count, instance.run, ModelStats("m", "1"))
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        scheduler.stop(5)
