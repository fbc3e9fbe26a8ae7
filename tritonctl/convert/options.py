"""What ``tritonctl build`` was asked to do, and where the source comes from."""

from __future__ import annotations

import re
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tritonctl.convert.errors import BuildError
from tritonctl.convert.spec import InputSpec, ShapeSpec
from tritonctl.convert.tensorrt_build import PRECISIONS, TOLERANCES

FORMATS = ("onnx", "plan", "torchscript")
DEFAULT_MAX_BATCH_SIZE = 8
DEFAULT_OPSET = 18
_MODULE_FUNCTION = re.compile(r"^[\w./\\-]+:[A-Za-z_]\w*$")
_MODEL_NAME = re.compile(r"^[^/\\\s]+$")


@dataclass
class BuildOptions:
    source: str
    repo: Path
    name: str
    format: str = "onnx"
    version: int = 1
    max_batch_size: int | None = None  # None: DEFAULT_MAX_BATCH_SIZE when the model can batch, else 0
    opt_batch_size: int | None = None
    shapes: list[ShapeSpec] = field(default_factory=list)
    inputs: list[InputSpec] = field(default_factory=list)  # PyTorch sources
    output_names: list[str] = field(default_factory=list)  # PyTorch sources
    opset: int = DEFAULT_OPSET
    precision: str = "fp32"
    calibration_data: Path | None = None
    workspace_mib: int | None = None
    timing_cache: Path | None = None
    check: bool = True
    atol: float | None = None  # None: the precision's default
    rtol: float | None = None
    dynamic_batching: bool | None = None
    preferred_batch_sizes: list[int] = field(default_factory=list)
    max_queue_delay_us: int | None = None
    instances: int | None = None
    kind: str | None = None  # "auto", "cpu" or "gpu"; plans default to "gpu"
    force: bool = False
    seed: int = 0

    @property
    def tolerances(self) -> tuple[float, float]:
        default = TOLERANCES[self.precision] if self.format == "plan" else TOLERANCES["fp32"]
        return (default if self.atol is None else self.atol, default if self.rtol is None else self.rtol)

    def key_options(self) -> dict:
        """Every option that shapes the result, as JSON data (paths that only say where, left out)."""
        data = asdict(self)
        for name in ("source", "repo", "timing_cache", "force", "calibration_data"):
            data.pop(name)
        data["tolerances"] = list(self.tolerances)
        return data

    def validate(self) -> None:
        if self.format not in FORMATS:
            raise BuildError(f"--format must be one of {', '.join(FORMATS)}")
        if not self.name or not _MODEL_NAME.match(self.name) or self.name in (".", ".."):
            raise BuildError(f"--name '{self.name}' must be a plain directory name (no slashes or spaces)")
        if self.version < 1:
            raise BuildError("--version must be 1 or more (Triton loads numbered version directories)")
        if self.precision not in PRECISIONS:
            raise BuildError(f"--precision must be one of {', '.join(PRECISIONS)}")
        if self.format != "plan":
            plan_only = [flag for flag, value in (("--precision", self.precision != "fp32"),
                                                  ("--workspace", self.workspace_mib is not None),
                                                  ("--timing-cache", self.timing_cache is not None)) if value]
            if plan_only:
                raise BuildError(f"{', '.join(plan_only)} configure the TensorRT build; add --format plan")
        if self.max_batch_size is not None and self.max_batch_size < 0:
            raise BuildError("--max-batch-size must be 0 or more")
        if self.opt_batch_size is not None and self.max_batch_size == 0:
            raise BuildError("--opt-batch-size needs a batching model (--max-batch-size above 0)")
        if self.workspace_mib is not None and self.workspace_mib < 1:
            raise BuildError("--workspace must be at least 1 MiB")
        for value, flag in ((self.atol, "--atol"), (self.rtol, "--rtol")):
            if value is not None and value < 0:
                raise BuildError(f"{flag} must be 0 or more")
        for flag, names in (("--input", [spec.name for spec in self.inputs]), ("--output", self.output_names),
                            ("--shape", [spec.name for spec in self.shapes])):
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                raise BuildError(f"{flag} names {', '.join(repr(n) for n in repeated)} more than once; give each "
                                 "tensor once, with its own name")
        if not 7 <= self.opset <= 23:
            raise BuildError("--opset must be between 7 and 23")


def source_kind(source: str) -> str:
    """'onnx', 'torchscript', 'exported' (a torch.export .pt2) or 'module' (module:function)."""
    path = Path(source)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix == ".onnx":
            return "onnx"
        if suffix == ".pt2":
            return "exported"
        if zipfile.is_zipfile(path):
            return "torchscript"
        raise BuildError(f"cannot tell what {path.name} is: build takes an ONNX file (.onnx), a TorchScript "
                         "archive (.pt), a torch.export program (.pt2) or module:function")
    if path.exists():
        raise BuildError(f"{source} is a directory; give the model file itself")
    if _MODULE_FUNCTION.match(source):
        return "module"
    raise BuildError(f"{source} does not exist (and is not module:function)")
