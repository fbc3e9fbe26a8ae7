"""`tritonctl export kserve`: manifests for real repositories on disk, read back with PyYAML and
checked with KServe's own models; bad inputs fail before anything is written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from helpers.cli_runner import cli
from helpers.kserve_env import kserve_python, needs_kserve
from helpers.processes import free_port, started
from helpers.serve_models import add_sub_onnx
from helpers.triton_anchor import tritonserver_wrapper
from helpers.triton_anchor import unavailable_reason as triton_unavailable

yaml = pytest.importorskip("yaml", reason="PyYAML reads the manifests back (pip install 'tritonctl[export]')")
EXAMPLES = Path(__file__).parents[2] / "examples" / "model_repository"

ONNX_CONFIG = """
name: "{name}"
backend: "onnxruntime"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }},
        {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }},
         {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
{groups}
"""


def _model(repo: Path, name: str, groups: str) -> Path:
    add_sub_onnx(repo / name / "1" / "model.onnx")
    (repo / name / "config.pbtxt").write_text(ONNX_CONFIG.format(name=name, groups=groups))
    return repo / name


@pytest.fixture
def tuned_repo(tmp_path: Path) -> Path:
    """Two tuned models: two CPU instances, and one GPU instance on each of GPUs 0 and 1."""
    repo = tmp_path / "tuned_repo"
    _model(repo, "cpu_model", "instance_group [ { kind: KIND_CPU count: 2 } ]")
    _model(repo, "gpu_model", "instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0, 1 ] } ]")
    return repo


def _docs(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


# Builds each manifest into KServe's own objects, in a child Python (kserve's protobufs clash with
# tritonclient's in one process), and prints them back as KServe's to_dict() gives them.
AS_KSERVE = """
import json, sys
import kserve
from kubernetes.client import V1Container, V1ObjectMeta, V1ResourceRequirements

def build(doc):
    predictor = doc["spec"]["predictor"]
    if "model" in predictor:
        model = dict(predictor["model"])
        spec = kserve.V1beta1PredictorSpec(model=kserve.V1beta1ModelSpec(
            model_format=kserve.V1beta1ModelFormat(**model.pop("modelFormat")), runtime=model.pop("runtime"),
            protocol_version=model.pop("protocolVersion"), storage_uri=model.pop("storageUri"),
            args=model.pop("args", None), runtime_version=model.pop("runtimeVersion", None),
            resources=V1ResourceRequirements(**model.pop("resources"))))
        assert model == {}, model
    else:
        (c,) = predictor["containers"]
        spec = kserve.V1beta1PredictorSpec(containers=[V1Container(
            name=c["name"], image=c["image"], command=c["command"], args=c["args"], env=c["env"],
            resources=V1ResourceRequirements(**c["resources"]))])
    return kserve.V1beta1InferenceService(api_version=doc["apiVersion"], kind=doc["kind"],
                                          metadata=V1ObjectMeta(**doc["metadata"]),
                                          spec=kserve.V1beta1InferenceServiceSpec(predictor=spec))

json.dump([build(doc).to_dict() for doc in json.load(sys.stdin)], sys.stdout, default=str)
"""


def _as_kserve(*docs: dict) -> list[dict]:
    """The manifests as KServe's V1beta1InferenceService objects (to_dict: snake_case keys)."""
    done = subprocess.run([kserve_python(), "-c", AS_KSERVE], input=json.dumps(docs), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _resources(doc: dict) -> dict:
    predictor = doc["spec"]["predictor"]
    return predictor["model"]["resources"] if "model" in predictor else predictor["containers"][0]["resources"]


@needs_kserve
@pytest.mark.parametrize("runtime", ["triton", "tritonctl"])
def test_example_repository_exports_one_service_for_the_repository(capsys, runtime):
    code, out, err = cli(capsys, "export", "kserve", str(EXAMPLES), "--storage-uri", "gs://bucket/models",
                         "--runtime", runtime)
    assert code == 0, err
    (doc,) = _docs(out)
    (isvc,) = _as_kserve(doc)
    assert isvc["metadata"]["name"] == "model-repository"
    assert doc["metadata"]["annotations"]["tritonctl/models"] == "add_sub"
    # add_sub is a Python model with one CPU instance: one core, no GPU.
    assert _resources(doc)["requests"]["cpu"] == "1" and "nvidia.com/gpu" not in _resources(doc)["limits"]
    if runtime == "triton":
        model = isvc["spec"]["predictor"]["model"]
        assert (model["model_format"]["name"], model["runtime"], model["protocol_version"]) == \
            ("triton", "kserve-tritonserver", "v2")
        assert model["storage_uri"] == "gs://bucket/models"
    else:
        container = isvc["spec"]["predictor"]["containers"][0]
        assert container["name"] == "kserve-container" and container["image"].startswith("tritonctl:")
        assert container["args"][:2] == ["serve", "/mnt/models"]
        assert [(env["name"], env["value"]) for env in container["env"]] == [("STORAGE_URI", "gs://bucket/models")]


@needs_kserve
def test_tuned_configs_set_cpu_and_gpu_requests(capsys, tuned_repo):
    code, out, err = cli(capsys, "export", "kserve", str(tuned_repo), "--storage-uri", "s3://bucket/tuned",
                         "--runtime-version", "24.08-py3")
    assert code == 0, err
    (doc,) = _docs(out)
    _as_kserve(doc)
    assert doc["spec"]["predictor"]["model"]["runtimeVersion"] == "24.08-py3"
    resources = _resources(doc)
    # gpus [0, 1] needs two GPUs; two CPU instances need two cores.
    assert resources["limits"]["nvidia.com/gpu"] == "2" == resources["requests"]["nvidia.com/gpu"]
    assert resources["requests"]["cpu"] == "2" == resources["limits"]["cpu"]
    assert resources["requests"]["memory"].endswith("Mi")


@needs_kserve
def test_per_model_services_load_only_their_model(capsys, tuned_repo):
    code, out, err = cli(capsys, "export", "kserve", str(tuned_repo), "--storage-uri", "pvc://claim/repo",
                         "--per-model")
    assert code == 0, err
    docs = {doc["metadata"]["name"]: doc for doc in _docs(out)}
    assert set(docs) == {"cpu-model", "gpu-model"}
    _as_kserve(*docs.values())
    for doc in docs.values():
        assert doc["spec"]["predictor"]["model"]["storageUri"] == "pvc://claim/repo"
    cpu, gpu = _resources(docs["cpu-model"]), _resources(docs["gpu-model"])
    assert cpu["requests"]["cpu"] == "2" and "nvidia.com/gpu" not in cpu["requests"]
    assert gpu["limits"]["nvidia.com/gpu"] == "2" and gpu["requests"]["cpu"] == "1"
    assert docs["gpu-model"]["spec"]["predictor"]["model"]["args"] == \
        ["--model-control-mode=explicit", "--load-model=gpu_model"]


@needs_kserve
def test_memory_estimate_grows_with_model_files_and_instances(capsys, tmp_path):
    sizes = {}
    for count in (1, 4):
        repo = tmp_path / f"repo{count}"
        model = _model(repo, "m", f"instance_group [ {{ kind: KIND_CPU count: {count} }} ]")
        (model / "1" / "weights.bin").write_bytes(b"\0" * (8 << 20))
        code, out, err = cli(capsys, "export", "kserve", str(repo), "--storage-uri", "gs://b/r")
        assert code == 0, err
        sizes[count] = int(_resources(_docs(out)[0])["requests"]["memory"][:-2])
    # Four copies of 8 MiB and three more instances, times the headroom.
    assert sizes[4] - sizes[1] >= 1.5 * (3 * 8 + 3 * 64) - 1


@needs_kserve
@pytest.mark.parametrize("uri", ["gs://bucket/models", "s3://bucket/a/b/", "pvc://my-claim/models",
                                 "https://example.com/repo.tar.gz"])
def test_storage_uris_are_kept_as_given(capsys, tmp_path, uri):
    out_dir = tmp_path / "out"
    code, _, err = cli(capsys, "export", "kserve", str(EXAMPLES), "--storage-uri", uri, "--runtime", "tritonctl",
                       "-o", str(out_dir))
    assert code == 0, err
    (doc,) = _docs((out_dir / "model-repository.yaml").read_text())
    assert doc["spec"]["predictor"]["containers"][0]["env"] == [{"name": "STORAGE_URI", "value": uri}]


@needs_kserve
def test_output_directory_is_not_overwritten_without_force(capsys, tmp_path, tuned_repo):
    out_dir = tmp_path / "manifests"
    args = ["export", "kserve", str(tuned_repo), "--storage-uri", "gs://b/r", "--per-model", "-o", str(out_dir)]
    assert cli(capsys, *args)[0] == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["cpu-model.yaml", "gpu-model.yaml"]
    (out_dir / "gpu-model.yaml").write_text("mine\n")
    code, _, err = cli(capsys, *args)
    assert code == 1 and "--force" in err and "gpu-model.yaml" in err
    assert (out_dir / "gpu-model.yaml").read_text() == "mine\n"
    code, _, err = cli(capsys, *args, "--force")
    assert code == 0, err
    _as_kserve(_docs((out_dir / "gpu-model.yaml").read_text())[0])


def test_invalid_config_is_refused_and_nothing_is_written(capsys, tmp_path, tuned_repo):
    (tuned_repo / "cpu_model" / "config.pbtxt").write_text('name: "cpu_model"\nbackend: "onnxruntime"\n'
                                                           'instance_group [ { kind: KIND_CPU count: -1 } ]\n'
                                                           'max_batch_size: [\n')
    out_dir = tmp_path / "out"
    code, out, err = cli(capsys, "export", "kserve", str(tuned_repo), "--storage-uri", "gs://b/r", "-o", str(out_dir))
    assert code == 1 and out == ""
    assert "does not pass `tritonctl validate`" in err and "cpu_model" in err
    assert not out_dir.exists()


def test_a_schema_python_that_cannot_check_is_an_error_and_nothing_is_written(capsys, tmp_path):
    out_dir = tmp_path / "out"
    missing = tmp_path / "no-such-python"
    code, out, err = cli(capsys, "export", "kserve", str(EXAMPLES), "--storage-uri", "gs://b/r",
                         "--schema-python", str(missing), "-o", str(out_dir))
    assert code == 1 and out == ""
    assert f"cannot run {missing} to check the manifests against KServe's schema" in err
    assert not out_dir.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--storage-uri", "ftp://host/repo"], "cannot fetch a repository from ftp://"),
    (["--storage-uri", "/local/path"], "is not a URI"),
    (["--storage-uri", "pvc://Bad_Claim/x"], "not a PersistentVolumeClaim name"),
    (["--storage-uri", "gs://b/r", "--image", "x:1"], "--image is for --runtime tritonctl"),
    (["--storage-uri", "gs://b/r", "--name", "Not_A_Name"], "not a valid InferenceService name"),
    (["--storage-uri", "gs://b/r", "--runtime", "tritonctl", "--runtime-version", "24.08-py3"],
     "--runtime-version is for --runtime triton"),
    (["--storage-uri", "gs://b/r", "--runtime-version", "24.08 py3"], "is not an image tag"),
    (["--storage-uri", "gs://b/r", "--namespace", "Prod"], "not a Kubernetes namespace name"),
])
def test_bad_options_are_usage_errors(capsys, tmp_path, args, message):
    out_dir = tmp_path / "out"
    code, out, err = cli(capsys, "export", "kserve", str(EXAMPLES), *args, "-o", str(out_dir))
    assert code == 2 and message in err and out == ""
    assert not out_dir.exists()


