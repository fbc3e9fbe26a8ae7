"""``build``: source -> prepared ONNX -> (TensorRT plan) -> accuracy check -> repository entry.

Each stage is timed and announced to a Reporter, which the CLI turns into a progress
display; library callers and tests can pass none.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from tritonctl.convert import accuracy, calibration, manifest, onnx_prep
from tritonctl.convert.errors import BuildError
from tritonctl.convert.options import DEFAULT_MAX_BATCH_SIZE, BuildOptions, source_kind
from tritonctl.convert.prepare import PreparedOnnx, batchable, prepare_onnx, specs_for
from tritonctl.convert.profiles import check_shapes, compute_profile
from tritonctl.convert.tensorrt_build import ProgressEvent, build_engine, has_qdq, precision_flags
from tritonctl.convert.torch_export import export_onnx, load_torch_source, run_torch
from tritonctl.repo_schema.modelfiles import ModelIO, TensorInfo


class Reporter:
    """Receives what a build does. The base class records it; the CLI draws it."""

    def __init__(self) -> None:
        self.stages: list[str] = []
        self.notes: list[str] = []

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.stages.append(name)
        yield

    def note(self, message: str) -> None:
        self.notes.append(message)

    def engine_progress(self, event: ProgressEvent) -> None:
        """TensorRT's builder phases while the engine is built."""

    def accuracy(self, report: accuracy.AccuracyReport) -> None:
        """The per-output comparison, before the build stops on a failure."""


@dataclass
class BuildResult:
    model_dir: Path
    config_path: Path
    model_path: Path
    manifest: dict
    reused: bool = False
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def accuracy(self) -> dict | None:
        return self.manifest.get("accuracy")


@dataclass
class _Source:
    kind: str
    digest: str
    onnx_model: object = None  # ONNX sources
    torch: object = None  # TorchSource


