"""Triton's Python backend with each model instance in a process of its own, as Triton's stub
(``--python-isolation process``): ``PythonBackend``'s request handling, with the model behind a
``RemoteModel`` whose ``execute`` sends the batch to the instance's stub process
(``serve.stub.main``) and rebuilds what it returns. Tensors cross in shared memory, never
pickled (``serve.stub.wire``). The stub runs the server's Python, or the one of the model's
``EXECUTION_ENV_PATH`` (``python_env``).

What a model asks of the server while it runs comes back as a message and is done here, where
the thread-mode code does it: a response sender's ``send`` (on the server's sender of that
request), ``is_cancelled``, BLS requests (``bls.execute`` in a thread of their own, with the
instance as caller, so scheduling, statistics and the deadlock check are the same).

A stub that dies (a segfault, ``os._exit``, the kernel's OOM killer) fails the requests it holds
with Triton's text, ``Failed to process the request(s) for model instance '<instance>', message:
Stub process '<instance>' is not healthy.``; the instance then reports not ready (so does its
model), later batches on it fail with ``The stub process has exited unexpectedly.``, and every
other model and instance keeps serving.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

from tritonctl.serve.backends import bls, pb_utils
from tritonctl.serve.backends.python import PythonBackend
from tritonctl.serve.backends.python_env import python_for
from tritonctl.serve.core.backend_api import BackendLoadError
from tritonctl.serve.core.custom_metrics import MetricError
from tritonctl.serve.core.errors import ServeError, internal
from tritonctl.serve.core.override_files import decode_base64_files
from tritonctl.serve.stub import wire
from tritonctl.serve.stub.main import BOOTSTRAP

log = logging.getLogger("tritonctl.serve")
model_log = logging.getLogger("tritonctl.serve.python_model")

# The parent directory of the tritonctl package, from which the stub imports its own modules.
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])
FINALIZE_S = 30.0  # how long finalize() may take before the stub is killed


REPLY_TO = "reply_to"  # set on each call the server reads: the channel its answers go back on


class StubDied(Exception):
    """The stub process exited while the server waited for it."""


class UnhealthyStub(Exception):
    """A batch sent to a stub that has died: its requests fail with ``error``."""

    def __init__(self, error: ServeError):
        super().__init__(error.message)
        self.error = error


class RemoteFailure(Exception):
    """execute() raised in the stub; ``text`` is its report (type, message, the model's frames)."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


def _named(type_name: str):
    """An object of a class called ``type_name``: what a model returned in the stub, for the texts
    that name its type."""
    return type(type_name, (), {})()


class StubProcess:
    """One stub process: its socket, the thread that reads it, and the answers waited for."""

    def __init__(self, python: str, env: dict, name: str, handle_call):
        self.name = name
        self.prefix = f"tritonctl-py-{os.getpid()}-{secrets.token_hex(4)}-"
        self._handle_call = handle_call  # (message) -> None, for the stub's calls and notes
        self._order_lock = threading.Lock()  # one order at a time
        self.alive = True
        # Two socket pairs: orders (load, execute, ...) and their results, read by the thread that
        # waits for them; calls (the stub's questions while a model runs, logs) and their
        # answers, read by a thread each side. An execution thus wakes one thread per side.
        ours, theirs = socket.socketpair()
        calls_ours, calls_theirs = socket.socketpair()
        self._forks = _ForkCalls(name, self._read_calls)
        try:
            self.process = subprocess.Popen(
                [python, "-c", BOOTSTRAP, str(theirs.fileno()), _PACKAGE_PARENT, self.prefix,
                 str(calls_theirs.fileno()), self._forks.address],
                pass_fds=(theirs.fileno(), calls_theirs.fileno()), env=env, stdin=subprocess.DEVNULL)
        except OSError as exc:
            ours.close()
            calls_ours.close()
            self._forks.close()
            raise BackendLoadError(f"unable to start the stub process of '{name}' with '{python}': {exc}") from None
        finally:
            theirs.close()
            calls_theirs.close()
        self.orders = wire.Channel(ours)
        self.channel = wire.Channel(calls_ours)
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"{name}-stub")
        self._reader.start()

    def _read_calls(self, channel: wire.Channel) -> None:
        """Hand each call read on ``channel`` on, until the other side closes it."""
        while True:
            message = channel.receive()
            if message is None:
                return
            message[REPLY_TO] = channel
            try:
                self._handle_call(message)
            except Exception:  # a message the stub sent wrongly must not end the reader
                log.exception("stub '%s': message %s failed", self.name, message.get("op"))

    def _read(self) -> None:
        self._read_calls(self.channel)
        self.alive = False
        self.process.wait()
        wire.remove_leftovers(self.prefix)
        self._handle_call({"op": "died"})

    def request(self, message: dict) -> dict:
        """Send an order and wait for the stub's answer; StubDied when it exits first."""
        with self._order_lock:
            if not self.alive:
                raise StubDied()
            try:
                self.orders.send(message)
            except OSError:
                self.alive = False
                raise StubDied() from None
            reply = self.orders.receive()
            if reply is None:
                self.alive = False
                raise StubDied()
            return reply

    def exit_reason(self) -> str:
        """How the process ended (its socket may close a moment before it is reaped)."""
        try:
            code = self.process.wait(1.0)
        except subprocess.TimeoutExpired:
            return "still running"
        return f"killed by signal {-code}" if code < 0 else f"exit status {code}"

    def stop(self, timeout_s: float) -> None:
        """End the process: it exits once its orders' socket closes (or by itself after finalize);
        killed after ``timeout_s``. What it sent before it ended (its last log lines) is read first."""
        self.orders.close()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout_s)
        self.channel.close()
        self._forks.close()
        wire.remove_leftovers(self.prefix)