def test_missing_repository_and_model_directory_are_refused(capsys, tmp_path):
    code, _, err = cli(capsys, "export", "kserve", str(tmp_path / "nope"), "--storage-uri", "gs://b/r")
    assert code == 2 and "does not exist" in err
    code, _, err = cli(capsys, "export", "kserve", str(EXAMPLES / "add_sub"), "--storage-uri", "gs://b/r")
    assert code == 2 and "not a model repository" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = cli(capsys, "export", "kserve", str(empty), "--storage-uri", "gs://b/r")
    assert code == 1 and "nothing to export" in err and out == ""


ENSEMBLE = """
name: "pipe"
platform: "ensemble"
max_batch_size: 8
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [ {
  model_name: "gpu_model" model_version: -1
  input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }
  output_map { key: "OUTPUT0" value: "SUM" }
} ] }
"""


@needs_kserve
def test_per_model_ensemble_loads_its_steps_and_asks_for_their_resources(capsys, tuned_repo):
    (tuned_repo / "pipe" / "1").mkdir(parents=True)
    (tuned_repo / "pipe" / "config.pbtxt").write_text(ENSEMBLE)
    code, out, err = cli(capsys, "export", "kserve", str(tuned_repo), "--storage-uri", "gs://b/r", "--per-model",
                         "--runtime", "tritonctl", "--image", "reg.example.com/tritonctl:1", "-n", "serving")
    assert code == 0, err
    docs = {doc["metadata"]["name"]: doc for doc in _docs(out)}
    assert set(docs) == {"cpu-model", "gpu-model", "pipe"}
    pipe = docs["pipe"]
    _as_kserve(pipe)
    container = pipe["spec"]["predictor"]["containers"][0]
    assert container["image"] == "reg.example.com/tritonctl:1" and pipe["metadata"]["namespace"] == "serving"
    assert container["args"][-3:] == ["--model-control-mode=explicit", "--load-model=pipe", "--load-model=gpu_model"]
    assert _resources(pipe) == _resources(docs["gpu-model"])


