"""The check of manifests against KServe's own models refuses what KServe would refuse. It runs in
a child Python (kserve's protobufs clash with tritonclient's in one process), once for all cases."""

from __future__ import annotations

import copy
import importlib.util

import pytest

from tritonctl.export.schema import schema_errors

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("kserve") is None,
    reason="the check uses KServe's own models: pip install 'tritonctl[export]' (kserve caps pandas below 3, so it "
    "is not in the test extra)")

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


def _model(doc):
    return doc["spec"]["predictor"]["model"]


# (change, what the error must say), each applied to a copy of GOOD.
REFUSED = [
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
]


def test_good_manifests_pass_and_what_kserve_refuses_is_refused_with_the_path():
    docs = [GOOD]
    for change, _ in REFUSED:
        doc = copy.deepcopy(GOOD)
        change(doc)
        docs.append(doc)
    good, *refused = schema_errors(docs)
    assert good is None
    for (_, where), error in zip(REFUSED, refused, strict=True):
        assert error is not None and where in error, (where, error)