class _Timer:
    def __init__(self, reporter: Reporter):
        self.reporter, self.seconds = reporter, {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        with self.reporter.stage(name):
            yield
        self.seconds[name] = round(time.perf_counter() - start, 3)


def build(options: BuildOptions, reporter: Reporter | None = None) -> BuildResult:
    reporter = reporter or Reporter()
    options.validate()
    kind = _preflight(options)
    timer = _Timer(reporter)
    with timer.stage("load source"):
        source = _load(kind, options)
    upgraded_from = None
    if source.onnx_model is not None:
        upgraded = onnx_prep.upgrade_old_opset(source.onnx_model)
        if upgraded is not None:
            upgraded_from = onnx_prep.default_opset(source.onnx_model)
            reporter.note(f"opset: {upgraded_from} -> {onnx_prep.UPGRADE_OPSET} (onnxruntime runs opset "
                          f"{onnx_prep.OLDEST_RUNNABLE_OPSET} and newer); the accuracy check compares with the "
                          "upgraded model")
            source.onnx_model = upgraded
    versions = manifest.tool_versions()
    gpu = None
    if options.format == "plan":
        from tritonctl.convert.tensorrt_build import gpu_names

        gpu = gpu_names()[0]
        versions["gpu"] = gpu
    key_options = options.key_options()
    if options.calibration_data is not None:
        key_options["calibration_data_sha256"] = calibration.digest(options.calibration_data)
    key = manifest.cache_key(source.digest, key_options, versions)
    model_dir = options.repo / options.name
    version_dir = model_dir / str(options.version)
    previous = manifest.reusable(version_dir, model_dir / "config.pbtxt", key)
    if previous is not None:
        reporter.note(f"{version_dir / previous['model']['file']} is up to date (same source, options and "
                      "tool versions as its build.json); nothing rebuilt")
        return BuildResult(model_dir, model_dir / "config.pbtxt", version_dir / previous["model"]["file"],
                           previous, reused=True, stage_seconds=timer.seconds)
    if options.format == "torchscript":
        return _build_torchscript(options, source, reporter, timer, key, key_options, versions)
    with tempfile.TemporaryDirectory(prefix="tritonctl-build-") as tmp:
        work = Path(tmp)
        record = {"exporter": None}
        if source.torch is not None:
            with timer.stage("export to ONNX"):
                source.onnx_model = _export(source.torch, options, work, record)
        want_batch = options.max_batch_size != 0
        with timer.stage("prepare ONNX"):
            prepared = prepare_onnx(source.onnx_model, work / "model.onnx", want_batch, options.shapes, options.seed)
        for change in prepared.batch_rewrite:
            reporter.note(f"dynamic batch: {change}")
        if prepared.batch_rewrite:
            reporter.note("dynamic batch: verified row by row against the original model")
        max_batch = _max_batch(options, prepared)
        check_shapes(prepared.io.inputs, max_batch, options.shapes)
        result_path, profile = prepared.path, None
        if options.format == "plan":
            with timer.stage("build TensorRT engine"):
                result_path, profile = _build_plan(options, prepared, max_batch, work, reporter)
        report = None
        if options.check:
            with timer.stage("check accuracy"):
                try:
                    report = _check(options, source, prepared, result_path, max_batch)
                except BuildError as exc:
                    if upgraded_from is None:
                        raise
                    raise BuildError(f"{exc}. The model was converted from opset {upgraded_from} to "
                                     f"{onnx_prep.UPGRADE_OPSET} by onnx's version converter, which may not have "
                                     f"kept its meaning: re-export it with opset {onnx_prep.UPGRADE_OPSET} or "
                                     "newer") from None
            _report_accuracy(report, reporter)
        with timer.stage("write repository entry"):
            from tritonctl.convert.entry import write_entry

            info = _manifest_info(options, source, key, key_options, versions, gpu, max_batch, report)
            info["preparation"] = {"exporter": record["exporter"], "batch_rewrite": prepared.batch_rewrite,
                                   "folded_nodes": prepared.folded}
            info["profile"] = {n: {"min": list(s.min), "opt": list(s.opt), "max": list(s.max)}
                               for n, s in (profile or {}).items()} or None
            info["stages_s"] = dict(timer.seconds)
            written = write_entry(options, prepared.io, result_path, max_batch, work, info, reporter)
    return BuildResult(written.model_dir, written.config_path, written.model_path, written.manifest,
                       stage_seconds=timer.seconds)


def _manifest_info(options: BuildOptions, source: "_Source", key: str, key_options: dict, versions: dict, gpu,
                   max_batch: int, report) -> dict:
    return {
        "schema": manifest.SCHEMA_VERSION, "tool": "tritonctl build",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cache_key": key,
        "source": {"path": options.source, "kind": source.kind, "sha256": source.digest},
        "options": key_options, "versions": versions, "gpu": gpu,
        "max_batch_size": max_batch,
        "accuracy": report.as_dict() if report else {"skipped": True},
    }


def _report_accuracy(report: accuracy.AccuracyReport, reporter: Reporter, frozen: list[str] | None = None) -> None:
    reporter.accuracy(report)
    if not report.passed:
        failures = report.failures()
        failed = ", ".join(f"'{o.name}' ({o.problem or f'{o.mismatched} element(s) off'})" for o in failures)
        if any(o.source_not_finite for o in failures):
            advice = (f"The source model itself gives NaN/Inf on the check's inputs ({report.inputs}), which "
                      "happens when they fall outside its domain (a square root or logarithm of negative "
                      "values): pass --calibration-data with an .npz of real inputs, or build with --no-check")
        elif frozen:
            advice = (f"torch.jit.trace warned that it froze values computed from the inputs ({'; '.join(frozen)}): "
                      "the traced model takes the path the trace inputs took, whatever its inputs. Script the "
                      "model (torch.jit.script) and build from the saved .pt, or build --format onnx")
        else:
            advice = "Loosen --atol/--rtol if the differences are expected, or build with --no-check to skip the check"
        raise BuildError(f"accuracy check failed for output(s) {failed} with atol {report.atol:g}, "
                         f"rtol {report.rtol:g}; nothing was written. {advice}")


def _build_torchscript(options: BuildOptions, source: "_Source", reporter: Reporter, timer: "_Timer", key: str,
                       key_options: dict, versions: dict) -> BuildResult:
    """A PyTorch source -> model.pt for Triton's PyTorch backend, checked against the source."""
    from tritonctl.convert.entry import write_entry
    from tritonctl.convert.torchscript import build_torchscript, check_torchscript

    with tempfile.TemporaryDirectory(prefix="tritonctl-build-") as tmp:
        work = Path(tmp)
        with timer.stage("save TorchScript"):
            built = build_torchscript(options, source.torch, work)
        reporter.note(f"TorchScript: {built.exporter}")
        report = None
        if options.check:
            with timer.stage("check accuracy"):
                report = check_torchscript(options, source.torch, built)
            _report_accuracy(report, reporter, built.frozen)
        with timer.stage("write repository entry"):
            info = _manifest_info(options, source, key, key_options, versions, None, built.max_batch, report)
            info["preparation"] = {"exporter": built.exporter}
            info["profile"] = None
            info["stages_s"] = dict(timer.seconds)
            written = write_entry(options, built.io, built.path, built.max_batch, work, info, reporter)
    return BuildResult(written.model_dir, written.config_path, written.model_path, written.manifest,
                       stage_seconds=timer.seconds)


def _preflight(options: BuildOptions) -> str:
    """Everything that can be known to fail, before any work is done."""
    if options.format == "plan":
        from tritonctl.convert.tensorrt_build import plan_unavailable

        missing = plan_unavailable()
        if missing:
            raise BuildError(missing)
    kind = source_kind(options.source)
    if options.format == "torchscript" and kind == "onnx":
        from tritonctl.convert.torchscript import ONNX_SOURCE

        raise BuildError(ONNX_SOURCE)
    if kind != "onnx":
        from tritonctl.convert.torch_export import require_torch

        require_torch()
    elif options.inputs or options.output_names:
        raise BuildError("--input and --output describe PyTorch sources; an ONNX file names its own tensors")
    if options.format != "torchscript" and (options.check or kind == "onnx"):
        from tritonctl.optional import require

        require("onnxruntime", "tritonctl build")
    _require_writable(options)
    if options.timing_cache is not None and options.timing_cache.is_dir():
        raise BuildError(f"--timing-cache {options.timing_cache} is a directory; give a file path")
    if options.calibration_data is not None:
        calibration.calibration_files(options.calibration_data)
    return kind


def _require_writable(options: BuildOptions) -> None:
    """The entry's directories are directories (or can be made), in a place this user can write."""
    for path in (options.repo, options.repo / options.name, options.repo / options.name / str(options.version)):
        if path.exists() and not path.is_dir():
            raise BuildError(f"{path} is a file, where the entry needs a directory; give --repo a directory "
                             "(or remove the file)")
    existing = options.repo.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise BuildError(f"--repo {options.repo} cannot be created: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BuildError(f"--repo {options.repo}: {existing} is not writable by this user; choose a repository "
                         "directory you can write, or fix its permissions")


def _load(kind: str, options: BuildOptions) -> _Source:
    if kind == "onnx":
        import onnx

        data = Path(options.source).read_bytes()
        try:
            model = onnx.load_from_string(data)
        except Exception as exc:
            raise BuildError(f"{options.source} is not a valid ONNX model ({exc}): the file is cut short or is "
                             "not ONNX; export or download it again") from None
        if not model.graph.node and not model.graph.output:
            raise BuildError(f"{options.source} holds no ONNX graph (no nodes and no outputs); export or download "
                             "it again")
        _load_external_data(model, Path(options.source))
        return _Source(kind, hashlib.sha256(data).hexdigest(), onnx_model=model)

    torch_source = load_torch_source(kind, options.source, options.inputs)
    return _Source(kind, torch_source.digest, torch=torch_source)


def _load_external_data(model, source: Path) -> None:
    import onnx

    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        return
    try:
        onnx.load_external_data_for_model(model, str(source.parent))
    except Exception as exc:
        raise BuildError(f"cannot read the external data of {source}: {exc}; keep the weight files next to the "
                         "model, under the names it records") from None


def _torch_specs(torch_source, batch: int | None, options: BuildOptions) -> list:
    """Example-input specs for a PyTorch source (batch None: its inputs have no batch axis)."""
    infos = [TensorInfo(s.name, accuracy.TRITON_DTYPES.get(s.dtype, ""), ((-1,) if batch else ()) + s.dims, s.dtype)
             for s in torch_source.inputs]
    return specs_for(ModelIO(inputs=infos), batch or 0, options.shapes)


def _export(torch_source, options: BuildOptions, work: Path, record: dict):
    import onnx

    batch = 2 if torch_source.batch_dynamic else None
    arrays = accuracy.random_inputs(_torch_specs(torch_source, batch, options), options.seed)
    outputs = run_torch(torch_source, arrays)
    names = options.output_names or _default_output_names(torch_source, arrays)
    if len(names) != len(outputs):
        raise BuildError(f"the model returns {len(outputs)} output(s), but {len(names)} --output name(s) were given")
    path = work / "exported.onnx"
    record["exporter"] = export_onnx(torch_source, arrays, names, path, options.opset)
    return onnx.load(str(path))


def _default_output_names(torch_source, arrays: dict) -> list[str]:
    """The dict keys or NamedTuple fields the model returns its outputs under, else output, or
    output0, output1, ..."""
    from tritonctl.convert.torch_export import default_output_names

    names = default_output_names(torch_source, arrays)
    if all(names):
        return names
    return ["output"] if len(names) == 1 else [f"output{i}" for i in range(len(names))]


def _max_batch(options: BuildOptions, prepared: PreparedOnnx) -> int:
    can_batch = batchable(prepared.io)
    if options.max_batch_size is None:
        return DEFAULT_MAX_BATCH_SIZE if can_batch else 0
    if options.max_batch_size and not can_batch:
        blocker = next(t for t in [*prepared.io.inputs, *prepared.io.outputs] if not t.dims or t.dims[0] != -1)
        raise BuildError(f"--max-batch-size {options.max_batch_size} needs a model that batches, but "
                         f"'{blocker.name}' has shape {list(blocker.dims)} (its first dimension is not variable); "
                         "re-export it with a dynamic batch axis, or use --max-batch-size 0")
    return options.max_batch_size


def _dtypes(io) -> dict[str, str]:
    return {t.name: "object" if t.data_type == "TYPE_STRING" else accuracy.NUMPY_DTYPES.get(t.data_type, "float32")
            for t in io.inputs}


def _build_plan(options: BuildOptions, prepared: PreparedOnnx, max_batch: int, work: Path, reporter: Reporter):
    profile = compute_profile(prepared.io.inputs, max_batch, options.opt_batch_size, options.shapes)
    flags = precision_flags(options.precision, has_qdq(prepared.model), options.calibration_data is not None)
    batches = None
    cache = None
    if options.precision == "int8" and options.calibration_data is not None:
        batches = calibration.load_batches(options.calibration_data, [t.name for t in prepared.io.inputs],
                                           max_batch, _dtypes(prepared.io))
        cache = work / "calibration.cache"
        earlier = options.repo / options.name / str(options.version) / "calibration.cache"
        if earlier.is_file():
            shutil.copy2(earlier, cache)
            reporter.note(f"INT8: reusing the calibration cache {earlier}")
    if options.timing_cache is not None:
        state = "reusing" if options.timing_cache.is_file() else "creating"
        reporter.note(f"timing cache: {state} {options.timing_cache}")
    plan = work / "model.plan"
    build_engine(prepared.path, plan, profile, flags, batches, cache, options.workspace_mib, options.timing_cache,
                 reporter.engine_progress)
    return plan, profile


def _check(options: BuildOptions, source: _Source, prepared: PreparedOnnx, result_path: Path,
           max_batch: int) -> accuracy.AccuracyReport:
    atol, rtol = options.tolerances
    names = [t.name for t in prepared.io.outputs]
    if options.calibration_data is not None:
        batches = calibration.load_batches(options.calibration_data, [t.name for t in prepared.io.inputs],
                                           max_batch, _dtypes(prepared.io))[:8]
        described = f"--calibration-data {options.calibration_data} ({len(batches)} batch(es))"
    else:
        sizes = sorted({1, min(max_batch, 8)}) if max_batch else [0]
        batches = [accuracy.random_inputs(specs_for(prepared.io, b, options.shapes), options.seed + i)
                   for i, b in enumerate(sizes)]
        described = accuracy.describe_random(sizes if max_batch else [])
    if source.torch is not None:
        from tritonctl.convert.torch_export import run_torch

        reference = lambda arrays: run_torch(source.torch, arrays)  # noqa: E731
        if not source.torch.batch_dynamic:
            reference = accuracy.rowwise(reference)
    else:
        reference = accuracy.onnx_runner(source.onnx_model)
        if prepared.fixed_batch_source:
            reference = accuracy.rowwise(reference)
    if options.format == "plan":
        from tritonctl.convert.tensorrt_build import PlanRunner

        with PlanRunner(result_path, names) as runner:
            return accuracy.check_accuracy(names, reference, runner, batches, atol, rtol, described)
    return accuracy.check_accuracy(names, reference, accuracy.onnx_runner(result_path), batches, atol, rtol,
                                   described)