@needs_kserve
def test_whole_repository_with_an_ensemble_adds_up_every_model(capsys, tuned_repo):
    (tuned_repo / "pipe" / "1").mkdir(parents=True)
    (tuned_repo / "pipe" / "config.pbtxt").write_text(ENSEMBLE)
    code, out, err = cli(capsys, "export", "kserve", str(tuned_repo), "--storage-uri", "gs://b/r", "--name", "prod")
    assert code == 0, err
    (doc,) = _docs(out)
    assert doc["metadata"]["name"] == "prod"
    assert doc["metadata"]["annotations"]["tritonctl/models"] == "cpu_model,gpu_model,pipe"
    assert _resources(doc)["requests"]["nvidia.com/gpu"] == "2" and _resources(doc)["requests"]["cpu"] == "2"


@needs_kserve
def test_warnings_are_named_but_do_not_stop_the_export(capsys, tuned_repo):
    config = tuned_repo / "cpu_model" / "config.pbtxt"
    # DB51: a preferred batch size listed twice.
    config.write_text(config.read_text() + "dynamic_batching { preferred_batch_size: [ 4, 4 ] }\n")
    code, out, err = cli(capsys, "export", "kserve", str(tuned_repo), "--storage-uri", "gs://b/r", "-o", "-")
    assert code == 0, err
    assert "validation warning" in err and "tritonctl validate" in err
    assert len(_docs(out)) == 1



