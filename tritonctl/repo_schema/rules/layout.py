"""Repository and model-directory layout (REPO-*), and the model files each
loaded version needs (PB-10)."""

from __future__ import annotations

import difflib
from pathlib import Path

from tritonctl.repo_schema.context import MODEL_FILES
from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, ONNX, Example, Sibling
from tritonctl.repo_schema.normalize import runs_python_runtime
from tritonctl.repo_schema.repository import CONFIG_FILENAME
from tritonctl.repo_schema.rules import model_rule, repository_rule

MISSING_MODEL_FILE = register(
    "PB10", "model file missing from a version directory", "error",
    """
    Each version Triton loads must contain the backend's model file: model.onnx
    (a file, or a directory holding model.onnx), model.plan, model.pt, model.py,
    model.xml, or the name set by default_model_filename / cc_model_filenames.
    Triton fails the version with "unable to find '<path>' for model instance
    '<inst>'" (the Python backend fails with "Python model file not found"). DALI
    also accepts `dali.py` in the version directory, a pipeline it serializes at load
    (autoserialization); without either it fails with "Failed to load model file. The
    program looked in the following locations: ...". The PyTorch backend's Python
    runtime (`runtime: "model.py"`) loads a torch.nn.Module from model.py or a
    TorchScript model.pt instead, and fails with "No model found in ..." without
    either. Put the file into the version directory, or fix default_model_filename.
    """, "PB-10",
    example=Example(ONNX + IO, files=("1/model.pt",)))
FILENAME_IS_A_PATH = register(
    "PB11", "model file name with a path separator or '..'", "error",
    """
    default_model_filename and the values of cc_model_filenames name a file inside each
    version directory: the backend joins <model>/<version>/<name>. A name with `/`, `\\`
    or `..` reaches outside that directory (DALI refuses such names, Triton's QA case
    model6_invalid_default_model_filename), or into a subdirectory that version
    policies, repository agents and `tritonctl build` never look at. Write the plain
    file name, e.g. "model.onnx", and put the file into the version directory.
    """, "PB-10")
STRAY_ROOT_DIR = register(
    "REPO50", "hidden or stray directory in the repository root", "warning",
    """
    Triton treats every subdirectory of a model repository as a model, hidden ones
    too. `.git`, `__pycache__` or `.ipynb_checkpoints` then fail to load (issue #2554:
    "unexpected platform type  for .git"), which makes the server report errors or,
    with --exit-on-error, refuse to start. Files in the root are ignored and fine.
    Move such directories out of the repository.
    """, "REPO-01",
    example=Example(H + IO, siblings=(Sibling(".ipynb_checkpoints", None, ()),)))
CUSTOM_CONFIG_MISSING = register(
    "REPO51", "--model-config-name config is missing; Triton falls back silently", "warning",
    """
    With --model-config-name=<n>, Triton reads <model>/configs/<n>.pbtxt when it
    exists and otherwise silently uses <model>/config.pbtxt (or auto-complete). A
    missing custom config therefore goes unnoticed: the model runs with its default
    configuration. Add configs/<n>.pbtxt, or drop the option for this model.
    """, "REPO-05")
ROOT_PBTXT = register(
    "REPO52", "a .pbtxt file in the model directory that Triton never reads", "warning",
    """
    Triton reads exactly <model>/config.pbtxt, or <model>/configs/<n>.pbtxt with
    --model-config-name=<n>. Another .pbtxt next to config.pbtxt is ignored (issue
    #8093: a custom config placed in the model root seemed to be ignored). Move it to
    configs/<n>.pbtxt if it is meant as a custom config, or remove it.
    """, "REPO-05",
    example=Example(H + IO, files=("1/model.py", "config_gpu.pbtxt")))
CONFIG_NEAR_MISS = register(
    "REPO53", "config file with almost the right name", "warning",
    """
    The model directory has no config.pbtxt but a file whose name is close to it
    (config.pbtxt.txt, Config.pbtxt, config.txt, 1/config.pbtxt). Triton ignores that
    file and auto-completes the configuration from the model file instead, which
    often ends in "Could not determine backend" or in a different configuration than
    intended. Rename it to config.pbtxt in the model directory.
    """, "REPO-04",
    example=Example(None, files=("1/model.py", "config.pbtx")))
NOT_CHECKED = register(
    "REPO54", "checks that need the repository were not run", "info",
    """
    A config file given on its own (or a directory with --config-only) gets every check
    that needs only the config. What needs the files around it - version directories,
    model files, label and data files, the models an ensemble runs - is left out and
    listed once in this line. This is how configs kept in git apart from their weights
    are linted in CI; validate the model repository itself to run every check.
    """)

