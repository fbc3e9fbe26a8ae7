"""Where candidates run: the bundled server (a subprocess or in-process), a running server (``--url``),
or a local ``tritonserver``. Every engine applies a candidate the same way, through the repository
load API with a ``config`` override, so what works on the bundled server works on a real Triton.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tritonctl.analyzer.hardware import fingerprint, fingerprint_id
from tritonctl.analyzer.search import AnalyzeError, Candidate
from tritonctl.perf.client import stats_from_json
from tritonctl.perf.measurement import ServerStats
from tritonctl.perf.options import PerfOptions
from tritonctl.perf.run import PerfResult, run_perf

ENGINES = ("subprocess", "inprocess", "url", "triton")
START_TIMEOUT_S = 180.0
LOAD_TIMEOUT_S = 600.0  # a large model can take minutes to load
STATS_TIMEOUT_S = 10.0
SERVING_LINE = re.compile(r": HTTP (\d+|None), gRPC (\d+|None), metrics (\d+|None)\s*$")


class LoadFailed(Exception):
    """The server refused a candidate config; the message is the server's."""


class Engine:
    """A server with explicit model control. ``start`` it, ``apply`` candidates, always ``stop`` it."""

    kind = ""
    url = ""  # host:port of ``protocol``

    def __init__(self, repository: Path, protocol: str):
        self.repository = repository
        self.protocol = protocol

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        pass

    def restore(self, model: str) -> None:
        """Leave the model as it was before the run (only a server analyze did not start needs it)."""

    def describe(self) -> str:
        return self.kind

    def apply(self, model: str, candidate: Candidate | None) -> None:
        """Load (or reload) ``model`` with the candidate's config (None: its own config in the
        repository); raises LoadFailed with the reason."""
        self._load(model, candidate.config_json if candidate is not None else None)

    def measure(self, perf: PerfOptions) -> PerfResult:
        """Run the load ``perf`` describes against this server (its ``url`` is the server's)."""
        return run_perf(perf)

    def statistics(self, model: str) -> ServerStats | None:
        """The model's cumulative statistics, or None when the server gives none."""
        try:
            if self.protocol == "grpc":
                import tritonclient.grpc as grpcclient

                client = grpcclient.InferenceServerClient(self.url)
                try:
                    return stats_from_json(client.get_inference_statistics(model, as_json=True,
                                                                           client_timeout=STATS_TIMEOUT_S))
                finally:
                    client.close()
            address = f"http://{self.url}/v2/models/{urllib.parse.quote(model)}/stats"
            with urllib.request.urlopen(address, timeout=STATS_TIMEOUT_S) as response:
                return stats_from_json(json.loads(response.read()))
        except Exception:  # a server without the statistics extension: no shares, the numbers still count
            return None

    @property
    def hardware(self) -> dict:
        """The fingerprint of the machine the measurements are made on (``analyzer.hardware``)."""
        return fingerprint()

    def _load(self, model: str, config_json: str | None) -> None:
        """The repository extension's load: HTTP with urllib (no gevent loop for Ctrl-C to land in),
        gRPC with tritonclient."""
        try:
            if self.protocol == "grpc":
                self._load_grpc(model, config_json)
            else:
                self._load_http(model, config_json)
        except LoadFailed as exc:
            message = str(exc)
            if "explicit model load" in message or "polling is enabled" in message:
                raise AnalyzeError(f"the server at {self.url} does not accept model loads ({message}): start it "
                                   "with --model-control-mode explicit") from None
            raise

    def _load_http(self, model: str, config_json: str | None) -> None:
        body = json.dumps({"parameters": {"config": config_json}} if config_json is not None else {}).encode()
        request = urllib.request.Request(f"http://{self.url}/v2/repository/models/{urllib.parse.quote(model)}/load",
                                         data=body, method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=LOAD_TIMEOUT_S):
                return
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                text = json.loads(text).get("error", text)
            except (ValueError, AttributeError):
                pass
            raise LoadFailed(text.strip() or f"HTTP {exc.code}") from None
        except OSError as exc:  # refused, reset, timed out
            raise AnalyzeError(f"cannot reach the server at {self.url} to load '{model}': "
                               f"{getattr(exc, 'reason', exc)}") from None

    def _load_grpc(self, model: str, config_json: str | None) -> None:
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException

        client = grpcclient.InferenceServerClient(self.url)
        try:
            client.load_model(model, config=config_json, client_timeout=LOAD_TIMEOUT_S)
        except InferenceServerException as exc:
            message = exc.message() or str(exc)
            if "StatusCode.UNAVAILABLE" in str(exc.status()):
                raise AnalyzeError(f"cannot reach the server at {self.url} to load '{model}': {message}") from None
            raise LoadFailed(message) from None
        finally:
            client.close()

    def _live(self) -> bool:
        if self.protocol == "grpc":
            import tritonclient.grpc as grpcclient

            client = grpcclient.InferenceServerClient(self.url)
            try:
                return client.is_server_live(client_timeout=10)
            finally:
                client.close()
        return _http_ok(f"http://{self.url}/v2/health/live")