@needs_kserve
def test_bundled_server_container_command_serves_the_model_it_names(capsys, tmp_path):
    """The tritonctl runtime's container command, run here on the repository as the storage
    initializer would lay it out in /mnt/models: ready on the probe's path, with only its model."""
    import numpy as np
    import tritonclient.http as httpclient

    repo = tmp_path / "repo"
    _model(repo, "cpu_model", "instance_group [ { kind: KIND_CPU count: 2 } ]")
    _model(repo, "other", "instance_group [ { kind: KIND_CPU count: 1 } ]")
    code, out, err = cli(capsys, "export", "kserve", str(repo), "--storage-uri", "gs://b/r", "--per-model",
                         "--runtime", "tritonctl")
    assert code == 0, err
    doc = next(d for d in _docs(out) if d["metadata"]["name"] == "cpu-model")
    container = doc["spec"]["predictor"]["containers"][0]
    http_port, grpc_port = free_port(), free_port()
    # The pod's paths and ports, mapped onto this machine: the mount, loopback, free ports.
    local = {"/mnt/models": str(repo), "0.0.0.0": "127.0.0.1", "8080": str(http_port), "9000": str(grpc_port)}
    args = [local.get(arg, arg) for arg in container["args"]] + ["--metrics-port", "-1"]
    assert container["command"] == ["tritonctl"]
    probe = f"http://127.0.0.1:{http_port}{container['readinessProbe']['httpGet']['path']}"

    def probe_ok() -> bool:
        with urllib.request.urlopen(probe, timeout=5) as response:
            return response.status == 200

    with started([sys.executable, "-m", "tritonctl", *args], probe_ok, "the container command"), \
            httpclient.InferenceServerClient(f"127.0.0.1:{http_port}") as client:
        assert client.is_model_ready("cpu_model") and not client.is_model_ready("other")
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        inputs = [httpclient.InferInput(name, [2, 4], "FP32") for name in ("INPUT0", "INPUT1")]
        for item in inputs:
            item.set_data_from_numpy(x)
        result = client.infer("cpu_model", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x + x)


# What KServe's kserve-tritonserver ClusterServingRuntime runs; the InferenceService's model.args follow.
KSERVE_TRITON_ARGS = ("--model-store={store}", "--grpc-port={grpc}", "--http-port={http}", "--allow-grpc=true",
                      "--allow-http=true")


@needs_kserve
@pytest.mark.triton
@pytest.mark.skipif(triton_unavailable() is not None, reason=triton_unavailable() or "")
def test_triton_runtime_args_load_only_the_exported_model_in_real_triton(capsys, tmp_path):
    import tritonclient.http as httpclient

    repo = tmp_path / "repo"
    for name in ("first", "second"):  # Python models: the Triton here has the Python backend only
        shutil.copytree(EXAMPLES / "add_sub", repo / name)
    code, out, err = cli(capsys, "export", "kserve", str(repo), "--storage-uri", "gs://b/r", "--per-model")
    assert code == 0, err
    doc = next(d for d in _docs(out) if d["metadata"]["name"] == "first")
    http_port, grpc_port = free_port(), free_port()
    runtime = [arg.format(store=repo, grpc=grpc_port, http=http_port) for arg in KSERVE_TRITON_ARGS]
    command = [str(tritonserver_wrapper(tmp_path)), *runtime, "--allow-metrics=false",
               *doc["spec"]["predictor"]["model"]["args"]]
    client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
    # The client closes first: an open connection holds Triton's stop for its whole exit timeout.
    with started(command, client.is_server_ready, "tritonserver", timeout_s=120, stop_s=60), client:
        assert client.is_model_ready("first") and not client.is_model_ready("second")
