"""A real server on free loopback ports, driven by the real tritonclient."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "unit" / "serve"))

from serve_models import write_add_sub, write_bytes_model, write_onnx_only  # noqa: E402
from tritonctl.serve.runtime import BackgroundServer, ServeOptions  # noqa: E402

SLOW_BATCH = "dynamic_batching { max_queue_delay_microseconds: 300000 }"


def serving_repository(root: Path) -> Path:
    write_add_sub(root, extra="dynamic_batching { max_queue_delay_microseconds: 2000 }")
    write_add_sub(root, "add_sub_int", "TYPE_INT32")
    write_add_sub(root, "add_sub_fp16", "TYPE_FP16")
    write_add_sub(root, "batched", extra=SLOW_BATCH.replace("300000", "200000"))
    write_add_sub(root, "limited", extra="dynamic_batching { max_queue_delay_microseconds: 400000 "
                                         "preferred_batch_size: [ 8 ] default_queue_policy { max_queue_size: 1 } }")
    write_add_sub(root, "unloadable")
    write_add_sub(root, "delayed", extra=SLOW_BATCH)
    write_add_sub(root, "reloadable", extra="dynamic_batching { }")
    write_bytes_model(root)
    write_onnx_only(root)
    return root


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    repo = serving_repository(tmp_path_factory.mktemp("serve") / "repo")
    options = ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, control_mode="explicit",
                           load_models=["*"], exit_timeout_secs=5)
    with BackgroundServer(options) as server:
        yield server
