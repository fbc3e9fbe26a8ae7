"""Introspection of model files: the tensors a model file declares."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TensorInfo:
    name: str
    data_type: str  # Triton config data type name, e.g. "TYPE_FP32"; "" when Triton has no equivalent
    dims: tuple[int, ...]  # full shape as the model declares it; -1 for a symbolic or unknown dim
    source_type: str = ""  # the type as the model file names it, for messages (e.g. "FLOAT")
    ranked: bool = True  # False when the model declares no shape at all


@dataclass(frozen=True)
class OnnxOperators:
    """What an ONNX graph needs from its runtime: the opset of each imported domain, and the
    operators of each domain its nodes (subgraphs included) use, e.g. {"": ("Add", "Relu")}."""

    opsets: dict[str, int]
    used: dict[str, tuple[str, ...]]
    function_domains: frozenset[str]  # domains of the model's own functions: no runtime needed


@dataclass
class ModelIO:
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    # Initializers that can be fed as inputs (ONNX IR >= 4 keeps them out of graph.input).
    overridable: list[str] = field(default_factory=list)
    operators: OnnxOperators | None = None  # ONNX models only

    def input(self, name: str) -> TensorInfo | None:
        return next((t for t in self.inputs if t.name == name), None)

    def output(self, name: str) -> TensorInfo | None:
        return next((t for t in self.outputs if t.name == name), None)


class ModelFileError(Exception):
    """The model file cannot be read (corrupt, truncated, not this format)."""


# The first line of a Git LFS pointer file (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md);
# "hawser" is the name of the pre-release spec, still found in old repositories.
_LFS_VERSIONS = (b"version https://git-lfs.github.com/spec/", b"version https://hawser.github.com/spec/")
_LFS_POINTER_MAX = 1024  # the spec keeps pointer files below 1024 bytes


def git_lfs_pointer_size(path) -> int | None:
    """When ``path`` is a Git LFS pointer instead of the file it stands for: the real
    file's size in bytes (0 when the pointer does not say). None for any other file."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_LFS_POINTER_MAX + 1)
    except OSError:
        return None
    if len(head) > _LFS_POINTER_MAX or not head.startswith(_LFS_VERSIONS):
        return None
    for line in head.decode("utf-8", errors="replace").splitlines():
        key, _, value = line.partition(" ")
        if key == "size" and value.strip().isdigit():
            return int(value.strip())
    return 0


def lfs_pointer_problem(path) -> str | None:
    """"<name> is a Git LFS pointer to a file of 97.8 MiB, not the model itself" for a
    pointer file; None for any other file."""
    size = git_lfs_pointer_size(path)
    if size is None:
        return None
    real = f" of {_size_text(size)}" if size else ""
    return f"{path.name} is a Git LFS pointer to a file{real}, not the model itself"


LFS_HINT = "run `git lfs pull` in the repository (after `git lfs install`) to fetch the model file"


def _size_text(size: float) -> str:
    if size < 1024:
        return f"{int(size)} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            break
    return f"{size:.1f} {unit}"