# DALI's backend falls back to this pipeline definition (autoserialized at load) when the model
# file (model.dali or default_model_filename) is missing or not a serialized pipeline.
DALI_FALLBACK_FILE = "dali.py"
CACHE_DIRS = frozenset({"__pycache__", ".ipynb_checkpoints", ".git", ".svn", ".hg", ".idea", ".vscode"})
# Backends whose default model file name is known; others (custom, python-based) are not checked.
DEFAULT_FILES = {
    "onnxruntime": "model.onnx", "tensorrt": "model.plan", "pytorch": "model.pt", "python": "model.py",
    "openvino": "model.xml", "dali": "model.dali",
}
# The tensorflow backend's default file depends on the platform.
TENSORFLOW_FILES = {"tensorflow_savedmodel": "model.savedmodel", "tensorflow_graphdef": "model.graphdef"}


# The files a backend's Python runtime (runtime: "model.py") loads, in its order, after
# default_model_filename: PyTorch's takes a torch.nn.Module from model.py or TorchScript model.pt.
PYTHON_RUNTIME_FILES = {"pytorch": ("model.py", "model.pt")}


def default_file(config) -> str:
    """The model file name a backend looks for when default_model_filename is unset ("" if none)."""
    if runs_python_runtime(config):
        return ""  # the runtime's model.py decides (check_python_runtime_files)
    if config.backend == "tensorflow":
        return TENSORFLOW_FILES.get(config.platform, "")
    return DEFAULT_FILES.get(config.backend, "")


def is_stray_dir(name: str) -> bool:
    return name.startswith(".") or name in CACHE_DIRS


def anchor(ctx) -> tuple:
    """The written field a model-wide diagnostic points at (backend, platform...)."""
    for path in (("default_model_filename",), ("backend",), ("platform",), ("name",), ("max_batch_size",)):
        if ctx.written(path):
            return path
    return ()


def versions_to_load(ctx) -> dict[int, Path]:
    """Version number -> directory for the versions the version policy selects (VP-03)."""
    numeric: dict[int, Path] = {}
    for v in ctx.versions:
        if v.version is not None and (not v.reason or v.version not in numeric):
            numeric[v.version] = v.path
    policy = ctx.effective.version_policy
    kind = policy.WhichOneof("policy_choice")
    if kind == "all":
        chosen = list(numeric)
    elif kind == "specific":
        chosen = [v for v in policy.specific.versions if v in numeric]
    else:
        chosen = sorted(numeric, reverse=True)[:max(policy.latest.num_versions, 0)]
    return {v: numeric[v] for v in sorted(chosen)}


@repository_rule
def check_root_directories(repo) -> None:
    if repo.root is None:
        return
    for name, ctx in repo.models.items():
        if is_stray_dir(name):
            repo.report(STRAY_ROOT_DIR,
                        f"'{name}' in the repository root will be loaded as a model and fail",
                        path=ctx.model_dir,
                        hint=f"move '{name}' out of the model repository; Triton has no ignore list")
            # It is not meant as a model: this warning says all there is to say about it.
            ctx.checked = True


def _near_miss_configs(model_dir: Path) -> list[Path]:
    found = []
    try:
        entries = sorted(model_dir.iterdir())
    except OSError:
        return found
    for entry in entries:
        if entry.is_file() and entry.name != CONFIG_FILENAME:
            lowered = entry.name.lower()
            if lowered.startswith("config") or difflib.SequenceMatcher(None, lowered, CONFIG_FILENAME).ratio() > 0.8:
                found.append(entry)
        elif entry.is_dir() and (entry / CONFIG_FILENAME).is_file():
            found.append(entry / CONFIG_FILENAME)
    return found


@model_rule
def check_config_file_names(ctx) -> None:
    if is_stray_dir(ctx.name) or ctx.options.config_only:
        return  # a config on its own has no model directory around it to judge
    model_dir = ctx.model_dir
    config_name = ctx.source.config_name
    if config_name and not (model_dir / "configs" / f"{config_name}.pbtxt").is_file():
        target = f"configs/{config_name}.pbtxt"
        fallback = "config.pbtxt" if (model_dir / CONFIG_FILENAME).is_file() else "auto-complete"
        ctx.report(CUSTOM_CONFIG_MISSING,
                   f"model '{ctx.name}' has no {target}; Triton silently uses {fallback} instead",
                   hint=f"add {model_dir.name}/{target}, or check the --model-config-name value",
                   file=model_dir)
    near = _near_miss_configs(model_dir) if not (model_dir / CONFIG_FILENAME).is_file() else []
    try:
        stray = sorted(p for p in model_dir.glob("*.pbtxt") if p.name != CONFIG_FILENAME and p.is_file()
                       and p != ctx.config_path and p not in near)
    except OSError:
        stray = []
    for path in stray:
        ctx.report(ROOT_PBTXT, f"Triton never reads {model_dir.name}/{path.name}",
                   hint=f"custom configs belong in {model_dir.name}/configs/{path.name} and are picked with "
                        f"--model-config-name={path.stem}", file=path)
    for path in near:
        where = path.relative_to(model_dir)
        ctx.report(CONFIG_NEAR_MISS,
                   f"model '{ctx.name}' has no config.pbtxt, but has '{where}', which Triton ignores",
                   hint=f"rename it to {model_dir.name}/config.pbtxt", file=path)


