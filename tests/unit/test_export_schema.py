"""The check of manifests against KServe's own models refuses what KServe would refuse."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("kserve", reason="the check uses KServe's own models: pip install 'tritonctl[export]' (kserve "
                    "caps pandas below 3, so it is not in the test extra)")

from tritonctl.export.schema import SchemaError, check_inference_service  # noqa: E402

GOOD = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "repo", "annotations": {"tritonctl/models": "a,b"}},
    "spec": {"predictor": {"model": {
        "modelFormat": {"name": "triton"}, "runtime": "kserve-tritonserver", "protocolVersion": "v2",
        "storageUri": "gs://b/r", "args": ["--model-control-mode=explicit"],
        "resources": {"requests": {"cpu": "2", "memory": "512Mi", "nvidia.com/gpu": "1"},
                      "limits": {"cpu": "2", "memory": "512Mi", "nvidia.com/gpu": "1"}}}}},
}


def _with(change) -> dict:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return doc


def _model(doc):
    return doc["spec"]["predictor"]["model"]


def test_a_good_manifest_passes():
    check_inference_service(GOOD)


@pytest.mark.parametrize(("change", "where"), [
    (lambda d: d.update(kind="Deployment"), "not a serving.kserve.io/v1beta1 InferenceService"),
    (lambda d: d.update(apiVersion="serving.kserve.io/v1alpha1"), "apiVersion"),
    (lambda d: _model(d).update(storageURI="gs://x"), ".spec.predictor.model.storageURI"),
    (lambda d: d["spec"].update(predictr={}), ".spec.predictr"),
    (lambda d: _model(d).update(args="--x"), ".spec.predictor.model.args: expected a list"),
    (lambda d: _model(d)["resources"]["limits"].update(cpu="two"), "is not a Kubernetes quantity"),
    (lambda d: _model(d)["resources"]["requests"].update(memory=512), "expected str"),
    (lambda d: _model(d)["modelFormat"].update(name=True), "expected str"),
    (lambda d: d["spec"]["predictor"].update(minReplicas="1"), "expected int"),
    (lambda d: d["spec"]["predictor"].update(containers=[{"image": "x"}]), "V1Container"),
    (lambda d: d["metadata"].update(labels=["a"]), ".metadata.labels"),
])
def test_what_kserve_refuses_is_refused_with_the_path(change, where):
    with pytest.raises(SchemaError, match=None) as info:
        check_inference_service(_with(change))
    assert where in str(info.value)
