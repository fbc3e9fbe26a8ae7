"""The search space: option spellings, candidate configs built from the effective config, and
candidates that are equivalent or invalid."""

from __future__ import annotations

import pytest
from helpers.analyze_models import fixed_batch_model, onnx_model

from tritonctl.analyzer.search import (AUTO, AnalyzeError, SearchSpace, build_candidates, load_model_config,
                                       validation_error)
from tritonctl.analyzer.space_options import (parse_counts, parse_delays, parse_kinds, parse_powers,
                                              parse_preferred)
from tritonctl.repo_schema.gpus import ASSUME_GPUS_ENV
from tritonctl.repo_schema.schema import model_config_pb2


@pytest.mark.parametrize("text, values", [
    ("1:64", (1, 2, 4, 8, 16, 32, 64)), ("4:40", (4, 8, 16, 32)), ("8,1,2,8", (1, 2, 8)), ("3:3", ()),
])
def test_powers_of_two_ranges(text, values):
    if not values:
        with pytest.raises(AnalyzeError, match="no power of two between 3 and 3"):
            parse_powers(text, "--batch-sizes")
        return
    assert parse_powers(text, "--batch-sizes") == values


@pytest.mark.parametrize("call, message", [
    (lambda: parse_powers("0:8", "--batch-sizes"), "needs 1 <= START <= END"),
    (lambda: parse_powers("a,b", "--concurrency"), "--concurrency 'a,b': expected whole numbers"),
    (lambda: parse_delays("100,-5"), "values must be at least 0"),
    (lambda: parse_counts("4:2"), "needs 1 <= START <= END"),
    (lambda: parse_kinds("tpu"), "unknown kind 'tpu'; use cpu, gpu or model"),
    (lambda: parse_preferred(","), "use none, auto or sizes"),
])
def test_bad_values_say_what_to_write(call, message):
    with pytest.raises(AnalyzeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_other_spellings():
    assert parse_counts("1:3") == (1, 2, 3) and parse_counts("2,1") == (1, 2)
    assert parse_delays("0, 500,100") == (0, 100, 500)
    assert parse_kinds("CPU,kind_gpu,cpu") == ("KIND_CPU", "KIND_GPU")
    assert parse_preferred("none,4") == (0, 4) and parse_preferred("auto") == (AUTO, 0)


def test_candidates_change_only_the_knobs_and_validate_clean(tmp_path):
    model_dir = onnx_model(tmp_path, config="dynamic_batching { max_queue_delay_microseconds: 100 }")
    _, base = load_model_config(tmp_path, "add_sub")
    space = SearchSpace(batch_sizes=(1, 4, 16), queue_delays_us=(0, 500), instance_counts=(1, 2),
                        preferred_batch_sizes=parse_preferred("none,2"), concurrency=(1,)).resolved(base)
    candidates = build_candidates(model_dir, base, space)
    ids = [c.config_id for c in candidates.candidates]
    # A batch of 1 never waits: one b1 config per instance count, not one per delay.
    assert ids.count("b1-d0-i1-cpu") == 1 and "b1-d500-i1-cpu" not in ids
    assert {"b4-d500-i2-cpu-p2", "b16-d0-i1-cpu-p2", "b16-d500-i2-cpu"} <= set(ids)
    assert len(ids) == 2 * (1 + 2 * 2 * 2) and len(set(ids)) == len(ids)
    chosen = next(c for c in candidates.candidates if c.config_id == "b16-d500-i2-cpu-p2")
    config = chosen.config
    assert config.max_batch_size == 16 and config.dynamic_batching.max_queue_delay_microseconds == 500
    assert list(config.dynamic_batching.preferred_batch_size) == [2]
    kinds = config.instance_group[0].DESCRIPTOR.fields_by_name["kind"].enum_type
    assert [(g.count, kinds.values_by_number[g.kind].name) for g in config.instance_group] == [(2, "KIND_CPU")]
    assert [t.name for t in config.input] == ["INPUT0", "INPUT1"]  # the rest is the model's own config
    assert validation_error(model_dir, chosen.pbtxt("a header")) is None
    # The default config (delay 100, not in the space) is measured as its own candidate.
    assert candidates.default.config_id == "default" and candidates.all[0] is candidates.default


def test_candidates_are_planned_on_the_gpus_the_server_gives_the_backend(tmp_path, monkeypatch):
    """On a GPU machine, a model without instance_group runs on the GPU (Triton's KIND_AUTO), unless
    the engine's server cannot run its backend there (the bundled server with onnxruntime's CPU
    build): its candidates are then planned on the CPU, as that server will run them."""
    monkeypatch.setenv(ASSUME_GPUS_ENV, "1")
    onnx_model(tmp_path, config=None)
    asked = []

    def cpu_only(backend: str) -> tuple[int, ...]:
        asked.append(backend)
        return ()

    kind_names = model_config_pb2().ModelInstanceGroup.Kind.Name
    _, on_driver_gpus = load_model_config(tmp_path, "add_sub")
    _, on_server_gpus = load_model_config(tmp_path, "add_sub", cpu_only)
    assert [(kind_names(g.kind), list(g.gpus)) for g in on_driver_gpus.instance_group] == [("KIND_GPU", [0])]
    assert [(kind_names(g.kind), g.count) for g in on_server_gpus.instance_group] == [("KIND_CPU", 2)]
    assert asked == ["onnxruntime"]
    assert SearchSpace().resolved(on_server_gpus).instance_kinds == ("KIND_CPU",)


def test_default_config_inside_the_space_is_that_candidate(tmp_path):
    model_dir = onnx_model(tmp_path, config=None)  # auto-complete: max_batch_size 4, 2 CPU instances
    _, base = load_model_config(tmp_path, "add_sub")
    candidates = build_candidates(model_dir, base, SearchSpace(batch_sizes=(4, 8), queue_delays_us=(0,),
                                                               instance_counts=(1, 2)).resolved(base))
    assert candidates.default.config_id == "b4-d0-i2-cpu" and candidates.default.is_default
    assert len(candidates.all) == len(candidates.candidates) == 4


def test_invalid_candidates_are_dropped_with_the_reason(tmp_path):
    model_dir = onnx_model(tmp_path)
    _, base = load_model_config(tmp_path, "add_sub")
    space = SearchSpace(batch_sizes=(8,), queue_delays_us=(0,), instance_counts=(1,),
                        instance_kinds=("KIND_CPU", "KIND_GPU")).resolved(base)
    candidates = build_candidates(model_dir, base, space)
    assert [c.config_id for c in candidates.candidates] == ["b8-d0-i1-cpu"]
    assert candidates.dropped == ["b8-d0-i1-gpu: IG04 instance group 'add_sub_0' has kind KIND_GPU but no GPUs "
                                  "are available"]
    only_gpu = SearchSpace(batch_sizes=(8,), queue_delays_us=(0,), instance_counts=(1,),
                           instance_kinds=("KIND_GPU",)).resolved(base)
    with pytest.raises(AnalyzeError, match="no valid candidate config .*b8-d0-i1-gpu: IG04"):
        build_candidates(model_dir, base, only_gpu)


def test_model_without_batch_dimension_tunes_instances_only(tmp_path):
    model_dir = fixed_batch_model(tmp_path)
    _, base = load_model_config(tmp_path, "fixed")
    candidates = build_candidates(model_dir, base, SearchSpace(instance_counts=(1, 2, 3)).resolved(base))
    assert [c.config_id for c in candidates.candidates] == ["b0-nobatcher-i1-cpu", "b0-nobatcher-i2-cpu",
                                                            "b0-nobatcher-i3-cpu"]
    assert not any(c.config.HasField("dynamic_batching") for c in candidates.candidates)


def test_models_analyze_refuses(tmp_path):
    with pytest.raises(AnalyzeError, match=r"model 'nope' is not in .* \(models there: add_sub\)"):
        onnx_model(tmp_path)
        load_model_config(tmp_path, "nope")
    broken = onnx_model(tmp_path, "broken")
    (broken / "config.pbtxt").write_text('backend: "onnxruntime"\nmax_batch_size: 8\ninput [ { name: "X" } ]\n')
    with pytest.raises(AnalyzeError, match=r"model 'broken' does not load as configured .*tritonctl validate"):
        load_model_config(tmp_path, "broken")
    on_gpu = onnx_model(tmp_path, "on_gpu", config="instance_group [ { kind: KIND_GPU } ]")
    with pytest.raises(AnalyzeError, match=r"\(AC03 .*no GPUs are available\).*fix it first: use kind: KIND_CPU"):
        load_model_config(tmp_path, "on_gpu")
    sequence = onnx_model(tmp_path, "sequence", config="sequence_batching { }")
    assert sequence.is_dir()
    with pytest.raises(AnalyzeError, match="uses the sequence batcher"):
        load_model_config(tmp_path, "sequence")
