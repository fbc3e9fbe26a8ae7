"""The stub process of one Python model instance (Triton's ``triton_python_backend_stub``).

Started by ``serve.backends.python_process`` with the model's Python (the server's, or the one of
its ``EXECUTION_ENV_PATH``) as ``python -c BOOTSTRAP <orders socket fd> <tritonctl's parent dir>
<shm prefix> <calls socket fd>``. It imports ``model.py`` as Triton's stub does (``<version>.model``, also
``model``; ``repo_schema/python_model_import.py``), with ``sys.argv == ['']``, and runs ``initialize``, ``execute``
(also ``async def``), ``finalize`` and ``auto_complete_config`` on the server's word. Requests
and responses arrive and leave as ``wire`` messages; what a model asks of the server while it
runs (a response sender's ``send``, ``is_cancelled``, BLS ``exec`` / ``async_exec``, ``Logger``)
is a message too, answered by the server.

The main thread reads the server's orders and runs them one at a time; a reader thread takes the
server's answers to calls on the other socket, so they reach a model waiting in ``execute``
(BLS) and any of its threads.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import importlib.util
import inspect
import itertools
import logging
import os
import queue
import signal
import socket
import sys
import threading
from pathlib import Path

from tritonctl.serve.stub import wire
from tritonctl.serve.stub.errors import describe, execute_failure
from tritonctl.serve.stub.readiness import has_is_ready, run_is_ready

# Run by ``python -c``: tritonctl's own package found in one directory, nothing else of it on sys.path.
BOOTSTRAP = ("import importlib.machinery,importlib.util,sys\n"
             "spec=importlib.machinery.PathFinder.find_spec('tritonctl',[sys.argv[2]])\n"
             "module=importlib.util.module_from_spec(spec);sys.modules['tritonctl']=module\n"
             "spec.loader.exec_module(module)\n"
             "from tritonctl.serve.stub.main import main\n"
             "main()\n")

PB_UTILS_NAME = "triton_python_backend_utils"
MODEL_MODULE = "model"
_PB_UTILS_FILE = Path(__file__).resolve().parent.parent / "backends" / "pb_utils.py"
_NUMPY_COMPAT_FILE = _PB_UTILS_FILE.with_name("numpy_compat.py")
_MODEL_IMPORT_FILE = _PB_UTILS_FILE.parent.parent.parent / "repo_schema" / "python_model_import.py"
# True while code runs that the instance waits for (a sync execute, an ordinary model's coroutine):
# a BLS request made there holds the instance, as the server's deadlock check needs to know.
HOLDS = contextvars.ContextVar("tritonctl_stub_holds", default=False)


def load_pb_utils():
    """tritonctl's pb_utils module (numpy and standard-library-only tritonctl modules), as
    ``triton_python_backend_utils``, with the parts that talk to the server replaced."""
    spec = importlib.util.spec_from_file_location(PB_UTILS_NAME, _PB_UTILS_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[PB_UTILS_NAME] = module
    spec.loader.exec_module(module)
    sys.modules[module.C_MODULE_NAME] = module.c_python_backend_utils()
    module.InferenceRequest.exec = _exec
    module.InferenceRequest.async_exec = _async_exec
    module.metrics_of_model = lambda: SERVER_METRICS
    module.model_control_of_model = lambda: SERVER_MODEL_CONTROL
    module.model_dir_of_model = lambda: STUB.version_dir
    return module


def ask_server(message: dict):
    """The server's answer to ``message``: its value, or ValueError with the server's refusal."""
    reply = STUB.call(message)
    if "raise" in reply:
        raise ValueError(reply["raise"])
    return reply.get("value")


class ServerMetrics:
    """pb_utils' custom metrics, kept by the server: each operation is a call to it (a refusal comes
    back as ValueError); releases are sent without waiting, as they may run in any thread."""

    def _ask(self, op: str, name: str, **fields):
        return ask_server({"what": "metric", "metric_op": op, "name": name, **fields})

    def _tell(self, op: str, name: str, **fields) -> None:
        STUB.call_later({"what": "metric", "metric_op": op, "name": name, **fields}, None, lambda reply: None)

    def family(self, name, description, kind) -> None:
        self._ask("family", name, description=description, kind=kind)

    def metric(self, name, labels, buckets) -> None:
        self._ask("metric", name, labels=labels, buckets=buckets)

    def update(self, name, labels, op, value=None):
        return self._ask(op, name, labels=labels, value=value)

    def release_family(self, name) -> None:
        self._tell("release_family", name)

    def release_metric(self, name, labels) -> None:
        self._tell("release_metric", name, labels=labels)


SERVER_METRICS = ServerMetrics()


class ServerModelControl:
    """pb_utils' model loading API: calls to the server (a refusal comes back as ValueError)."""

    def _ask(self, op: str, name: str, **fields):
        return ask_server({"what": "model_control", "control_op": op, "name": name, **fields})

    def load(self, name, parameters) -> None:  # files' bytes as base64 text: the messages are JSON
        self._ask("load", name, parameters={key: base64.b64encode(value).decode() if isinstance(value, bytes)
                                            else value for key, value in parameters.items()})

    def unload(self, name) -> None:
        self._ask("unload", name)

    def ready(self, name, version) -> bool:
        return self._ask("ready", name, version=version)


