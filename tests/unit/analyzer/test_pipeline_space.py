"""The pieces of a pipeline run that need no server: the composing-models parameter, the joint
knobs (their names, totals and checkpoint records)."""

from __future__ import annotations

import json
from dataclasses import asdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritonctl.analyzer.pipeline_space import BLS_PARAMETER, PipelineKnobs, composing_from_config, knobs_from_record
from tritonctl.analyzer.search import Knobs
from tritonctl.repo_schema.schema import model_config_pb2

NAMES = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
KNOBS = st.builds(Knobs, max_batch_size=st.integers(0, 64), max_queue_delay_us=st.integers(0, 10_000),
                  instance_count=st.integers(1, 8), instance_kind=st.sampled_from(["KIND_CPU", "KIND_GPU"]),
                  preferred_batch_size=st.integers(0, 32), dynamic_batching=st.booleans(),
                  max_queue_size=st.integers(0, 64), queue_timeout_us=st.integers(0, 10_000))


# The name regex is compiled on first use, which a cold machine can take over a second for.
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(NAMES, min_size=1, max_size=5), st.lists(st.sampled_from(["", " ", "  ", "\t"]), min_size=10,
                                                           max_size=10))
def test_the_parameter_names_the_steps_whatever_the_spacing(names, pads):
    config = model_config_pb2().ModelConfig()
    config.parameters[BLS_PARAMETER].string_value = ",".join(
        f"{pads[i % len(pads)]}{name}{pads[(i + 1) % len(pads)]}" for i, name in enumerate(names)) + ","
    assert composing_from_config(config) == tuple(names)


def test_no_parameter_no_steps():
    assert composing_from_config(model_config_pb2().ModelConfig()) == ()


@given(st.lists(st.tuples(NAMES, KNOBS), min_size=1, max_size=4, unique_by=lambda t: t[0]))
def test_joint_knobs_round_trip_through_a_checkpoint_record(steps):
    knobs = PipelineKnobs(tuple(n for n, _ in steps), tuple(k for _, k in steps))
    assert knobs_from_record(json.loads(json.dumps(asdict(knobs)))) == knobs
    assert knobs.config_id == "+".join(f"{n}:{k.config_id}" for n, k in steps)
    assert knobs.instance_count == sum(k.instance_count for _, k in steps)
    assert knobs.resources[0] == knobs.instance_count
    for name, step in steps:
        assert knobs.step(name) == step
    single = steps[0][1]
    assert knobs_from_record(json.loads(json.dumps(asdict(single)))) == single
