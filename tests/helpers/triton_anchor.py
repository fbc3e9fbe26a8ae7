"""Drive the real Triton Inference Server prepared by ``../shared/anchors`` (see its README).

Nothing here installs anything: when ``setup_triton.sh`` has not been run,
``unavailable_reason()`` says why and the caller skips.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tritonctl.analyzer.engine import free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
ANCHORS = REPO_ROOT.parent / "shared" / "anchors"

# Refusals that come from this machine (CPU only, python backend only), not from the config.
ENVIRONMENT_REFUSALS = ("no GPUs are available", "unable to find backend library", "for repo agent")
# Logged when a python model has no model file; its load then stays LOADING forever.
STUB_FAILED = "Failed to preinitialize Python stub"


def triton_home() -> Path:
    """Where ``setup_triton.sh`` put the server environment (same rule as the anchor scripts)."""
    if os.environ.get("TRITON_HOME"):
        return Path(os.environ["TRITON_HOME"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "tritonctl-anchor" / "triton_env"


def unavailable_reason() -> str | None:
    """Why the real Triton cannot be started here, or None when it can."""
    if not (ANCHORS / "run_triton.sh").is_file():
        return f"no Triton anchor scripts at {ANCHORS} (../shared/anchors beside the repository)"
    env_file = triton_home() / "triton_env.sh"
    if not env_file.is_file():
        return f"real Triton not set up: {env_file} missing (run: bash {ANCHORS / 'setup_triton.sh'})"
    return None


def tritonserver_wrapper(directory: Path) -> Path:
    """A ``tritonserver`` for --tritonserver: the anchor's binary with the environment and backend
    directory its run_triton.sh gives it (its Python stub needs numpy 1.x first on PATH). It execs
    the binary, so signals reach the server itself."""
    script = directory / "tritonserver"
    script.write_text(f"""#!/usr/bin/env bash
set -euo pipefail
source "{triton_home()}/triton_env.sh"
export PATH="$TRITON_VENV/bin:$PATH"
export LD_LIBRARY_PATH="${{TRITON_PYLIBDIR:+$TRITON_PYLIBDIR:}}$TRITON_LIBS${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
unset PYTHONHOME PYTHONPATH
exec "$TRITON_BIN" --backend-directory="$TRITON_BACKENDS" --pinned-memory-pool-byte-size=0 \\
  --backend-config=python,shm-region-prefix-name=tritonctl_$$_ "$@"