def required_files(ctx) -> list[tuple[str, tuple]]:
    """(file name, config path to point at) that each loaded version needs; names that
    are paths are PB11's finding and left out."""
    config = ctx.effective
    cc_files = dict(config.cc_model_filenames)
    if cc_files:
        return [(name, ("cc_model_filenames", key, "value")) for key, name in sorted(cc_files.items())
                if not path_problem(name)]
    filename = config.default_model_filename or default_file(config)
    return [(filename, anchor(ctx))] if filename and not path_problem(filename) else []


def _check_python_runtime_files(ctx) -> None:
    config = ctx.effective
    files = PYTHON_RUNTIME_FILES.get(config.backend)
    if files is None or not ctx.can_check(MODEL_FILES):
        return  # another backend's Python runtime: its model.py decides what it loads
    names = list(dict.fromkeys(([config.default_model_filename] if config.default_model_filename else []) + list(files)))
    for version, version_dir in versions_to_load(ctx).items():
        if any((version_dir / name).exists() for name in names):
            continue
        present = sorted(p.name for p in version_dir.iterdir()) if version_dir.is_dir() else []
        found = f" (it holds: {', '.join(present)})" if present else " (it is empty)"
        ctx.report(MISSING_MODEL_FILE,
                   f"version {version} of model '{ctx.name}' has none of {', '.join(names)}, the files the "
                   f"{config.backend} backend's Python runtime (runtime: \"model.py\") loads{found}", ("runtime",),
                   hint=f"put the torch.nn.Module's model.py or the TorchScript model.pt into "
                        f"{ctx.name}/{version_dir.name}/" if config.backend == "pytorch" else
                        f"put {names[0]} into {ctx.name}/{version_dir.name}/")


def path_problem(name: str) -> str | None:
    """Why a model file name is not a plain file name, or None."""
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if name in (".", ".."):
        return "names a directory, not a file"
    return None


@model_rule
def check_model_file_names(ctx) -> None:
    named = [(ctx.config.default_model_filename, ("default_model_filename",), "default_model_filename")]
    named += [(value, ("cc_model_filenames", key, "value"), f"cc_model_filenames[{key!r}]")
              for key, value in sorted(ctx.config.cc_model_filenames.items())]
    for name, path, what in named:
        problem = path_problem(name) if name else None
        if problem:
            plain = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
            plain = plain if plain not in ("", ".", "..") else "model.onnx"
            ctx.report(FILENAME_IS_A_PATH, f"{what} '{name}' {problem}; Triton looks for the file in each "
                       "version directory", path,
                       hint=f'write only the file name (e.g. "{plain}") and put the file into the version directory')


@model_rule
def check_model_files_present(ctx) -> None:
    if ctx.is_ensemble or is_stray_dir(ctx.name) or ctx.config_path is None:
        return
    if runs_python_runtime(ctx.effective):
        _check_python_runtime_files(ctx)
        return
    if not default_file(ctx.effective) and not ctx.written(("default_model_filename",)):
        return
    if not ctx.can_check(MODEL_FILES):
        return
    for version, version_dir in versions_to_load(ctx).items():
        for filename, path in required_files(ctx):
            target = version_dir / filename
            if filename == "model.onnx" and target.is_dir():
                if not (target / "model.onnx").is_file():
                    ctx.report(MISSING_MODEL_FILE,
                               f"{version_dir.name}/model.onnx is a directory without model.onnx inside",
                               path, hint=f"an ONNX directory must hold {version_dir.name}/model.onnx/model.onnx "
                                          "next to its external data files")
                continue
            if target.exists():
                continue
            present = sorted(p.name for p in version_dir.iterdir()) if version_dir.is_dir() else []
            found = f" (it holds: {', '.join(present)})" if present else " (it is empty)"
            if ctx.effective.backend == "dali":
                if (version_dir / DALI_FALLBACK_FILE).is_file():
                    continue  # DALI builds the pipeline from dali.py (autoserialization)
                ctx.report(MISSING_MODEL_FILE,
                           f"version {version} of model '{ctx.name}' has neither {filename} nor "
                           f"{DALI_FALLBACK_FILE}{found}", path,
                           hint=f"put the serialized pipeline at {ctx.name}/{version_dir.name}/{filename}, or "
                                f"the @autoserialize pipeline definition at {ctx.name}/{version_dir.name}/"
                                f"{DALI_FALLBACK_FILE}")
                continue
            ctx.report(MISSING_MODEL_FILE,
                       f"version {version} of model '{ctx.name}' has no {filename}{found}",
                       path, hint=f"put {filename} into {ctx.name}/{version_dir.name}/, or set "
                                  "default_model_filename to the file's name")