SERVER_MODEL_CONTROL = ServerModelControl()


pb_utils = None  # the module, once main() has loaded it
STUB: "Stub | None" = None


def encode_response(response) -> tuple[dict, list | None]:
    """A pb_utils.InferenceResponse (or whatever a model gave instead) as a wire item and its tensors."""
    if not isinstance(response, pb_utils.InferenceResponse):
        return {"bad": type(response).__name__}, None
    error = response.error()
    if error is not None:
        return {"error": {"message": error.message(), "code": error.code()}}, None
    tensors = []
    for tensor in response.output_tensors():
        if not isinstance(tensor, pb_utils.Tensor):
            return {"bad_tensor": type(tensor).__name__}, None
        try:
            tensors.append((tensor.name(), tensor._host_numpy("output")))
        except pb_utils.TritonModelException as exc:  # a GPU tensor that could not be copied
            return {"error": {"message": str(exc), "code": pb_utils.TritonError.INTERNAL}}, None
    item = {"outputs": True}
    if response._parameter_values is not None:
        item["parameters"] = response._parameter_values
    return item, tensors


def decode_response(item: dict, tensors: list | None):
    if "error" in item:
        error = item["error"]
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(error["message"], error["code"]))
    return pb_utils.InferenceResponse([pb_utils.Tensor(name, array) for name, array in tensors or ()],
                                      parameters=item.get("parameters"))


# ---- what a received request asks of the server ------------------------------------------------
class _Source:
    """The server's request behind a request execute() received, as pb_utils reads it."""

    __slots__ = ("id", "timeout_us", "reschedule", "_exec", "_index")

    def __init__(self, request_id: str, timeout_us: int, exec_id: int, index: int):
        self.id, self.timeout_us, self.reschedule = request_id, timeout_us, False
        self._exec, self._index = exec_id, index

    @property
    def cancelled(self) -> bool:
        return STUB.call({"what": "cancelled", "exec": self._exec, "index": self._index})["cancelled"]


class _Sender:
    """``request.get_response_sender()``: each send goes to the server's sender of the request,
    which answers the client (or refuses, with Triton's texts, raised here)."""

    def __init__(self, source: _Source):
        self._source = source

    def send(self, response=None, flags: int = 0) -> None:
        pb_utils.check_send_arguments(response, flags)
        item, path = None, None
        if response is not None:
            item, tensors = encode_response(response)
            if tensors:
                (metas,), path = wire.pack_groups([tensors], STUB.prefix)
                item["outputs"] = metas
        reply = STUB.call({"what": "send", "exec": self._source._exec, "index": self._source._index,
                           "response": item, "flags": flags}, path)
        if "raise" in reply:
            raise pb_utils.TritonModelException(reply["raise"])

    def is_cancelled(self) -> bool:
        return self._source.cancelled


class _Senders:
    def __init__(self):
        self.made: dict[int, _Sender] = {}

    def sender(self, index: int, source: _Source) -> _Sender:
        sender = self.made.get(index)
        if sender is None:
            sender = self.made[index] = _Sender(source)
        return sender


# ---- BLS ----------------------------------------------------------------------------------------
def _bls_message(request, decoupled: bool) -> tuple[dict, str | None]:
    metas, path = wire.pack([(t.name(), t._host_numpy("BLS input")) for t in request.inputs()], STUB.prefix)
    return {"what": "bls", "decoupled": decoupled, "holds": HOLDS.get(), "request": {
        "model_name": request.model_name(), "model_version": request.model_version(), "id": request.request_id(),
        "correlation_id": request.correlation_id(), "flags": request.flags(), "timeout": request.timeout(),
        "parameters": request._parameters, "requested": request.requested_output_names(), "inputs": metas}}, path