""")
    script.chmod(0o755)
    return script


@dataclass(frozen=True)
class LoadResult:
    """What ``POST /v2/repository/models/NAME/load`` answered, and what the server logged."""

    status: int | None  # HTTP status; None when the load never finished
    error: str = ""
    log: tuple[str, ...] = ()  # server log lines naming the model

    @property
    def loaded(self) -> bool:
        return self.status == 200

    @property
    def hung(self) -> bool:
        return self.status is None

    @property
    def refused_by_environment(self) -> bool:
        return any(text in said for said in (self.error, *self.log) for text in ENVIRONMENT_REFUSALS)

    def describe(self) -> str:
        if self.hung:
            return f"load never finished ({self.error}): counted as not loaded"
        return "loaded" if self.loaded else f"HTTP {self.status}: {self.error.strip()}"


class TritonServer:
    """A tritonserver in explicit model-control mode on free loopback ports, logging into
    ``workdir``. Use as a context manager: the server is stopped on exit whatever happened."""

    def __init__(self, repository: Path, workdir: Path, stop_timeout_s: int = 10, args: tuple[str, ...] = ()):
        self.repository = repository
        self.workdir = workdir
        self.stop_timeout_s = stop_timeout_s
        self.args = args  # more tritonserver options
        self.starts = 0
        self.pid: int | None = None
        self.http_port = self.grpc_port = self.metrics_port = 0

    def __enter__(self) -> "TritonServer":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def log(self) -> Path:
        return self.workdir / f"tritonserver-{self.starts}.log"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "TRITON_HOME": str(triton_home()), "TRITON_LOG": str(self.log),
                "TRITON_STOP_TIMEOUT": str(self.stop_timeout_s)}

    def start(self) -> None:
        self.starts += 1
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        command = [
            "bash", str(ANCHORS / "run_triton.sh"), str(self.repository),
            str(self.http_port), str(self.grpc_port), str(self.metrics_port),
            "--model-control-mode=explicit",
            "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1", *self.args,
        ]
        done = subprocess.run(command, env=self._env(), capture_output=True, text=True, timeout=240)
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"tritonserver did not start (exit {done.returncode}):\n{done.stderr}")
        self.pid = int(done.stdout.split()[-1])

    def stop(self, graceful: bool = True) -> None:
        """stop_triton.sh: SIGTERM, SIGKILL after ``stop_timeout_s``, shared-memory cleanup.
        ``graceful=False`` kills at once (a hung load blocks a graceful shutdown anyway)."""
        if not graceful and self.pid is not None and _alive(self.pid):
            _kill_with_children(self.pid)
        subprocess.run(["bash", str(ANCHORS / "stop_triton.sh"), str(self.http_port)], env=self._env(),
                       capture_output=True, timeout=self.stop_timeout_s + 30)
        if self.pid is not None and _alive(self.pid):
            _kill_with_children(self.pid)
        self.pid = None

    def restart(self) -> None:
        """Triton 2.51 blocks every later load behind one that hangs: only a new server helps."""
        self.stop(graceful=False)
        self.start()

    def _post(self, path: str, body: dict | None, timeout_s: float) -> LoadResult:
        data = json.dumps(body).encode() if body is not None else b""
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", data=data, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return LoadResult(response.status)
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                text = json.loads(text).get("error", text)
            except ValueError:
                pass
            return LoadResult(exc.code, text)
        except (OSError, urllib.error.URLError) as exc:  # timeout, or the server went away
            return LoadResult(None, str(getattr(exc, "reason", exc)))

    def load(self, model: str, timeout_s: float) -> LoadResult:
        """Load ``model``. A load that hangs (its python stub failed to start, or no answer
        within ``timeout_s``) comes back with ``hung`` set; restart the server after one."""
        answer: list[LoadResult] = []
        path = f"/v2/repository/models/{urllib.parse.quote(model)}/load"
        request = threading.Thread(target=lambda: answer.append(self._post(path, None, timeout_s)), daemon=True)
        request.start()
        deadline = time.monotonic() + timeout_s
        while request.is_alive() and time.monotonic() < deadline:
            request.join(0.2)
            stub_failure = [line for line in self.log_lines(model) if STUB_FAILED in line]
            if request.is_alive() and stub_failure:
                return LoadResult(None, stub_failure[-1].strip(), self.log_lines(model))
        result = answer[0] if answer else LoadResult(None, f"no answer within {timeout_s:g} s")
        return LoadResult(result.status, result.error, self.log_lines(model))

    def unload(self, model: str, dependents: bool = False, timeout_s: float = 30) -> LoadResult:
        body = {"parameters": {"unload_dependents": True}} if dependents else None
        return self._post(f"/v2/repository/models/{urllib.parse.quote(model)}/unload", body, timeout_s)

    def log_lines(self, model: str, limit: int = 8) -> tuple[str, ...]:
        """The lines of the current server log that name ``model`` (quoted, or in a path)."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ()
        marks = (f"'{model}'", f'"{model}"', f"/{model}/", f"loading: {model}:")
        found = []
        for previous, line in zip(["", *lines], lines):
            if any(mark in line for mark in marks):
                if "failed to read text proto" in line and "Error parsing text-format" in previous:
                    found.append(previous)  # protobuf's own message does not name the model
                found.append(line)
        return tuple(found[-limit:])


def _kill_with_children(pid: int) -> None:
    """SIGKILL ``pid`` and its child processes (Triton's Python stubs, which a killed server
    would otherwise leave running until they notice it is gone)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    for target in (pid, *children):
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
