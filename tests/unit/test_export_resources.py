"""Pod resources from instance groups, as `tritonctl export kserve` requests them (no kserve needed)."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.serve_models import add_sub_onnx
from tritonctl.export.kserve import ExportOptions, manifest, plan_services
from tritonctl.export.names import ExportInputError
from tritonctl.export.resources import MEMORY_BASE, MEMORY_HEADROOM, MEMORY_PER_INSTANCE, MIB, pod_resources
from tritonctl.repo_schema.context import CheckOptions
from tritonctl.repo_schema.validate import validate_repository

CONFIG = """
name: "{name}"
backend: "onnxruntime"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }},
        {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }},
         {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
{groups}
"""


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("export_resources") / "model.onnx"
    add_sub_onnx(path)
    return path


def _repository(root: Path, models: dict[str, str], onnx_file: Path):
    for name, groups in models.items():
        (root / name / "1").mkdir(parents=True)
        shutil.copy(onnx_file, root / name / "1" / "model.onnx")
        (root / name / "config.pbtxt").write_text(CONFIG.format(name=name, groups=groups))
    repo = validate_repository(root, None, CheckOptions())
    assert not any(d.severity.name == "ERROR" for ctx in repo.models.values() for d in ctx.diagnostics)
    return repo


def _group(kind: str, count: int, gpus: list[int]) -> str:
    parts = [f"count: {count}"] + ([f"kind: {kind}"] if kind != "KIND_AUTO" else [])
    if gpus:
        parts.append(f"gpus: [ {', '.join(map(str, gpus))} ]")
    return "{ " + " ".join(parts) + " }"


@pytest.mark.parametrize(("groups", "gpus", "cpus"), [
    ("instance_group [ { kind: KIND_CPU count: 2 } ]", 0, 2),
    ("instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0, 1 ] } ]", 2, 1),
    ("instance_group [ { kind: KIND_GPU count: 3 } ]", 1, 1),
    ("instance_group [ { kind: KIND_GPU count: 1 gpus: [ 3 ] }, { kind: KIND_CPU count: 4 } ]", 4, 4),
    ("", 0, 2),  # no groups, no GPU: onnxruntime's two CPU instances, as Triton makes them
])
def test_instance_groups_become_gpu_and_cpu_requests(tmp_path, groups, gpus, cpus, onnx_file):
    resources = pod_resources(list(_repository(tmp_path, {"m": groups}, onnx_file).models.values()))
    assert (resources.gpus, resources.cpus) == (gpus, cpus)
    amounts = resources.kubernetes()
    assert amounts["requests"] == amounts["limits"]
    assert amounts["requests"].get("nvidia.com/gpu") == (str(gpus) if gpus else None)


def test_a_group_left_to_kind_auto_follows_the_gpus_another_model_brings(tmp_path, onnx_file):
    repo = _repository(tmp_path, {"auto": "", "gpu": "instance_group [ { kind: KIND_GPU count: 1 } ]"}, onnx_file)
    resources = pod_resources(list(repo.models.values()))
    by_name = {m.name: m for m in resources.models}
    # On a pod with a GPU, Triton puts the auto group of the onnxruntime model on it.
    assert resources.gpus == 1 and by_name["auto"].gpu_instances == 1 and by_name["auto"].cpu_instances == 0


def test_memory_estimate_follows_the_stated_formula(tmp_path, onnx_file):
    repo = _repository(tmp_path, {"m": "instance_group [ { kind: KIND_CPU count: 3 } ]"}, onnx_file)
    (tmp_path / "m" / "1" / "weights.bin").write_bytes(b"\0" * (4 * MIB))
    resources = pod_resources(list(repo.models.values()))
    files = (tmp_path / "m" / "1" / "model.onnx").stat().st_size + 4 * MIB
    assert resources.memory_bytes == math.ceil(MEMORY_HEADROOM * (MEMORY_BASE + 3 * files + 3 * MEMORY_PER_INSTANCE))
    assert "estimate" in resources.explanation()


def test_only_the_versions_the_policy_serves_are_counted(tmp_path, onnx_file):
    (tmp_path / "m" / "2").mkdir(parents=True)
    shutil.copy(onnx_file, tmp_path / "m" / "2" / "model.onnx")
    repo = _repository(tmp_path, {"m": "instance_group [ { kind: KIND_CPU count: 1 } ]"}, onnx_file)
    (tmp_path / "m" / "1" / "old.bin").write_bytes(b"\0" * (16 * MIB))  # version 1 is not served (latest 1)
    (demand,) = pod_resources(list(repo.models.values())).models
    assert demand.file_bytes == onnx_file.stat().st_size


def test_colliding_service_names_are_refused(tmp_path, onnx_file):
    repo = _repository(tmp_path, {"a_b": "", "a-b": ""}, onnx_file)
    with pytest.raises(ExportInputError, match="both make the InferenceService name 'a-b'"):
        plan_services(repo, ExportOptions("gs://b/r", per_model=True))
    (service,) = plan_services(repo, ExportOptions("gs://b/r"))
    assert service.models == ("a-b", "a_b")


GROUPS = st.lists(st.tuples(st.sampled_from(["KIND_CPU", "KIND_GPU", "KIND_AUTO"]), st.integers(1, 4),
                            st.lists(st.integers(0, 3), max_size=3, unique=True)), min_size=1, max_size=3)


@settings(max_examples=25, deadline=None)
@given(models=st.lists(GROUPS, min_size=1, max_size=3))
def test_requests_match_the_instances_triton_creates(onnx_file, models):
    with tempfile.TemporaryDirectory() as root:
        configs = {f"m{i}": "instance_group [ " + ", ".join(_group(k, c, [] if k == "KIND_CPU" else g)
                                                           for k, c, g in groups) + " ]"
                   for i, groups in enumerate(models)}
        repo = _repository(Path(root), configs, onnx_file)
        resources = pod_resources(list(repo.models.values()))
        gpus = max((max(g) + 1 if g else 1 for groups in models for k, _, g in groups
                    if k == "KIND_GPU" or (k == "KIND_AUTO" and g)), default=0)
        assert resources.gpus == gpus
        # Every group lands on the GPUs when the pod has them (auto groups too), else on the CPU; a GPU
        # group runs `count` instances on each of its GPUs (all of the pod's when it names none).
        expected_cpu = expected_gpu = 0
        for groups in models:
            for kind, count, g in groups:
                if kind == "KIND_GPU" or (kind == "KIND_AUTO" and gpus):
                    expected_gpu += count * (len(g) if g else gpus)
                else:
                    expected_cpu += count
        assert sum(m.gpu_instances for m in resources.models) == expected_gpu
        assert resources.cpus == max(1, expected_cpu)
        doc = manifest(plan_services(repo, ExportOptions("gs://b/r"))[0], ExportOptions("gs://b/r"))
        assert doc["spec"]["predictor"]["model"]["resources"] == resources.kubernetes()