def _bls_answer(reply: dict, decoupled: bool):
    if "raise" in reply:
        raise pb_utils.TritonModelException(reply["raise"])
    if decoupled:
        return ResponseIterator(reply["call"], reply["items"])
    return _received_response(reply)


def _received_response(message: dict):
    item = message["response"]
    tensors = wire.unpack(item["outputs"], message.get("shm")) if "outputs" in item else None
    return decode_response(item, tensors)


def _exec(self, decoupled: bool = False):
    message, path = _bls_message(self, decoupled)
    return _bls_answer(STUB.call(message, path, stream=decoupled), decoupled)


def _async_exec(self, decoupled: bool = False):
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise pb_utils.TritonModelException("async_exec() returns an awaitable: call it inside 'async def execute' "
                                            "and await it; use exec() in a plain execute") from None
    future = loop.create_future()
    # A decoupled call's future is done once its first response is here, as in Triton (whose
    # response iterator is made with it): iterating it then waits on nothing the loop runs.
    seen = {"reply": None, "first": not decoupled}

    def settle() -> None:
        reply = seen["reply"]
        if future.done() or reply is None or not (seen["first"] or "raise" in reply):
            return
        try:
            future.set_result(_bls_answer(reply, decoupled))
        except Exception as exc:
            future.set_exception(exc)

    def on_reply(reply: dict) -> None:
        seen["reply"] = reply
        loop.call_soon_threadsafe(settle)

    def on_first_item() -> None:
        seen["first"] = True
        loop.call_soon_threadsafe(settle)

    message, path = _bls_message(self, decoupled)
    STUB.call_later(message, path, on_reply, stream=decoupled, on_first_item=on_first_item if decoupled else None)
    return future


class ResponseIterator:
    """The responses of ``exec(decoupled=True)``, in the order the model sends them. As Triton's, an
    iteration that starts after the last response was taken goes over all of them again."""

    def __init__(self, call_id: int, items: queue.SimpleQueue):
        self._call = call_id
        self._items = items
        self._ended = False
        self._seen: list = []
        self._index = 0

    def __iter__(self) -> "ResponseIterator":
        if self._ended and self._index >= len(self._seen):
            self._index = 0
        return self

    def __next__(self):
        if not self._ended:
            message = self._items.get()
            if message is None:  # the server has gone
                self._ended = True
            else:
                self._ended = message.get("final", True)
                self._seen.append(_received_response(message))
        if self._index >= len(self._seen):
            raise StopIteration
        self._index += 1
        return self._seen[self._index - 1]

    def cancel(self) -> None:
        STUB.channel.send({"op": "bls_cancel", "call": self._call})


