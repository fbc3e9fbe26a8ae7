"""Write the built model into the repository: model file, config.pbtxt through repo_schema,
build.json, and a tritonctl validate pass over the result."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tritonctl.convert import manifest
from tritonctl.convert.errors import BuildError
from tritonctl.convert.options import BuildOptions
from tritonctl.repo_schema.generate import GenerateError, GenerateOptions, GeneratedConfig, config_from_model_io, write_model_entry
from tritonctl.repo_schema.modelfiles import ModelIO
from tritonctl.repo_schema.validate import validate_paths
from tritonctl.repo_schema.writer import to_pbtxt

CALIBRATION_CACHE = "calibration.cache"


@dataclass
class WrittenBuild:
    model_dir: Path
    config_path: Path
    model_path: Path
    manifest: dict


@dataclass
class BuiltConfig(GeneratedConfig):
    """A generated config whose header names the build's source."""

    source: str = field(default="")

    def text(self, source: Path | None = None) -> str:
        return to_pbtxt(self.config, header=f"Built by tritonctl build from {self.source}")


def build_config(options: BuildOptions, io: ModelIO, max_batch: int) -> BuiltConfig:
    """config.pbtxt content: tensors from the built model, batching and instances from flags;
    plans run on KIND_GPU unless --kind says otherwise."""
    backend = {"plan": "tensorrt", "torchscript": "pytorch"}.get(options.format, "onnxruntime")
    kind = options.kind or ("gpu" if backend == "tensorrt" else None)
    generate_options = GenerateOptions(
        name=options.name, backend=backend, max_batch_size=max_batch, dynamic_batching=options.dynamic_batching,
        preferred_batch_sizes=list(options.preferred_batch_sizes), max_queue_delay_us=options.max_queue_delay_us,
        instances=options.instances, kind=kind)
    engine_max = getattr(io, "max_batch", max_batch)  # a PlanIO knows its engine's profile limit
    try:
        generated = config_from_model_io(io, backend, options.name, generate_options, engine_max=engine_max)
    except GenerateError as exc:
        raise BuildError(str(exc)) from None
    return BuiltConfig(generated.config, generated.backend, generated.notes, Path(options.source).name)


def _owned(version_dir: Path, config_path: Path) -> dict | None:
    """The earlier build.json when the files in place are exactly what that build wrote."""
    earlier = manifest.read_manifest(version_dir)
    if not earlier or not config_path.is_file():
        return None
    model = version_dir / str(earlier.get("model", {}).get("file", ""))
    intact = (model.is_file() and manifest.file_sha256(model) == earlier["model"].get("sha256")
              and manifest.file_sha256(config_path) == earlier.get("config_sha256"))
    return earlier if intact else None


def _foreign_files(version_dir: Path, ours: set[str]) -> list[str]:
    """Names in the version directory that no build of this entry writes."""
    if not version_dir.is_dir():
        return []
    return sorted(p.name for p in version_dir.iterdir() if p.name not in ours and not p.name.endswith(".bak"))


def _clear_the_way(options: BuildOptions, version_dir: Path, config_path: Path, target: Path) -> None:
    """Remove what the last build of this entry wrote; refuse to replace anything else without --force."""
    ours = {target.name, manifest.MANIFEST_NAME, CALIBRATION_CACHE}
    earlier = _owned(version_dir, config_path)
    if earlier:
        previous_model = version_dir / earlier["model"]["file"]
        for path in {target, previous_model, config_path, version_dir / manifest.MANIFEST_NAME}:
            path.unlink(missing_ok=True)
        ours.add(previous_model.name)
    else:
        clashes = [p for p in (config_path, target) if p.exists()]
        if clashes and not options.force:
            raise BuildError(f"{' and '.join(map(str, clashes))} already exist and were not written by this "
                             "tool's last build; pass --force to replace them (the old files are kept as .bak)")
    foreign = _foreign_files(version_dir, ours)
    if foreign and not options.force:
        raise BuildError(f"{version_dir} already holds {', '.join(foreign)}, which this build did not write and "
                         "Triton would find next to the new model; remove them, choose another --version, or pass "
                         "--force to build there and leave them in place")


def _validate_staged(config: BuiltConfig, result: Path, options: BuildOptions, work: Path, reporter) -> None:
    """Write the entry into the work directory and run tritonctl validate on it, so a config that
    fails never reaches the repository."""
    stage = work / "staged-repository"
    try:
        write_model_entry(config, result, stage, options.version, copy=True, force=True)
    except GenerateError as exc:
        raise BuildError(str(exc)) from None
    report = validate_paths([stage / options.name])
    for diagnostic in report.diagnostics:
        reporter.note(f"validate: {diagnostic.severity.value}[{diagnostic.code}] {diagnostic.message}")
    if report.errors:
        raise BuildError(f"the entry for {options.repo / options.name} would have {report.errors} error(s) under "
                         "tritonctl validate (listed above); nothing was written")


def write_entry(options: BuildOptions, io: ModelIO, result: Path, max_batch: int, work: Path, info: dict,
                reporter) -> WrittenBuild:
    if options.format == "plan":  # the engine itself is the authority on its tensors and batch limit
        from tritonctl.repo_schema.modelfiles.tensorrt import read_plan_io

        io = read_plan_io(result)
    config = build_config(options, io, max_batch)
    for note in config.notes:
        reporter.note(note)
    _validate_staged(config, result, options, work, reporter)
    model_dir = options.repo / options.name
    version_dir = model_dir / str(options.version)
    config_path = model_dir / "config.pbtxt"
    target = version_dir / config.filename
    try:
        _clear_the_way(options, version_dir, config_path, target)
        entry = write_model_entry(config, result, options.repo, options.version, copy=True, force=options.force)
        for backup in entry.backups:
            reporter.note(f"kept the previous file as {backup}")
        calibration_cache = work / CALIBRATION_CACHE
        if calibration_cache.is_file():
            shutil.copy2(calibration_cache, version_dir / CALIBRATION_CACHE)
        info["model"] = {"file": target.name, "format": options.format, "bytes": target.stat().st_size,
                         "sha256": manifest.file_sha256(target)}
        info["config_sha256"] = manifest.file_sha256(config_path)
        manifest.write_manifest(version_dir, info)
    except GenerateError as exc:
        raise BuildError(str(exc)) from None
    except OSError as exc:
        raise BuildError(f"cannot write the entry {model_dir}: {exc.strerror or exc} ({exc.filename or model_dir}); "
                         "give --repo a directory this user can write") from None
    return WrittenBuild(model_dir, config_path, target, info)
