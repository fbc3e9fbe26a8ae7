"""tritonctl build --format torchscript from each PyTorch source kind: a TorchScript file saved as
it is, a torch.export program traced, a module whose control flow tracing would freeze (caught by
the accuracy check, nothing written), dynamic dims found by running the model, and names the
PyTorch backend would read wrongly refused. Each written entry loads in the PyTorch backend and
answers like the source."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tritonctl.convert.errors import BuildError
from tritonctl.convert.options import BuildOptions
from tritonctl.convert.pipeline import build
from tritonctl.convert.spec import parse_input

torch = pytest.importorskip("torch")


class Gate(torch.nn.Module):
    """Doubles a row batch whose sum is positive, negates it otherwise: value-dependent control flow."""

    def forward(self, x):
        if bool(x.sum() > 0):
            return x * 2
        return -x


class Pool(torch.nn.Module):
    """tokens [batch, seq, 4] (seq variable) -> per-token scores [batch, seq] and a mean [batch, 4]."""

    def forward(self, tokens):
        return tokens.sum(-1), tokens.mean(1)


def gate():
    return Gate()


def served_outputs(entry, arrays: dict) -> dict:
    """The entry's model.pt run by the PyTorch backend under the written config."""
    from google.protobuf import text_format

    from tritonctl.repo_schema.schema import model_config_pb2
    from tritonctl.serve.backends.pytorch import PyTorchBackend
    from tritonctl.serve.core.backend_api import InstanceSpec

    config = text_format.Parse((entry / "config.pbtxt").read_text(), model_config_pb2().ModelConfig())
    backend = PyTorchBackend(config, entry / "1", InstanceSpec("m_0", "KIND_CPU"))
    return backend.execute(dict(arrays), [o.name for o in config.output])


def test_a_torchscript_file_is_saved_as_it_is_with_its_control_flow(tmp_path):
    source = tmp_path / "gate.pt"
    torch.jit.script(Gate()).save(str(source))
    result = build(BuildOptions(str(source), tmp_path / "repo", "gate", format="torchscript",
                                inputs=[parse_input("x:fp32:3")]))
    assert result.manifest["preparation"]["exporter"] == "TorchScript source, saved as it is"
    assert result.accuracy["passed"] and result.model_path.name == "model.pt"
    x = np.array([[1, 2, 3]], np.float32)
    assert np.array_equal(served_outputs(result.model_dir, {"x": x})["output__0"], x * 2)
    assert np.array_equal(served_outputs(result.model_dir, {"x": -x})["output__0"], x)


def test_tracing_that_freezes_control_flow_is_caught_and_nothing_is_written(tmp_path):
    with pytest.raises(BuildError, match="accuracy check failed for output\\(s\\) 'output__0'"):
        build(BuildOptions(f"{__file__}:gate", tmp_path / "repo", "gate", format="torchscript",
                           inputs=[parse_input("x:fp32:3")], seed=3))
    assert not (tmp_path / "repo" / "gate").exists()


def test_an_exported_program_is_traced_and_dynamic_dims_found_by_running_it(tmp_path):
    dynamic = torch.export.Dim.DYNAMIC
    program = torch.export.export(Pool(), (torch.randn(2, 5, 4),), dynamic_shapes=({0: dynamic, 1: dynamic},))
    source = tmp_path / "pool.pt2"
    torch.export.save(program, str(source))
    result = build(BuildOptions(str(source), tmp_path / "repo", "pool", format="torchscript",
                                output_names=["scores__0", "mean__1"]))
    config = (result.config_path).read_text()
    assert 'backend: "pytorch"' in config and "max_batch_size: 8" in config
    assert result.manifest["preparation"]["exporter"] == "torch.jit.trace at batch 2"
    built = json.loads((result.model_dir / "1" / "build.json").read_text())
    assert built["accuracy"]["passed"]
    tokens = np.random.default_rng(0).standard_normal((3, 7, 4)).astype(np.float32)  # seq 7: never traced
    produced = served_outputs(result.model_dir, {program.graph_signature.user_inputs[0]: tokens})
    np.testing.assert_allclose(produced["scores__0"], tokens.sum(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(produced["mean__1"], tokens.mean(1), rtol=1e-5, atol=1e-6)
    assert "dims: [ -1 ]" in config  # scores: [batch, seq], seq variable


def test_indexed_names_out_of_forward_order_are_refused(tmp_path):
    source = tmp_path / "gate.pt"
    torch.jit.script(Gate()).save(str(source))
    with pytest.raises(BuildError, match="not 0, 1, ... in forward\\(\\) order"):
        build(BuildOptions(str(source), tmp_path / "repo", "gate", format="torchscript",
                           inputs=[parse_input("x__1:fp32:3")]))


class Pieces(torch.nn.Module):
    """x [batch, 3] -> a list of two tensors and, in a dict, the total over everything (rank 0)."""

    def forward(self, x):
        return [x + 1, x * 2], {"total": x.sum()}


def pieces():
    return Pieces()


class Regroup(torch.nn.Module):
    """x [batch, 6] -> [2 * batch, 3]: a shape computed from the input's."""

    def forward(self, x):
        return x.view(x.shape[0] * 2, 3)


def test_lists_dicts_and_scalars_are_returned_as_the_pytorch_backend_takes_them(tmp_path):
    result = build(BuildOptions(f"{__file__}:pieces", tmp_path / "repo", "pieces", format="torchscript",
                                inputs=[parse_input("x:fp32:3")]))
    assert result.accuracy["passed"] and "max_batch_size" not in result.config_path.read_text()
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    produced = served_outputs(result.model_dir, {"x": x})
    assert np.array_equal(produced["output__0"], x + 1) and np.array_equal(produced["output__1"], x * 2)
    assert np.array_equal(produced["output__2"], np.array([21], np.float32))


def test_a_traced_program_that_fixes_a_computed_shape_is_refused_with_why(tmp_path):
    program = torch.export.export(Regroup(), (torch.randn(2, 6),), dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
    source = tmp_path / "regroup.pt2"
    torch.export.save(program, str(source))
    with pytest.raises(BuildError, match="traced at batch 2, fails on inputs of other shapes .*script the model"):
        build(BuildOptions(str(source), tmp_path / "repo", "regroup", format="torchscript"))
    assert not (tmp_path / "repo" / "regroup").exists()


def test_bfloat16_models_are_refused_before_the_backend_would_be(tmp_path):
    (tmp_path / "bf16_net.py").write_text(
        "import torch\n\ndef make():\n    return torch.nn.Linear(4, 2).to(torch.bfloat16)\n")
    with pytest.raises(BuildError, match="input 'x' is bfloat16, which Triton's PyTorch backend cannot pass"):
        build(BuildOptions(f"{tmp_path / 'bf16_net.py'}:make", tmp_path / "repo", "bf16", format="torchscript",
                           inputs=[parse_input("x:bf16:4")]))
    assert not (tmp_path / "repo").exists()
