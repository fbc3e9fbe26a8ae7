"""tritonctl build from PyTorch sources: module:function, TorchScript and torch.export
.pt2, each exported, checked against torch on the same inputs and written out."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tritonctl.convert.errors import BuildError
from tritonctl.convert.options import BuildOptions
from tritonctl.convert.pipeline import Reporter, build
from tritonctl.convert.spec import parse_input, parse_shape
from tritonctl.repo_schema.validate import validate_paths

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")
ort = pytest.importorskip("onnxruntime")

NETS = textwrap.dedent('''
    import torch

    class Tagger(torch.nn.Module):
        """Token ids and a mask [batch, seq] -> per-token scores and a pooled vector."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.embed = torch.nn.Embedding(16, 8)
            self.proj = torch.nn.Linear(8, 3)

        def forward(self, ids, mask):
            scores = self.proj(self.embed(ids)) * mask.unsqueeze(-1)
            return scores, scores.sum(1)

    class Drifting(torch.nn.Module):
        """Computes something else while being exported: a broken conversion."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x):
            y = self.lin(x)
            if torch.onnx.is_in_onnx_export():
                y = y + 0.5
            return y

    def tagger():
        return Tagger()

    def drifting():
        return Drifting()

    def mlp():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
''')
TAGGER_INPUTS = [parse_input("ids:int64:-1"), parse_input("mask:fp32:-1")]


@pytest.fixture
def nets(tmp_path) -> Path:
    path = tmp_path / "nets.py"
    path.write_text(NETS)
    return path


def _io(config_path: Path) -> str:
    return config_path.read_text()


def test_module_function_with_named_dynamic_inputs(tmp_path, nets):
    reporter = Reporter()
    result = build(BuildOptions(f"{nets}:tagger", tmp_path / "repo", "tagger", inputs=TAGGER_INPUTS,
                                output_names=["scores", "pooled"], shapes=[parse_shape("ids:12"),
                                                                           parse_shape("mask:12")]), reporter)
    assert reporter.stages == ["load source", "export to ONNX", "prepare ONNX", "check accuracy",
                               "write repository entry"]
    config = _io(result.config_path)
    for text in ('name: "ids"', "data_type: TYPE_INT64", 'name: "pooled"', "dims: [ -1, 3 ]", "max_batch_size: 8"):
        assert text in config
    manifest = result.manifest
    assert manifest["source"]["kind"] == "module" and "torch.export" in manifest["preparation"]["exporter"]
    assert [o["name"] for o in manifest["accuracy"]["outputs"]] == ["scores", "pooled"]
    assert manifest["accuracy"]["passed"]
    assert manifest["versions"]["torch"].startswith(torch.__version__.split("+")[0])
    session = ort.InferenceSession(str(result.model_path))
    ids = np.random.default_rng(0).integers(0, 16, (5, 7))
    mask = np.ones((5, 7), np.float32)
    got = session.run(None, {"ids": ids, "mask": mask})
    module = _load(nets).tagger().eval()
    with torch.no_grad():
        want = module(torch.from_numpy(ids), torch.from_numpy(mask))
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=1e-6)
    assert validate_paths([result.model_dir]).errors == 0


def _load(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("nets_for_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_torchscript_file(tmp_path, nets):
    module = _load(nets).mlp().eval()
    scripted = torch.jit.trace(module, torch.randn(2, 6))
    path = tmp_path / "mlp.pt"
    scripted.save(str(path))
    result = build(BuildOptions(str(path), tmp_path / "repo", "mlp", inputs=[parse_input("x:fp32:6")]))
    assert result.manifest["source"]["kind"] == "torchscript"
    assert "TorchScript" in result.manifest["preparation"]["exporter"]
    assert result.manifest["accuracy"]["passed"]
    assert 'name: "output"' in _io(result.config_path) and "dims: [ 6 ]" in _io(result.config_path)


def test_torchscript_needs_input_specs(tmp_path, nets):
    path = tmp_path / "mlp.pt"
    torch.jit.trace(_load(nets).mlp().eval(), torch.randn(2, 6)).save(str(path))
    with pytest.raises(BuildError, match="--input NAME:DTYPE:DIMS"):
        build(BuildOptions(str(path), tmp_path / "repo", "mlp"))


def test_exported_program_keeps_its_own_dynamic_shapes(tmp_path, nets):
    module = _load(nets).tagger().eval()
    dynamic = torch.export.Dim.DYNAMIC
    program = torch.export.export(module, (torch.zeros(2, 5, dtype=torch.int64), torch.ones(2, 5)),
                                  dynamic_shapes=({0: dynamic, 1: dynamic}, {0: dynamic, 1: dynamic}))
    path = tmp_path / "tagger.pt2"
    torch.export.save(program, str(path))
    result = build(BuildOptions(str(path), tmp_path / "repo", "tagger", max_batch_size=4))
    config = _io(result.config_path)
    assert 'name: "ids"' in config and 'name: "mask"' in config and "max_batch_size: 4" in config
    assert result.manifest["source"]["kind"] == "exported" and result.manifest["accuracy"]["passed"]


def test_exported_program_with_batch_one_is_made_dynamic(tmp_path, nets):
    program = torch.export.export(_load(nets).mlp().eval(), (torch.randn(1, 6),))
    path = tmp_path / "mlp1.pt2"
    torch.export.save(program, str(path))
    result = build(BuildOptions(str(path), tmp_path / "repo", "mlp1"))
    assert result.manifest["preparation"]["batch_rewrite"][0].endswith("first dimension 1 -> 'batch'")
    assert "max_batch_size: 8" in _io(result.config_path) and result.manifest["accuracy"]["passed"]


def test_a_broken_conversion_is_caught_and_nothing_is_written(tmp_path, nets):
    reporter = Reporter()
    reports = []
    reporter.accuracy = reports.append
    with pytest.raises(BuildError, match=r"accuracy check failed for output\(s\) 'output'"):
        build(BuildOptions(f"{nets}:drifting", tmp_path / "repo", "drifting", inputs=[parse_input("x:fp32:4")]),
              reporter)
    assert reports and reports[0].outputs[0].max_abs == pytest.approx(0.5, abs=1e-5)
    assert not (tmp_path / "repo").exists()


def test_module_cache_follows_the_weights(tmp_path, nets):
    options = dict(source=f"{nets}:mlp", repo=tmp_path / "repo", name="mlp", inputs=[parse_input("x:fp32:6")])
    first = build(BuildOptions(**options))
    assert build(BuildOptions(**options)).reused
    nets.write_text(NETS.replace("torch.manual_seed(0)\n    return", "torch.manual_seed(1)\n    return"))
    later = nets.stat().st_mtime + 5  # a new mtime, so Python does not run the cached bytecode
    os.utime(nets, (later, later))
    rebuilt = build(BuildOptions(**options))
    assert not rebuilt.reused and rebuilt.manifest["source"]["sha256"] != first.manifest["source"]["sha256"]
    assert json.loads((rebuilt.model_path.parent / "build.json").read_text())["cache_key"] == \
        rebuilt.manifest["cache_key"]


def test_bad_module_targets(tmp_path, nets):
    with pytest.raises(BuildError, match="has no function 'nothing'"):
        build(BuildOptions(f"{nets}:nothing", tmp_path / "repo", "m", inputs=[parse_input("x:fp32:4")]))
    with pytest.raises(BuildError, match="--input NAME:DTYPE:DIMS"):
        build(BuildOptions(f"{nets}:mlp", tmp_path / "repo", "m"))


OUTSIDE_NETS = textwrap.dedent('''
    import collections

    import torch

    Heads = collections.namedtuple("Heads", ["logits", "probs"])

    class Classifier(torch.nn.Module):
        """Returns its outputs in a dict, as Hugging Face models do."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(5, 3)

        def forward(self, x):
            logits = self.lin(x)
            return {"logits": logits, "probs": logits.softmax(-1)}

    class Gate(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return -x

    def classifier():
        return Classifier()

    def gate():
        return Gate()

    def bf16_linear():
        torch.manual_seed(0)
        return torch.nn.Linear(4, 2).to(torch.bfloat16)
''')


@pytest.fixture
def outside_nets(tmp_path) -> Path:
    path = tmp_path / "outside_nets.py"
    path.write_text(OUTSIDE_NETS)
    return path


def test_dict_outputs_are_exported_under_their_keys(tmp_path, outside_nets):
    result = build(BuildOptions(f"{outside_nets}:classifier", tmp_path / "repo", "cls",
                                inputs=[parse_input("x:fp32:5")]))
    assert [o["name"] for o in result.manifest["accuracy"]["outputs"]] == ["logits", "probs"]
    assert result.accuracy["passed"] and 'name: "probs"' in result.config_path.read_text()
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    logits, probs = ort.InferenceSession(str(result.model_path)).run(["logits", "probs"], {"x": x})
    with torch.no_grad():
        want = _load(outside_nets).classifier()(torch.from_numpy(x))
    np.testing.assert_allclose(probs, want["probs"].numpy(), rtol=1e-5, atol=1e-6)


def test_inputs_forward_does_not_take_are_a_build_error_naming_them(tmp_path, outside_nets):
    with pytest.raises(BuildError, match=r"called with the example inputs \(x \[2, 5\] float32, y \[2, 5\] float32\)"
                                         r": TypeError: .*Check that --input lists forward\(\)'s tensor arguments"):
        build(BuildOptions(f"{outside_nets}:classifier", tmp_path / "repo", "cls",
                           inputs=[parse_input("x:fp32:5"), parse_input("y:fp32:5")]))
    with pytest.raises(BuildError, match="--input names 'x' more than once"):
        build(BuildOptions(f"{outside_nets}:classifier", tmp_path / "repo", "cls",
                           inputs=[parse_input("x:fp32:5"), parse_input("x:fp32:5")]))
    assert not (tmp_path / "repo").exists()


def test_data_dependent_control_flow_says_where_and_what_to_do(tmp_path, outside_nets, capfd):
    with pytest.raises(BuildError, match=r"at outside_nets.py:\d+ \(if x.sum\(\) > 0:\): it branches on the value "
                                         r"of a tensor .*torch.where"):
        build(BuildOptions(f"{outside_nets}:gate", tmp_path / "repo", "gate", inputs=[parse_input("x:fp32:3")]))
    assert "GraphModule" not in capfd.readouterr().err


def test_bfloat16_weights_are_hashed_and_the_model_runs(tmp_path, outside_nets):
    from tritonctl.convert.torch_export import load_torch_source, run_torch

    source = load_torch_source("module", f"{outside_nets}:bf16_linear", [parse_input("x:bf16:4")])
    x = np.ones((2, 4), np.float32)
    (out,) = run_torch(source, {"x": x})
    assert out.dtype == np.float32 and out.shape == (2, 2) and len(source.digest) == 64
