"""Model directories for the analyze tests, made in code (onnx.helper): tiny, so loads are instant."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "serve"))

from serve_models import add_sub_onnx, write_add_sub  # noqa: E402


def onnx_model(repo: Path, name: str = "add_sub", config: str | None = "") -> Path:
    """An add/sub ONNX model ([batch, 4] inputs); ``config`` None leaves out config.pbtxt (auto-complete),
    "" writes the usual one (max_batch_size 8, one CPU instance, no dynamic batching)."""
    if config is None:
        model_dir = repo / name
        add_sub_onnx(model_dir / "1" / "model.onnx")
        return model_dir
    return write_add_sub(repo, name, extra=config)


def fixed_batch_model(repo: Path, name: str = "fixed") -> Path:
    """A model without a batch dimension (max_batch_size 0): only instances can be tuned."""
    model_dir = repo / name
    add_sub_onnx(model_dir / "1" / "model.onnx", batch=False)
    return model_dir
