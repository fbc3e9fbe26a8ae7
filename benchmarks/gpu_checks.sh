#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one command, for a machine that has one (CI has none):
#   1. the tests of the GPU paths (the `gpu` marker) and of the code around them, every skip
#      with its reason: PyTorch KIND_GPU instances, CUDA shared memory, Python models' tensors in
#      GPU memory, TensorRT plans (where tensorrt is installed), GPU counts in validate, generate
#      and analyze, analyze tuning a TorchScript model on KIND_GPU instances;
#   2. benchmarks/bench_torch.py (2 runs) with KIND_GPU instances against torch on the same GPU, then
#      with CPU instances against torch on the same CPUs.
#
#   bash benchmarks/gpu_checks.sh OUTDIR      # writes gpu.txt, pytest.log, junit.xml, bench_torch_*.txt
#
# PYTHON picks the interpreter (default python3); it needs the project's dependencies and the
# `torch` extra with a CUDA build of torch. Each step has its own time limit (GPU_CHECKS_*_S);
# GPU_CHECKS_BENCH_DEVICES picks the benchmark runs (default "cuda cpu"; empty: none).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-gpu-checks}"
mkdir -p "$out"
py="${PYTHON:-python3}"

{ nvidia-smi -L || echo "nvidia-smi: not found"
  "$py" -c 'import torch, onnxruntime as ort
print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count())
print("onnxruntime", ort.__version__, ort.get_available_providers())'
  nproc; } 2>&1 | tee "$out/gpu.txt"

timeout "${GPU_CHECKS_TESTS_S:-300}" "$py" -m pytest -p no:cacheprovider -q -rs --junitxml "$out/junit.xml" \
  tests/unit/serve/test_pytorch_backend.py \
  tests/unit/serve/test_pb_utils_dlpack.py \
  tests/integration/serve/test_serve_python_dlpack.py \
  tests/integration/serve/test_serve_rate_limiter.py::test_gpu_instances_share_their_devices_resources \
  tests/integration/serve/test_serve_pytorch.py \
  tests/integration/serve/test_serve_pytorch_qa.py \
  tests/integration/serve/test_serve_shm.py \
  tests/integration/serve/test_serve_tensorrt.py \
  tests/integration/serve/test_serve_startup_log.py \
  tests/integration/test_build_plan.py \
  tests/integration/test_analyze_gpu.py \
  tests/unit/test_layout_and_model_code.py \
  tests/unit/test_validate_lone_configs.py \
  tests/unit/rules/test_platform_rules.py \
  tests/unit/test_generate_autocomplete.py \
  tests/unit/analyzer/test_hardware.py \
  tests/unit/analyzer/test_search.py 2>&1 | tee "$out/pytest.log"
tests_status=${PIPESTATUS[0]}

bench() {
  timeout "${GPU_CHECKS_BENCH_S:-240}" "$py" benchmarks/bench_torch.py --hidden 4096 --concurrency 64 --runs 2 "$@"
}
for device in ${GPU_CHECKS_BENCH_DEVICES-cuda cpu}; do
  bench --device "$device" 2>&1 | tee "$out/bench_torch_$device.txt"
done
exit "$tests_status"
