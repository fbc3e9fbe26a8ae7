"""The check of manifests against KServe's own models refuses what KServe would refuse. It runs in
a child Python (kserve's protobufs clash with tritonclient's in one process), once for all cases."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from helpers.kserve_env import needs_kserve
from tritonctl.export.schema import SchemaPythonError, schema_errors


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


@needs_kserve
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


def test_a_named_python_that_cannot_run_the_check_is_named_with_the_reason(tmp_path: Path):
    with pytest.raises(SchemaPythonError, match=r"cannot run .*no-such-python to check the manifests"):
        schema_errors([GOOD], python=str(tmp_path / "no-such-python"))


def test_a_named_python_without_kserve_says_how_to_install_it_there(tmp_path: Path):
    bare = tmp_path / "bare-python"  # this Python without site-packages: no kserve, no kubernetes
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    with pytest.raises(SchemaPythonError) as refused:
        schema_errors([GOOD], python=str(bare))
    assert f"{bare} cannot check the manifests against KServe's schema: it has no kserve module" in str(refused.value)
    assert f"{bare} -m pip install kserve kubernetes" in str(refused.value)


def test_the_python_is_taken_from_the_environment_when_not_named(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TRITONCTL_KSERVE_PYTHON", str(tmp_path / "from-env-python"))
    with pytest.raises(SchemaPythonError, match="from-env-python"):
        schema_errors([GOOD])