class InProcessEngine(Engine):
    """The bundled server on a thread of this process (load generation and serving share the GIL)."""

    kind = "inprocess"

    def start(self) -> None:
        from tritonctl.serve.runtime import BackgroundServer, ServeOptions

        grpc = self.protocol == "grpc"
        options = ServeOptions(self.repository, http_port=None if grpc else 0, grpc_port=0 if grpc else None,
                               metrics_port=None, control_mode="explicit", exit_timeout_secs=5)
        self._server = BackgroundServer(options).start()
        self.url = self._server.grpc_url if grpc else self._server.http_url

    def stop(self) -> None:
        server = getattr(self, "_server", None)
        if server is not None:
            server.stop()
            self._server = None

    def describe(self) -> str:
        return "bundled server in-process"


class ProcessEngine(Engine):
    """A server in a child process: in its own session (Ctrl-C reaches only analyze, which stops it
    in order) and, on Linux, killed by the kernel when analyze dies."""

    def __init__(self, repository: Path, protocol: str, log_path: Path):
        super().__init__(repository, protocol)
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def _spawn(self, command: list[str]) -> int:
        """Start ``command`` with its output appended to the log; returns the log offset it starts at."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            try:
                self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, start_new_session=True,
                                                preexec_fn=_die_with_parent(os.getpid()))
            except OSError as exc:
                raise AnalyzeError(f"cannot start {command[0]}: {exc}") from None
        return offset

    def _start(self, command: list[str], url: Callable[[int], str | None], failure: str) -> None:
        """Spawn ``command`` and poll ``url(log offset)`` until it gives the server's address."""
        offset = self._spawn(command)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self._exited(offset)
            address = url(offset)
            if address:
                self.url = address
                return
            time.sleep(0.1)
        self.stop()
        raise AnalyzeError(f"{failure} within {START_TIMEOUT_S:g} s; see {self.log_path}")

    def _log_tail(self, offset: int, lines: int = 15) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def apply(self, model: str, candidate: Candidate | None) -> None:
        self._raise_if_exited()
        try:
            super().apply(model, candidate)
        except AnalyzeError:
            # A server that cannot be reached may be one that is dying: then that is the news.
            if self.process is not None:
                try:
                    self.process.wait(2)
                except subprocess.TimeoutExpired:
                    pass
            self._raise_if_exited()
            raise

    def _raise_if_exited(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise AnalyzeError(f"the {self.describe()} exited (status {self.process.returncode}); its log "
                               f"({self.log_path}) ends with:\n{self._log_tail(0)}")

    def _exited(self, offset: int) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise AnalyzeError(f"the {self.describe()} exited during start-up (status {self.process.returncode}); "
                               f"its log ({self.log_path}) ends with:\n{self._log_tail(offset)}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


class SubprocessEngine(ProcessEngine):
    """``python -m tritonctl serve REPO --model-control-mode explicit`` on a free port (the default)."""

    kind = "subprocess"

    def start(self) -> None:
        grpc = self.protocol == "grpc"
        command = [sys.executable, "-m", "tritonctl", "serve", str(self.repository),
                   "--model-control-mode", "explicit", "--http-port", "-1" if grpc else "0",
                   "--grpc-port", "0" if grpc else "-1", "--metrics-port", "-1", "--exit-timeout-secs", "5"]

        def url(offset: int) -> str | None:
            match = next(filter(None, map(SERVING_LINE.search, self._log_tail(offset, 50).splitlines())), None)
            return f"127.0.0.1:{match.group(2) if grpc else match.group(1)}" if match else None

        self._start(command, url, "the bundled server did not start")

    def describe(self) -> str:
        return "bundled server subprocess"


class TritonEngine(ProcessEngine):
    """A local ``tritonserver`` in explicit model-control mode on free loopback ports."""

    kind = "triton"

    def __init__(self, repository: Path, protocol: str, log_path: Path, binary: str | None,
                 extra_args: tuple[str, ...] = ()):
        super().__init__(repository, protocol, log_path)
        self.binary = find_tritonserver(binary)
        self.extra_args = extra_args

    def start(self) -> None:
        from tritonctl.serve.tritonserver import TritonserverOptions, tritonserver_command

        http, grpc, metrics = free_ports(3)
        command = tritonserver_command(self.binary, TritonserverOptions(
            self.repository, http_port=http, grpc_port=grpc, metrics_port=metrics, control_mode="explicit",
            exit_timeout_secs=5, extra_args=list(self.extra_args)))

        def url(_offset: int) -> str | None:
            if not _http_ok(f"http://127.0.0.1:{http}/v2/health/live"):
                return None
            return f"127.0.0.1:{grpc if self.protocol == 'grpc' else http}"

        self._start(command, url, "tritonserver did not become live")

    def describe(self) -> str:
        return f"tritonserver ({self.binary})"


class UrlEngine(Engine):
    """A server someone else started, in explicit model-control mode; its model is reloaded from its
    own repository at the end, so it is left as it was found."""

    kind = "url"

    def __init__(self, url: str, protocol: str):
        super().__init__(Path("."), protocol)
        self.url = url.split("://", 1)[-1].rstrip("/")

    def start(self) -> None:
        try:
            live = self._live()
        except Exception as exc:  # gRPC: refused or not a gRPC server
            raise AnalyzeError(f"cannot reach a server at {self.url} over {self.protocol}: {exc}") from None
        if not live:
            raise AnalyzeError(f"no live server at {self.url} over {self.protocol} (GET /v2/health/live); start "
                               "one in explicit model-control mode, or check the address and -i")

    def restore(self, model: str) -> None:
        try:
            self.apply(model, None)
        except LoadFailed:
            pass  # the model's own config does not load on that server: nothing better to leave behind

    def describe(self) -> str:
        return f"server at {self.url}"

    @property
    def hardware(self) -> dict:
        """The server's machine is not known from here: this machine's fingerprint and the server's
        address, so that measurements of different servers are never compared."""
        values = {**fingerprint(), "server": self.url}
        return {**values, "id": fingerprint_id(values)}


def make_engine(kind: str, repository: Path, protocol: str, log_path: Path, url: str | None = None,
                tritonserver: str | None = None, triton_args: tuple[str, ...] = ()) -> Engine:
    if kind not in ENGINES:
        raise AnalyzeError(f"--engine {kind!r}: use one of {', '.join(ENGINES)}")
    if url and kind != "url":
        raise AnalyzeError("--url analyzes on a running server; it cannot be combined with --engine " + kind)
    if kind == "url":
        if not url:
            raise AnalyzeError("--engine url needs --url HOST:PORT of a server in explicit model-control mode")
        return UrlEngine(url, protocol)
    if kind == "inprocess":
        return InProcessEngine(repository, protocol)
    if kind == "triton":
        return TritonEngine(repository, protocol, log_path, tritonserver, triton_args)
    return SubprocessEngine(repository, protocol, log_path)


def model_gpus(kind: str) -> Callable[[str], tuple[int, ...]] | None:
    """How the server of engine ``kind`` gives GPUs to a model of a backend, for planning its
    candidates: the bundled server's own answer (without onnxruntime's or torch's CUDA build, their
    models run on the CPU), or None for tritonserver and a running server (the driver's GPUs)."""
    if kind not in ("subprocess", "inprocess"):
        return None
    from tritonctl.serve.runtime import model_gpus as bundled_server_gpus

    return bundled_server_gpus


def find_tritonserver(binary: str | None) -> str:
    from tritonctl.serve.tritonserver import TritonserverError, find_tritonserver as find

    try:
        return find(binary)
    except TritonserverError as exc:
        raise AnalyzeError(str(exc)) from None


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (held open together so none repeats)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _die_with_parent(parent: int):
    """A preexec function: the child gets SIGTERM when analyze dies, even by SIGKILL (Linux)."""
    if not sys.platform.startswith("linux"):
        return None

    def arm() -> None:
        import ctypes

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            return
        if os.getppid() != parent:  # analyze died before the request took effect
            os._exit(1)

    return arm