class _ForkCalls:
    """Where a process the model forks (a ``multiprocessing`` pool, say) connects for its own calls
    to the server (BLS, logs): a Unix socket in a private directory, one reader per connection."""

    def __init__(self, name: str, read_calls):
        self._directory = tempfile.mkdtemp(prefix="tritonctl-stub-")
        self.address = os.path.join(self._directory, "calls")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.address)
        self._listener.listen()
        self._read_calls = read_calls
        threading.Thread(target=self._accept, daemon=True, name=f"{name}-forks").start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed: the stub has ended
                return
            channel = wire.Channel(connection)
            threading.Thread(target=self._serve, args=(channel,), daemon=True, name="stub-fork-calls").start()

    def _serve(self, channel: wire.Channel) -> None:
        self._read_calls(channel)
        channel.close()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        shutil.rmtree(self._directory, ignore_errors=True)


class RemoteModel:
    """The model as ``PythonBackend`` sees it: ``execute(requests)`` and ``finalize()`` run in
    the stub."""

    def __init__(self, backend: "ProcessPythonBackend", stub: StubProcess):
        self._backend = backend
        self._stub = stub
        self._execs = itertools.count(1)
        self.batches: dict[int, list] = {}  # exec id -> its pb_utils requests, while any may be answered
        self.current: int | None = None  # the batch the stub executes now
        self._lock = threading.Lock()

    def execute(self, pb_requests: list):
        backend = self._backend
        if not self._stub.alive:
            raise UnhealthyStub(backend.unhealthy("The stub process has exited unexpectedly."))
        self._sweep()
        exec_id = next(self._execs)
        specs, groups = [], []
        for request in pb_requests:
            specs.append({"id": request.request_id(), "correlation_id": request.correlation_id(),
                          "flags": request.flags(), "timeout": request.timeout(),
                          "parameters": request._parameters, "requested": request.requested_output_names()})
            groups.append([(t.name(), t._host_numpy("input")) for t in request.inputs()])
        metas, path = wire.pack_groups(groups, self._stub.prefix)
        for spec, group in zip(specs, metas):
            spec["inputs"] = group
        with self._lock:
            self.batches[exec_id] = pb_requests
            self.current = exec_id
        try:
            reply = self._stub.request({"op": "execute", "exec": exec_id, "model_name": backend.config.name,
                                        "model_version": backend.version, "requests": specs, "shm": path})
        except StubDied:
            with self._lock:
                self.batches.pop(exec_id, None)
                self.current = None
            raise UnhealthyStub(backend.unhealthy(f"Stub process '{backend.instance.name}' is not healthy.")) from None
        with self._lock:
            self.current = None
        if reply["op"] == "exec_failed":
            raise RemoteFailure(reply["text"])
        for index in reply["made"]:
            pb_requests[index].get_response_sender()
        for index, request in enumerate(pb_requests):
            request._source.reschedule = index in reply["reschedule"]
        result = reply["result"]
        if result["kind"] == "none":
            return None
        if result["kind"] == "other":
            return _named(result["type"])
        items = result["items"]
        tensors = wire.unpack_groups([item.get("outputs") if item else None for item in items], reply.get("shm"))
        return [None if item is None else _response(item, group) for item, group in zip(items, tensors)]

    def _sweep(self) -> None:
        """Forget the batches whose every request is answered (no message can concern them)."""
        with self._lock:
            for exec_id in [e for e, requests in self.batches.items()
                            if all(r._source.done or r._source.padding for r in requests)]:
                del self.batches[exec_id]

    def finalize(self) -> None:
        if not self._stub.alive:
            return
        try:
            reply = self._stub.request({"op": "finalize"})
        except StubDied:
            return
        if reply.get("text"):
            raise RemoteFailure(reply["text"])


