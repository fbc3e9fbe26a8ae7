"""The Python a model's stub process runs: the server's own, or the one of the model's
``EXECUTION_ENV_PATH`` parameter, as Triton's Python backend honours it. The value names
(``$$TRITON_MODEL_DIRECTORY/...``) either a directory holding ``bin/python3`` (a venv or an
unpacked conda environment), used as it is, or a packed one (any file: a tar archive, compressed
or not, as conda-pack writes), unpacked once into the cache directory (``$XDG_CACHE_HOME/tritonctl/python_envs``,
keyed by the archive's path, size and modification time; conda-pack's ``conda-unpack`` run there)
and reused by every instance and load.
The stub then runs with that environment's ``bin`` first on ``PATH`` and its ``lib`` first on
``LD_LIBRARY_PATH``, as Triton's stub launcher does."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tritonctl.repo_schema.rules.parameters import MODEL_DIR_VARIABLE
from tritonctl.serve.core.backend_api import BackendLoadError

ENV_PATH = "EXECUTION_ENV_PATH"
UNPACKED_MARKER = ".tritonctl-unpacked"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tritonctl" / "python_envs"


def python_for(config, model_dir: Path) -> tuple[str, dict]:
    """The interpreter and the environment variables of a model's stub process."""
    env = dict(os.environ)
    value = config.parameters[ENV_PATH].string_value if ENV_PATH in config.parameters else ""
    if not value:
        return sys.executable, env
    path = Path(value.replace(MODEL_DIR_VARIABLE, str(model_dir), 1))
    if path.is_dir():
        root = path
    elif path.is_file():
        root = unpacked(path, config.name)
    else:
        raise BackendLoadError(f"{ENV_PATH} '{value}' of model '{config.name}' names '{path}', which does not exist; "
                               "point it at an environment directory with bin/python3 or at a packed one (a .tar.gz "
                               "as conda-pack writes)")
    python = next((root / "bin" / name for name in ("python3", "python") if (root / "bin" / name).exists()), None)
    if python is None:
        raise BackendLoadError(f"the environment '{root}' of model '{config.name}' ({ENV_PATH}) has no bin/python3; "
                               "make it with 'python -m venv' or 'conda create', and pack it with conda-pack")
    env["PATH"] = os.pathsep.join([str(root / "bin"), env.get("PATH", "")])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(root / "lib"), env.get("LD_LIBRARY_PATH", "")]))
    env.pop("PYTHONHOME", None)
    return str(python), env


def unpacked(archive: Path, model: str) -> Path:
    """The directory ``archive`` is unpacked in, unpacking it the first time. It is unpacked in
    place, where it will be used: conda-pack's ``conda-unpack`` rewrites the environment's prefixes
    to where it lies. A file lock keeps servers that load the same archive at once from unpacking
    it over each other; a marker file says the unpacking finished."""
    stat = archive.stat()
    key = hashlib.sha256(f"{archive.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:20]
    target = cache_root() / key
    finished = target / UNPACKED_MARKER
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{key}.lock", "w") as lock:  # flock: other threads open it anew and wait too
        fcntl.flock(lock, fcntl.LOCK_EX)
        if finished.is_file():
            return target
        shutil.rmtree(target, ignore_errors=True)  # what an unpacking cut short left
        try:
            target.mkdir()
            with tarfile.open(archive) as tar:
                if hasattr(tarfile, "tar_filter"):
                    tar.extractall(target, filter="tar")  # no member lands outside the directory
                else:
                    tar.extractall(target)
            unpack_script = target / "bin" / "conda-unpack"
            if unpack_script.is_file():  # conda-pack: run as its docs say, with the environment's Python
                python = next((target / "bin" / n for n in ("python3", "python") if (target / "bin" / n).exists()),
                              Path(sys.executable))
                subprocess.run([str(python), str(unpack_script)], check=True, capture_output=True)
            finished.touch()
        except (OSError, tarfile.TarError, subprocess.CalledProcessError) as exc:
            shutil.rmtree(target, ignore_errors=True)
            raise BackendLoadError(f"unable to unpack the environment '{archive}' of model '{model}' "
                                   f"({ENV_PATH}) into '{target}': {exc}") from None
    return target