# ---- the process ------------------------------------------------------------------------------
class _ForwardLog(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            STUB.channel.send({"op": "log", "level": record.levelno, "message": record.getMessage()})
        except OSError:
            pass


class Stub:
    def __init__(self, orders: wire.Channel, channel: wire.Channel, prefix: str, fork_address: str | None = None):
        self.orders = orders  # the server's orders and their results, on the main thread
        self.channel = channel  # calls to the server and its answers, read by the reader thread
        self.prefix = prefix
        self.fork_address = fork_address  # where a forked process connects for calls of its own
        self._calls = itertools.count(1)
        self._waiting: dict[int, object] = {}  # call id -> callable taking the reply
        self._streams: dict[int, queue.SimpleQueue] = {}
        self._first_item: dict[int, object] = {}  # call id -> called when its stream's first item arrives
        self._lock = threading.Lock()
        self.model = None
        self.model_file: Path | None = None
        self.version_dir = ""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.decoupled = False

    # messages from the server
    def read(self) -> None:
        while True:
            message = self.channel.receive()
            if message is None:
                os._exit(0)  # the server has gone: nothing left to serve
            op = message["op"]
            if op == "reply":
                with self._lock:
                    answer = self._waiting.pop(message["call"], None)
                if answer is not None:
                    answer(message)
            elif op == "bls_item":
                with self._lock:
                    items = self._streams.get(message["call"])
                if items is not None:
                    items.put(message)
                    with self._lock:
                        first_item = self._first_item.pop(message["call"], None)
                        if message.get("final", True):
                            self._streams.pop(message["call"], None)
                    if first_item is not None:
                        first_item()
            elif op == "is_ready":  # run beside execute(), as Triton's stub does
                threading.Thread(target=self.is_ready, args=(message["check"],), daemon=True,
                                 name="stub-is-ready").start()

    def is_ready(self, check: int) -> None:
        """The model's is_ready(), its outcome sent back as ``ready_result``."""
        try:
            self.channel.send({"op": "ready_result", "check": check, "reason": run_is_ready(self.model, self.loop)})
        except OSError:
            pass

    def after_fork(self) -> None:
        """In a process the model forked (a ``multiprocessing`` pool, say): a connection of its own
        for its calls to the server, as the stub's reader thread is not in it."""
        self.orders.sock.close()  # the server sees the stub's end when the stub ends, children or not
        self.channel.sock.close()
        self._waiting, self._streams, self._first_item = {}, {}, {}
        self._lock = threading.Lock()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.fork_address)
        except (OSError, TypeError):
            sock.close()
            return
        self.channel = wire.Channel(sock)
        threading.Thread(target=self.read, daemon=True, name="stub-reader").start()

    def call_later(self, message: dict, path: str | None, answer, stream: bool = False, on_first_item=None) -> None:
        """Ask the server ``message``; ``answer`` gets its reply (from the reader thread), and
        ``on_first_item()`` is called when a stream's first item arrives."""
        with self._lock:
            call_id = next(self._calls)
            self._waiting[call_id] = answer
            if on_first_item is not None:
                self._first_item[call_id] = on_first_item
            if stream:
                items = self._streams[call_id] = queue.SimpleQueue()

                def with_items(reply: dict, answer=answer) -> None:
                    reply["items"] = items
                    answer(reply)
                self._waiting[call_id] = with_items
        self.channel.send({"op": "call", "call": call_id, "shm": path, **message})

    def call(self, message: dict, path: str | None = None, stream: bool = False) -> dict:
        replies: queue.SimpleQueue = queue.SimpleQueue()
        self.call_later(message, path, replies.put, stream)
        return replies.get()

    # orders, run on the main thread
    def serve(self) -> None:
        handlers = {"load": self.load, "initialize": self.initialize, "execute": self.execute,
                    "finalize": self.finalize, "auto_complete": self.auto_complete}
        while True:
            message = self.orders.receive()
            if message is None:
                os._exit(0)  # the server has gone
            reply = handlers[message["op"]](message)
            self.orders.send(reply)
            if message["op"] == "finalize":
                os._exit(0)

    def _import(self, message: dict):
        spec = importlib.util.spec_from_file_location("tritonctl_numpy_compat", _NUMPY_COMPAT_FILE)
        compat = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(compat)
        compat.restore_numpy1_names()  # models written for Triton's numpy 1.x stub, as in thread mode
        spec = importlib.util.spec_from_file_location("tritonctl_python_model_import", _MODEL_IMPORT_FILE)
        model_import = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(model_import)
        self.model_file = Path(message["model_file"])
        self.version_dir = message.get("version_dir", str(self.model_file.parent))  # pb_utils.get_model_dir()
        sys.path[0:0] = model_import.model_search_paths(self.model_file)
        # Triton's package is the version ("1.model"); `import model` gives the same module
        module = model_import.import_model_file(self.model_file.parent.name, self.model_file)
        sys.modules[MODEL_MODULE] = module
        return module

    def load(self, message: dict) -> dict:
        logger = logging.getLogger("tritonctl.serve.python_model")
        logger.setLevel(logging.DEBUG)  # every record goes to the server, whose log settings decide (as Triton's)
        logger.addHandler(_ForwardLog())
        logger.propagate = False
        self.decoupled = message["decoupled"]
        try:
            module = self._import(message)
        except BaseException as exc:
            return {"op": "load_failed", "stage": "import", "text": describe(exc, self.model_file)}
        model_class = getattr(module, "TritonPythonModel", None)
        if model_class is None:
            return {"op": "load_failed", "stage": "class"}
        try:
            self.model = model_class()
        except Exception as exc:
            return {"op": "load_failed", "stage": "create", "text": describe(exc, self.model_file)}
        return {"op": "loaded"}

    def initialize(self, message: dict) -> dict:
        initialize = getattr(self.model, "initialize", None)
        if initialize is not None:
            try:
                initialize(message["args"])
            except Exception as exc:
                return {"op": "init_failed", "text": describe(exc, self.model_file)}
        return {"op": "initialized", "is_ready": has_is_ready(self.model)}

    def finalize(self, message: dict) -> dict:
        finalize = getattr(self.model, "finalize", None)
        if finalize is not None:
            try:
                finalize()
            except Exception as exc:
                return {"op": "finalized", "text": describe(exc, self.model_file)}
        return {"op": "finalized"}

    def auto_complete(self, message: dict) -> dict:
        try:
            module = self._import(message)
        except BaseException as exc:
            return {"op": "complete_failed", "stage": "import", "text": describe(exc, self.model_file)}
        complete = getattr(getattr(module, "TritonPythonModel", None), "auto_complete_config", None)
        if complete is None:
            return {"op": "completed", "config": None}
        try:
            result = complete(pb_utils.ModelConfig(message["config"]))
        except Exception as exc:
            return {"op": "complete_failed", "stage": "call", "text": describe(exc, self.model_file)}
        if not isinstance(result, pb_utils.ModelConfig):
            return {"op": "complete_failed", "stage": "result"}
        return {"op": "completed", "config": result.as_dict()}

    def execute(self, message: dict) -> dict:
        exec_id = message["exec"]
        specs = message["requests"]
        inputs = wire.unpack_groups([spec["inputs"] for spec in specs], message.get("shm"))
        senders = _Senders()
        requests = [pb_utils.InferenceRequest._received(
            message["model_name"], message["model_version"], [pb_utils.Tensor(n, a) for n, a in inputs[i]],
            spec["requested"], _Source(spec["id"], spec["timeout"], exec_id, i), spec["correlation_id"],
            spec["flags"], spec["parameters"], senders, i) for i, spec in enumerate(specs)]
        token = HOLDS.set(True)
        try:
            result = self.model.execute(requests)
            if inspect.iscoroutine(result):
                result = self._run_coroutine(result, exec_id)
        except Exception as exc:
            return {"op": "exec_failed", "exec": exec_id, "text": execute_failure(exc, __file__)}
        finally:
            HOLDS.reset(token)
        reply = {"op": "executed", "exec": exec_id, "made": sorted(senders.made),
                 "reschedule": [i for i, r in enumerate(requests) if r._source.reschedule]}
        if result is None:
            reply["result"] = {"kind": "none"}
        elif not isinstance(result, (list, tuple)) or self.decoupled:
            reply["result"] = {"kind": "other", "type": type(result).__name__}
        else:
            items, groups = [], []
            for response in result:
                if response is None:
                    items.append(None)
                    groups.append(None)
                else:
                    item, tensors = encode_response(response)
                    items.append(item)
                    groups.append(tensors)
            metas, reply["shm"] = wire.pack_groups(groups, self.prefix)
            for item, group in zip(items, metas):
                if group is not None:
                    item["outputs"] = group
            reply["result"] = {"kind": "list", "items": items}
        return reply

    def _run_coroutine(self, coroutine, exec_id: int):
        """An ordinary model waits for its coroutine; a decoupled model's runs on while the
        instance takes its next batch (a failure then ends that batch's open senders)."""
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, daemon=True, name="model-asyncio").start()
        holds = not self.decoupled

        async def with_holds():
            HOLDS.set(holds)
            return await coroutine

        future = asyncio.run_coroutine_threadsafe(with_holds(), self.loop)
        if not self.decoupled:
            return future.result()

        def failed(done) -> None:
            if not done.cancelled() and done.exception() is not None:
                text = execute_failure(done.exception(), __file__)
                self.channel.send({"op": "async_failed", "exec": exec_id, "text": text})
        future.add_done_callback(failed)
        return None


def _skip_signal(signum, frame) -> None:
    """Triton's stub handler of SIGINT and SIGTERM: nothing."""


def skip_stop_signals() -> None:
    """As Triton's stub does, SIGINT and SIGTERM do nothing here: a Ctrl-C in the terminal (sent to
    the whole process group) or a SIGTERM to the group stops the server, which then finalizes the
    instance; the stub ends when the server says so, or when the server is gone."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _skip_signal)


def main() -> None:
    global pb_utils, STUB
    skip_stop_signals()
    orders_fd, prefix, calls_fd = int(sys.argv[1]), sys.argv[3], int(sys.argv[4])
    fork_address = sys.argv[5] if len(sys.argv) > 5 else None
    sys.argv = [""]  # what Triton's stub shows a model
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    pb_utils = load_pb_utils()
    STUB = Stub(wire.Channel(socket.socket(fileno=orders_fd)), wire.Channel(socket.socket(fileno=calls_fd)), prefix,
                fork_address)
    os.register_at_fork(after_in_child=STUB.after_fork)
    threading.Thread(target=STUB.read, daemon=True, name="stub-reader").start()
    STUB.serve()