def _response(item: dict, tensors: list | None):
    """A returned item as the pb_utils object ``PythonBackend`` checks and converts."""
    if "bad" in item:
        return _named(item["bad"])
    if "bad_tensor" in item:  # a response whose tensors the model changed after making it
        response = pb_utils.InferenceResponse()
        response._outputs = [_named(item["bad_tensor"])]
        return response
    if "error" in item:
        error = item["error"]
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(error["message"], error["code"]))
    return pb_utils.InferenceResponse([pb_utils.Tensor(name, array) for name, array in tensors or ()],
                                      parameters=item.get("parameters"))


def _received(message: dict):
    item = message["response"]
    tensors = wire.unpack(item["outputs"], message.get("shm")) if item and "outputs" in item else None
    return _response(item, tensors)


class ProcessPythonBackend(PythonBackend):
    """A Python model instance in its own stub process."""

    def __init__(self, config, model_dir: Path, version_dir: Path, instance, host=None, model_file: Path | None = None):
        self._stub: StubProcess | None = None
        self._remote: RemoteModel | None = None
        self._bls_iterators: dict[tuple, object] = {}  # (channel, call id) -> its response iterator
        self._model_dir = model_dir
        self._stub_has_is_ready = False  # said by the stub after initialize()
        self._ready_checks: dict[int, object] = {}  # check id -> called with its outcome
        self._check_ids = itertools.count(1)
        super().__init__(config, model_dir, version_dir, instance, host, model_file)

    # ---- load ------------------------------------------------------------------------------------
    def _create(self):
        python, env = python_for(self.config, self._model_dir)
        self._stub = StubProcess(python, env, self.instance.name, self._on_message)
        self._remote = RemoteModel(self, self._stub)
        try:
            reply = self._stub.request({"op": "load", "model_file": str(self.model_file), "decoupled": self.decoupled,
                                        "version_dir": str(self.version_dir)})
        except StubDied:
            raise BackendLoadError(f"failed to load python model '{self.config.name}': its stub process "
                                   f"ended ({self._stub.exit_reason()}) while loading '{self.model_file}'") from None
        if reply["op"] == "load_failed":
            self._stop_stub(5.0)
            stage = reply["stage"]
            if stage == "import":
                raise BackendLoadError(f"failed to load python model '{self.config.name}' from "
                                       f"'{self.model_file}': {reply['text']}")
            if stage == "class":
                raise BackendLoadError(f"'{self.model_file}' of model '{self.config.name}' defines no class "
                                       "TritonPythonModel")
            raise BackendLoadError(f"TritonPythonModel() of model '{self.config.name}' failed: {reply['text']}")
        return self._remote

    def _initialize(self, model_dir: Path) -> None:
        try:
            reply = self._stub.request({"op": "initialize", "args": self._initialize_args(model_dir)})
        except StubDied:
            raise BackendLoadError(f"failed to initialize python model '{self.config.name}' instance "
                                   f"'{self.instance.name}': Stub process '{self.instance.name}' is not healthy. "
                                   f"It ended ({self._stub.exit_reason()}) in initialize") from None
        if reply["op"] == "init_failed":
            self._stop_stub(5.0)
            raise BackendLoadError(f"failed to initialize python model '{self.config.name}' instance "
                                   f"'{self.instance.name}': {reply['text']}")
        self._stub_has_is_ready = bool(reply.get("is_ready"))

    # ---- health ------------------------------------------------------------------------------------
    def ready(self) -> bool:
        return self._stub is not None and self._stub.alive

    def readiness(self) -> str | None:
        if not self.ready():
            return f"Stub process '{self.instance.name}' is not healthy."
        return super().readiness()

    def _has_is_ready(self) -> bool:
        return self._stub_has_is_ready

    def _start_is_ready(self, done) -> None:
        """Ask the stub to run the model's is_ready(); its answer comes back as ``ready_result``."""
        check = next(self._check_ids)
        self._ready_checks[check] = done
        try:
            self._stub.channel.send({"op": "is_ready", "check": check})
        except OSError:
            self._ready_checks.pop(check, None)
            done(f"Stub process '{self.instance.name}' is not healthy.")

    def unhealthy(self, message: str) -> ServeError:
        return internal(f"Failed to process the request(s) for model instance '{self.instance.name}', "
                        f"message: {message}")

    def _failure(self, exc: Exception) -> ServeError:
        if isinstance(exc, UnhealthyStub):
            return exc.error
        if isinstance(exc, RemoteFailure):
            return self._execute_error(exc.text)
        return super()._failure(exc)

    # ---- what the stub asks ------------------------------------------------------------------------
    def _on_message(self, message: dict) -> None:
        op = message["op"]
        if op == "log":
            model_log.log(message["level"], "%s", message["message"])
        elif op == "died":
            self._stub_died()
        elif op == "ready_result":
            done = self._ready_checks.pop(message["check"], None)
            if done is not None:
                done(message["reason"])
        elif op == "async_failed":
            error = self._execute_error(message["text"])
            log.error("%s", error.message)
            self._fail_open(self._remote.batches.get(message["exec"], []), error)
        elif op == "bls_cancel":
            iterator = self._bls_iterators.get((message[REPLY_TO], message["call"]))
            if iterator is not None:
                iterator.cancel()
        elif message["what"] == "metric":
            self._reply(message, self._metric(message))
        elif message["what"] == "model_control":  # a load takes its time: not on the reader thread
            threading.Thread(target=self._model_control, args=(message,), daemon=True,
                             name=f"{self.instance.name}-model-control").start()
        elif message["what"] == "bls":
            threading.Thread(target=self._bls, args=(message,), daemon=True,
                             name=f"{self.instance.name}-bls").start()
        else:
            self._reply(message, self._answer(message))

    def _metric(self, message: dict) -> dict:
        """A pb_utils.MetricFamily / Metric operation of the model, on the server's metrics."""
        metrics, op, name = self.metrics_user, message["metric_op"], message["name"]
        try:
            if op == "family":
                metrics.family(name, message["description"], message["kind"])
            elif op == "metric":
                metrics.metric(name, message["labels"], message["buckets"])
            elif op == "release_family":
                metrics.release_family(name)
            elif op == "release_metric":
                metrics.release_metric(name, message["labels"])
            else:
                return {"value": metrics.update(name, message["labels"], op, message.get("value"))}
        except (MetricError, KeyError, TypeError) as exc:  # a message the stub got wrong is answered too
            return {"raise": str(exc)}
        return {}

    def _model_control(self, message: dict) -> None:
        """pb_utils.load_model, unload_model or is_model_ready of the model, on its server."""
        try:
            control = bls.ModelControl(self)
            op, name = message["control_op"], message["name"]
            if op == "load":  # file contents come as base64 text in the stub's JSON
                answer = {"value": control.load(name, decode_base64_files(name, message["parameters"]))}
            elif op == "unload":
                answer = {"value": control.unload(name)}
            else:
                answer = {"value": control.ready(name, message["version"])}
        except (ValueError, KeyError, TypeError, ServeError, pb_utils.TritonModelException) as exc:
            answer = {"raise": exc.message if isinstance(exc, ServeError) else str(exc)}
        self._reply(message, answer)

    def _reply(self, message: dict, answer: dict) -> None:
        try:
            message[REPLY_TO].send({"op": "reply", "call": message["call"], **answer})
        except OSError:
            pass  # the stub has gone

    def _answer(self, message: dict) -> dict:
        requests = self._remote.batches.get(message["exec"])
        if requests is None:
            return {"raise": "Unable to send response. Response sender has been closed."} \
                if message["what"] == "send" else {"cancelled": True}
        request = requests[message["index"]]
        if message["what"] == "cancelled":
            return {"cancelled": request.is_cancelled()}
        response = None if message["response"] is None else _received(message)
        try:
            request.get_response_sender().send(response, message["flags"])
        except pb_utils.TritonModelException as exc:
            return {"raise": str(exc)}
        return {}

    def _bls(self, message: dict) -> None:
        """A BLS request of the model: run through the server as ``bls.execute`` runs it."""
        spec = message["request"]
        inputs = wire.unpack(spec["inputs"], message.get("shm"))
        decoupled = message["decoupled"]
        token = bls.CALLER.set(bls.Caller(self, holds_instance=message["holds"]))
        try:
            try:
                request = pb_utils.InferenceRequest(
                    spec["id"], spec["correlation_id"], inputs=[pb_utils.Tensor(n, a) for n, a in inputs],
                    requested_output_names=spec["requested"], model_name=spec["model_name"],
                    model_version=spec["model_version"], flags=spec["flags"], timeout=spec["timeout"],
                    parameters=spec["parameters"])
                answer = bls.execute(request, decoupled)
            except pb_utils.TritonModelException as exc:
                self._reply(message, {"raise": str(exc)})
                return
            if not decoupled:
                self._reply(message, self._response_message(answer))
                return
            call_id = message["call"]
            self._bls_iterators[message[REPLY_TO], call_id] = answer
            self._reply(message, {})
            try:
                ended = False
                channel = message[REPLY_TO]
                for response in answer:
                    ended = answer._ended
                    channel.send({"op": "bls_item", "call": call_id, "final": ended,
                                  **self._response_message(response)})
                if not ended:
                    channel.send({"op": "bls_item", "call": call_id, "final": True, "response": {"outputs": []}})
            except OSError:
                pass
            finally:
                self._bls_iterators.pop((message[REPLY_TO], call_id), None)
        finally:
            bls.CALLER.reset(token)

    def _response_message(self, response) -> dict:
        error = response.error()
        if error is not None:
            return {"response": {"error": {"message": error.message(), "code": error.code()}}}
        tensors = [(t.name(), t._host_numpy("BLS output")) for t in response.output_tensors()]
        metas, path = wire.pack(tensors, self._stub.prefix)
        return {"response": {"outputs": metas, "parameters": response._parameter_values}, "shm": path}

    def _stub_died(self) -> None:
        """Fail what the dead stub still held: every open response sender of its batches."""
        if self._closing:
            return
        error = self.unhealthy(f"Stub process '{self.instance.name}' is not healthy.")
        self.metrics_user.close()
        for check in list(self._ready_checks):
            done = self._ready_checks.pop(check, None)
            if done is not None:
                done(error.message)
        log.error("Stub process '%s' is not healthy. It ended (%s); model '%s' is not ready", self.instance.name,
                  self._stub.exit_reason(), self.config.name)
        with self._remote._lock:  # the batch executing now fails as its execute() call returns
            batches = [b for e, b in self._remote.batches.items() if e != self._remote.current]
            self._remote.batches.clear()
        for requests in batches:
            self._fail_open(requests, error)

    # ---- unload ------------------------------------------------------------------------------------
    _closing = False

    def close(self) -> None:
        if self._stub is None:
            return
        self._closing = True  # the stub's exit after finalize() is no crash
        if self._stub.alive:
            try:
                self._remote.finalize()
            except RemoteFailure as exc:
                log.error("finalize() of python model '%s' instance '%s' failed: %s", self.config.name,
                          self.instance.name, exc.text)
        self._stop_stub(FINALIZE_S)
        self.model = None

    def _stop_stub(self, timeout_s: float) -> None:
        self._closing = True
        self._stub.stop(timeout_s)
        self.metrics_user.close()  # what the stub's objects still held
