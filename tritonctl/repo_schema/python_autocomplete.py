"""Evaluating a Python model's ``auto_complete_config`` the way Triton's Python backend does.

Triton runs the model's ``TritonPythonModel.auto_complete_config`` once at load, in a separate
stub process, before any instance exists, and loads the model with the config it returns. So
does ``validate``: ``model.py`` runs in a child process (``python_autocomplete_stub``) with a
time limit and Triton's ``pb_utils.ModelConfig`` API; the completed config is then checked like
any other. ``ModelCodePolicy(run=False)`` (``validate --no-exec``) never starts that process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tritonctl.repo_schema.modelfiles.python import read_python_model
from tritonctl.repo_schema.pb_config import config_to_json

# Triton's Python backend gives its stub process `stub-timeout-seconds` (30 by default) to answer.
DEFAULT_TIMEOUT_S = 30.0
STDERR_TAIL = 600  # characters of the model's output quoted in a diagnostic
KILL_GRACE_S = 5.0  # for the output of a killed stub to be read
PARALLEL_STUBS = 4  # stubs run side by side in a repository, like Triton's default model-load threads


@dataclass(frozen=True)
class ModelCodePolicy:
    """Whether ``validate`` may run model code (Python ``auto_complete_config``), and how long."""

    run: bool = True
    timeout_s: float = DEFAULT_TIMEOUT_S


# What came of a model's auto_complete_config (``PythonCompletion.outcome``):
NO_HOOK = "no_hook"  # no auto_complete_config: Triton uses the config as written
COMPLETED = "completed"  # it ran and returned a config (``config``)
FAILED = "failed"  # Triton would refuse the model (``message`` says why, in Triton's words)
TIMED_OUT = "timed_out"  # it did not return within the time limit
CRASHED = "crashed"  # its process died before returning
NOT_RUN = "not_run"  # model code may not be run (--no-exec)
UNAVAILABLE = "unavailable"  # it needs something this machine lacks (a package, a running server)
NOT_READ = "not_read"  # only the config is checked: model.py is not looked at


@dataclass
class PythonCompletion:
    outcome: str
    config: object | None = None  # the completed ModelConfig when outcome is COMPLETED
    message: str = ""
    model_file: Path | None = None
    line: int | None = None  # where in model_file, when known

    @property
    def evaluated(self) -> bool:
        """Whether the config Triton would run is known: completed, or nothing to complete."""
        return self.outcome in (NO_HOOK, COMPLETED)


def may_autocomplete(model_file: Path) -> bool:
    """Read statically: the model defines ``auto_complete_config`` or may inherit one."""
    try:
        info = read_python_model(model_file)
    except OSError:
        return False
    if info.syntax_error or not info.has_model_class:
        return False  # it cannot load at all; the model-file rules say so
    return info.autocompletes or info.has_bases


def complete_config(config, model_file: Path, policy: ModelCodePolicy) -> PythonCompletion:
    """``config`` (normalized) as ``model_file``'s ``auto_complete_config`` completes it."""
    if not model_file.is_file() or not may_autocomplete(model_file):
        return PythonCompletion(NO_HOOK, model_file=model_file)
    if not policy.run:
        return PythonCompletion(NOT_RUN, message="model code is not run (--no-exec)", model_file=model_file)

    absolute = model_file.resolve()
    request = {"model_file": str(absolute), "name": config.name, "config": json.dumps(config_to_json(config))}
    answer = _run_stub(request, absolute.parent, policy.timeout_s)
    if isinstance(answer, PythonCompletion):
        answer.model_file = model_file
        return answer
    return _interpret(answer, config, model_file)


def _run_stub(request: dict, cwd: Path, timeout_s: float) -> dict | PythonCompletion:
    command = [sys.executable, "-m", "tritonctl.repo_schema.python_autocomplete_stub"]
    # The stub imports this package: make sure it finds the same one, however it was installed.
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    try:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   cwd=cwd, env=env, start_new_session=True)
    except OSError as exc:
        return PythonCompletion(UNAVAILABLE, message=f"cannot start a Python process ({exc.strerror or exc})")
    try:
        out, err = process.communicate(json.dumps(request).encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(process)
        try:
            _, err = process.communicate(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:  # a process the model detached still holds the pipes
            err = b""
            for pipe in (process.stdout, process.stderr):
                pipe.close()
            process.wait()
        return PythonCompletion(TIMED_OUT, message=f"importing {Path(request['model_file']).name} and running "
                                f"auto_complete_config took longer than {timeout_s:g} s{_tail(err)}")
    if process.returncode == 0 and out:
        try:
            return json.loads(out)
        except ValueError:
            pass
    how = (f"was killed by {_signal_name(-process.returncode)}" if process.returncode < 0
           else f"exited with status {process.returncode}")
    return PythonCompletion(CRASHED, message=f"the process running auto_complete_config {how} before it "
                            f"returned{_tail(err)}")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _kill(process: subprocess.Popen) -> None:
    """Kill the stub and whatever the model started (they share its session, on POSIX)."""
    if hasattr(os, "killpg"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


def _tail(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace").strip()
    if not text:
        return ""
    if len(text) > STDERR_TAIL:
        text = "..." + text[-STDERR_TAIL:]
    return f"; its last output: {text}"


def _interpret(answer: dict, config, model_file: Path) -> PythonCompletion:
    status = answer.get("status")
    line = answer.get("line") if answer.get("file") and Path(answer["file"]).resolve() == model_file.resolve() \
        else None
    where = f" (at {Path(answer['file']).name}:{answer['line']} in {answer['function']})" if answer.get("file") else ""
    if status == NO_HOOK:
        return PythonCompletion(NO_HOOK, model_file=model_file)
    if status == UNAVAILABLE:
        return PythonCompletion(UNAVAILABLE, message=f"{answer['reason']}{where}", model_file=model_file, line=line)
    if status == "error":
        stage = {"import": f"importing {model_file.name} fails: ", "call": "auto_complete_config raises "}.get(
            answer.get("stage"), "")  # "return": Triton's own sentence
        return PythonCompletion(FAILED, message=f"{stage}{answer['error']}{where}", model_file=model_file, line=line)
    completed, problem = parse_completed(answer.get("config", ""), type(config))
    if completed is None:
        return PythonCompletion(FAILED, message=problem, model_file=model_file)
    return PythonCompletion(COMPLETED, config=completed, model_file=model_file)


def parse_completed(text: str, message_type) -> tuple[object | None, str]:
    """The ModelConfig that ``auto_complete_config`` returned (as JSON text), or None and why not."""
    from google.protobuf import json_format

    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"auto_complete_config returned a config that is not JSON: {exc}"
    if not isinstance(data, dict):
        return None, "auto_complete_config returned a config that is not a JSON object"
    completed = message_type()
    try:
        json_format.ParseDict(data, completed)
    except (json_format.ParseError, TypeError, ValueError, AttributeError) as exc:
        return None, f"auto_complete_config returned a config Triton cannot parse: {exc}"
    return completed, ""
