"""Python models in stub processes of their own (``--python-isolation process``), as Triton runs
them: two instances of a CPU-bound model run at once in two processes; a model that crashes its
process (``os._exit``, a segfault) fails the requests it held with Triton's text ("Stub process
'<instance>' is not healthy."), reports not ready (so does one killed while idle), and every other
model keeps serving; a model
runs with the Python of its ``EXECUTION_ENV_PATH`` (a directory or a packed archive); BLS,
decoupled models, ``async def execute``, cancellation, request parameters, auto_complete_config,
initialize and finalize work across the process boundary. Real servers, real tritonclient, over
HTTP and gRPC."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from helpers.serve_models import write_python_model
from tritonctl.serve.runtime import BackgroundServer, ServeOptions


def serve(repo: Path, isolation: str = "process", **extra) -> BackgroundServer:
    return BackgroundServer(ServeOptions(repo, http_port=0, grpc_port=0, metrics_port=0, exit_timeout_secs=5,
                                         python_isolation=isolation, **extra))


def http_input(name: str, array: np.ndarray, datatype: str):
    tensor = httpclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def grpc_input(name: str, array: np.ndarray, datatype: str):
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


# ---- parallel instances ------------------------------------------------------------------------
# Each execution writes its PID into the rendezvous directory, then runs pure-Python work until
# it has seen another execution's file there (or 60 s passed): with one GIL per process, both
# instances compute at once. It answers its PID, whether it saw the other, and its interval.
PARALLEL = '''
import os, time
from pathlib import Path
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.meet = Path(args["model_repository"]) / "meet"
        self.meet.mkdir(exist_ok=True)

    def execute(self, requests):
        start = time.time_ns()
        (self.meet / str(os.getpid())).write_text("here")
        saw_other, spins, deadline = False, 0, time.monotonic() + 60
        while not saw_other and time.monotonic() < deadline:
            total = 0
            for i in range(20000):  # pure-Python work: holds this process's GIL
                total += i * i
            spins += 1
            saw_other = any(p.name != str(os.getpid()) for p in self.meet.iterdir())
        end = time.time_ns()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(
            [os.getpid(), int(saw_other), spins, start, end], np.int64))]) for _ in requests]
'''


def test_two_instances_compute_at_once_in_two_processes(tmp_path):
    write_python_model(tmp_path, "busy", '''
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 5 ] } ]
        instance_group [ { count: 2 kind: KIND_CPU } ]
    ''', PARALLEL)
    with serve(tmp_path) as server:
        results = {}

        def call(key):
            client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
            results[key] = client.infer("busy", [http_input("IN", np.array([key], np.int64), "INT64")]).as_numpy("OUT")

        threads = [threading.Thread(target=call, args=(key,)) for key in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    (pid_a, saw_a, _, start_a, end_a), (pid_b, saw_b, _, start_b, end_b) = results[1], results[2]
    assert pid_a != pid_b and os.getpid() not in (pid_a, pid_b)  # two stub processes, not the server
    assert saw_a and saw_b  # each execution met the other while it ran
    assert start_a < end_b and start_b < end_a  # the two executions' intervals overlap


# ---- crashes ----------------------------------------------------------------------------------
CRASHER = '''
import ctypes, os
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        how = int(pb_utils.get_input_tensor_by_name(requests[0], "HOW").as_numpy()[0])
        if how == 1:
            os._exit(3)
        if how == 2:
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        if how == 3:
            raise MemoryError("no room")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([how], np.int32))]) for _ in requests]
'''
ADD_ONE = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUT", pb_utils.get_input_tensor_by_name(r, "HOW").as_numpy() + 1)]) for r in requests]
'''
CRASH_CONFIG = '''
    max_batch_size: 0
    input [ { name: "HOW" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
'''


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("how", [1, 2], ids=["os_exit", "segfault"])
def test_a_crashing_model_fails_its_requests_and_alone_goes_unready(tmp_path, protocol, how):
    write_python_model(tmp_path, "crasher", CRASH_CONFIG, CRASHER)
    write_python_model(tmp_path, "healthy", CRASH_CONFIG, ADD_ONE)
    with serve(tmp_path) as server:
        if protocol == "http":
            client, make = httpclient.InferenceServerClient(server.http_url), http_input
        else:
            client, make = grpcclient.InferenceServerClient(server.grpc_url), grpc_input
        assert client.infer("crasher", [make("HOW", np.array([0], np.int32), "INT32")]).as_numpy("OUT")[0] == 0
        with pytest.raises(InferenceServerException) as crashed:
            client.infer("crasher", [make("HOW", np.array([how], np.int32), "INT32")])
        assert crashed.value.message() == ("Failed to process the request(s) for model instance 'crasher_0', "
                                           "message: Stub process 'crasher_0' is not healthy.")
        assert not client.is_model_ready("crasher")
        assert client.is_model_ready("healthy")
        assert client.infer("healthy", [make("HOW", np.array([41], np.int32), "INT32")]).as_numpy("OUT")[0] == 42
        with pytest.raises(InferenceServerException) as after:
            client.infer("crasher", [make("HOW", np.array([0], np.int32), "INT32")])
        assert after.value.message() == ("Failed to process the request(s) for model instance 'crasher_0', "
                                         "message: The stub process has exited unexpectedly.")
        assert client.is_server_live()


# After Triton's qa/L0_backend_python/restart model: it reads the free memory of the stub's pool
# through c_python_backend_utils, and gives its stub's pid.
RESTART = """
import os
import numpy as np
import triton_python_backend_utils as pb_utils
import c_python_backend_utils as c_utils

class TritonPythonModel:
    def initialize(self, args):
        self.first_free = c_utils.shared_memory.free_memory()

    def execute(self, requests):
        assert c_utils.Tensor is pb_utils.Tensor and c_utils.InferenceResponse is pb_utils.InferenceResponse
        free = c_utils.shared_memory.free_memory()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(
            [os.getpid(), free == self.first_free], np.int64))]) for _ in requests]
"""


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_stub_killed_while_idle_leaves_its_model_unready(tmp_path, protocol, caplog):
    """As Triton (since the Python backend stopped restarting stubs, and its readiness follows the
    stub's health): the model reports not ready, with Triton's log line for each check
    (qa/L0_backend_python/model_ready_check), and its requests fail; the server goes on."""
    write_python_model(tmp_path, "restart", """
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_INT64 dims: [ 2 ] } ]
    """, RESTART)
    with serve(tmp_path) as server:
        if protocol == "http":
            client, make = httpclient.InferenceServerClient(server.http_url), http_input
        else:
            client, make = grpcclient.InferenceServerClient(server.grpc_url), grpc_input
        inputs = [make("IN", np.array([0], np.int32), "INT32")]
        stub_pid, same_free = client.infer("restart", inputs).as_numpy("OUT")
        assert same_free == 1
        os.kill(int(stub_pid), 9)
        deadline = time.monotonic() + 10
        while client.is_model_ready("restart") and time.monotonic() < deadline:
            time.sleep(0.05)
        with caplog.at_level(logging.ERROR, logger="tritonctl.serve"):
            assert not client.is_model_ready("restart")
        assert "Model 'restart' version 1 is not ready: Stub process 'restart_0' is not healthy." in caplog.text
        with pytest.raises(InferenceServerException) as failed:
            client.infer("restart", inputs)
        assert failed.value.message() == ("Failed to process the request(s) for model instance 'restart_0', "
                                          "message: The stub process has exited unexpectedly.")
        assert client.is_server_live()


def test_memory_error_in_execute_is_an_ordinary_failure(tmp_path):
    write_python_model(tmp_path, "crasher", CRASH_CONFIG, CRASHER)
    with serve(tmp_path) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        with pytest.raises(InferenceServerException) as failed:
            client.infer("crasher", [http_input("HOW", np.array([3], np.int32), "INT32")])
        assert failed.value.message().startswith(
            "Failed to process the request(s) for model 'crasher_0', message: MemoryError: no room")
        assert client.is_model_ready("crasher")  # the process lives on, as in Triton's stub
        assert client.infer("crasher", [http_input("HOW", np.array([0], np.int32), "INT32")]).as_numpy("OUT")[0] == 0


DECOUPLED_CRASHER = '''
import os, threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], np.int32))]))
            threading.Thread(target=self.later, args=(sender,)).start()
        return None

    def later(self, sender):
        os._exit(1)  # the process dies with the request still open
'''


def test_a_decoupled_model_that_dies_ends_its_open_streams(tmp_path):
    write_python_model(tmp_path, "streamer", CRASH_CONFIG + "model_transaction_policy { decoupled: true }\n",
                DECOUPLED_CRASHER)
    with serve(tmp_path) as server:
        results = []
        client = grpcclient.InferenceServerClient(server.grpc_url)
        done = threading.Event()

        def callback(result, error):
            results.append(error.message() if error else result.as_numpy("OUT")[0])
            if error:
                done.set()

        client.start_stream(callback)
        client.async_stream_infer("streamer", [grpc_input("HOW", np.array([0], np.int32), "INT32")])
        assert done.wait(60)
        client.stop_stream()
        assert results == [1, "Failed to process the request(s) for model instance 'streamer_0', message: Stub "
                              "process 'streamer_0' is not healthy."]
        assert not client.is_model_ready("streamer")


# ---- EXECUTION_ENV_PATH ------------------------------------------------------------------------
ENV_MODEL = '''
import sys
import numpy as np
import triton_python_backend_utils as pb_utils
import only_in_this_env  # lies in the environment's site-packages alone

class TritonPythonModel:
    def execute(self, requests):
        report = {"prefix": sys.prefix, "marker": only_in_this_env.MARKER, "argv": sys.argv,
                  "protobuf": "google.protobuf" in sys.modules, "grpc": "grpc" in sys.modules}
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([json.dumps(report)], object))])
                for _ in requests]

import json
'''


def make_env(where: Path) -> Path:
    """A directory environment (venv with the base interpreter's packages) with a module of its own."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python3"
    probe = subprocess.run([str(python), "-c", "import numpy, site; print(site.getsitepackages()[0])"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"the base interpreter of {sys.executable} has no numpy, which a stub needs: {probe.stderr}")
    Path(probe.stdout.strip(), "only_in_this_env.py").write_text("MARKER = 'from the env'\n")
    return where


CONDA_UNPACK = """#!/usr/bin/env python
import os
prefix = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(prefix, "unpacked-at"), "w") as out:
    out.write(prefix)
"""


@pytest.mark.parametrize("packed", [False, True], ids=["directory", "tar_gz"])
def test_a_model_runs_with_the_python_of_its_execution_env_path(tmp_path, monkeypatch, packed):
    repo = tmp_path / "repo"
    value = "$$TRITON_MODEL_DIRECTORY/env.tar.gz" if packed else "$$TRITON_MODEL_DIRECTORY/env"
    model_dir = write_python_model(repo, "envmodel", f'''
        max_batch_size: 0
        input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
        output [ {{ name: "OUT" data_type: TYPE_STRING dims: [ 1 ] }} ]
        parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{value}" }} }}
    ''', ENV_MODEL)
    env = make_env(tmp_path / "env" if packed else model_dir / "env")
    if packed:  # conda-pack's conda-unpack rewrites prefixes to where it lies when it runs
        (env / "bin" / "conda-unpack").write_text(CONDA_UNPACK)
        (env / "bin" / "conda-unpack").chmod(0o755)
        with tarfile.open(model_dir / "env.tar.gz", "w:gz") as tar:
            tar.add(env, arcname=".")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with serve(repo) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        out = client.infer("envmodel", [grpc_input("IN", np.array([0], np.int32), "INT32")]).as_numpy("OUT")
    report = json.loads(out[0])
    assert report["marker"] == "from the env"
    assert report["argv"] == [""]
    assert not report["protobuf"] and not report["grpc"]  # the stub needs the standard library and numpy only
    if packed:
        unpacked = [p for p in (tmp_path / "cache" / "tritonctl" / "python_envs").iterdir() if p.is_dir()]
        assert len(unpacked) == 1 and report["prefix"] == str(unpacked[0])
        assert (unpacked[0] / "unpacked-at").read_text() == str(unpacked[0])  # it ran where the stub runs
    else:
        assert report["prefix"] == str(env)


def test_an_execution_env_path_without_a_python_fails_the_load_clearly(tmp_path):
    model_dir = write_python_model(tmp_path, "envless", '''
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
        parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/env" } }
    ''', ADD_ONE.replace('"HOW"', '"IN"'))
    (model_dir / "env").mkdir()
    with serve(tmp_path, strict_readiness=False) as server:
        index = httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    reason = next(row["reason"] for row in index if row["name"] == "envless")
    assert "has no bin/python3" in reason and "conda-pack" in reason


# ---- the model API across the boundary -------------------------------------------------------
# "add" completes its own config, records initialize/finalize in files; "counter" is decoupled
# (N responses, then the final flag); "pipeline" is an async model calling both through BLS and
# answering what it saw: the sum, the streamed values, its parameters, a refused BLS request's text.
ADD = '''
import os
from pathlib import Path
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "IN", "data_type": "TYPE_INT32", "dims": [1]})
        config.add_output({"name": "OUT", "data_type": "TYPE_INT32", "dims": [1]})
        return config

    def initialize(self, args):
        self.dir = Path(args["model_repository"])
        (self.dir / "initialized").write_text(f'{args["model_instance_name"]} {os.getpid()}')

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() + 1)]) for r in requests]

    def finalize(self):
        (self.dir / "finalized").write_text("yes")
'''
COUNTER = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            for i in range(int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])):
                assert not sender.is_cancelled() and not request.is_cancelled()
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''
PIPELINE = '''
import json, os
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            added = await pb_utils.InferenceRequest(model_name="add", inputs=[pb_utils.Tensor("IN", x)],
                                                    requested_output_names=["OUT"]).async_exec()
            stream = pb_utils.InferenceRequest(model_name="counter", inputs=[pb_utils.Tensor("IN", x)],
                                               requested_output_names=["OUT"]).exec(decoupled=True)
            values = [int(pb_utils.get_output_tensor_by_name(r, "OUT").as_numpy()[0])
                      for r in stream if r.output_tensors()]
            refused = pb_utils.InferenceRequest(model_name="missing", inputs=[pb_utils.Tensor("IN", x)],
                                                requested_output_names=["OUT"]).exec()
            report = {"added": int(pb_utils.get_output_tensor_by_name(added, "OUT").as_numpy()[0]),
                      "streamed": values, "parameters": json.loads(request.parameters()),
                      "refused": refused.error().message(), "pid": os.getpid(),
                      "flags": request.flags(), "correlation_id": request.correlation_id(),
                      "dtype": pb_utils.get_input_tensor_by_name(request, "IN").triton_dtype(),
                      "model_dir": pb_utils.get_model_dir(),
                      "wire": [b.decode() for b in pb_utils.deserialize_bytes_tensor(
                          pb_utils.serialize_byte_tensor(np.array([b"a", "bc", 7], object)))]}
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([json.dumps(report)],
                                                                                        object))]))
        return responses
'''
PIPE_CONFIG = '''
    max_batch_size: 0
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
'''


@pytest.fixture(scope="module", params=["process", "thread"])
def api_server(tmp_path_factory, request):
    """The same models in stub processes and, with --python-isolation thread, in the server's."""
    repo = tmp_path_factory.mktemp("api")
    write_python_model(repo, "add", "max_batch_size: 0\n", ADD)
    write_python_model(repo, "counter", PIPE_CONFIG + "model_transaction_policy { decoupled: true }\n", COUNTER)
    write_python_model(repo, "pipeline", '''
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
    ''', PIPELINE)
    with serve(repo, request.param) as server:
        yield server, repo, request.param
    assert (repo / "add" / "finalized").read_text() == "yes"  # finalize ran (in the stub) at unload


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bls_decoupled_async_and_parameters_work_across_processes(api_server, protocol):
    server, repo, isolation = api_server
    if protocol == "http":
        client, make = httpclient.InferenceServerClient(server.http_url), http_input
    else:
        client, make = grpcclient.InferenceServerClient(server.grpc_url), grpc_input
    result = client.infer("pipeline", [make("IN", np.array([3], np.int32), "INT32")],
                          parameters={"tag": "x", "n": 2, "on": True})
    report = json.loads(result.as_numpy("OUT")[0])
    assert report["added"] == 4 and report["streamed"] == [0, 1, 2]
    assert report["parameters"] == {"tag": "x", "n": 2, "on": True}
    assert report["dtype"] == 8 and report["wire"] == ["a", "bc", "7"]  # TYPE_INT32; pb_utils' BYTES helpers
    assert report["model_dir"] == str(repo / "pipeline" / "1")
    assert report["refused"] == ("Model missing - Error when running inference: Failed for execute the inference "
                                 "request. Model 'missing' is not ready.")
    instance, pid = (repo / "add" / "initialized").read_text().split()
    assert instance == "add_0"
    if isolation == "process":
        assert report["pid"] != os.getpid() and int(pid) not in (os.getpid(), report["pid"])  # a process each
    else:
        assert report["pid"] == int(pid) == os.getpid()
    config = client.get_model_config("add")
    inputs = config["input"] if protocol == "http" else [{"name": t.name} for t in config.config.input]
    assert [t["name"] for t in inputs] == ["IN"]  # completed by auto_complete_config in a stub


def test_a_decoupled_model_streams_across_processes(api_server):
    server, _, _ = api_server
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: list = []
    done = threading.Event()

    def callback(result, error):
        results.append(error or result)
        if error or result.get_response().parameters["triton_final_response"].bool_param:
            done.set()

    client.start_stream(callback)
    client.async_stream_infer("counter", [grpc_input("IN", np.array([4], np.int32), "INT32")],
                              enable_empty_final_response=True)
    assert done.wait(60)
    client.stop_stream()
    values = [int(r.as_numpy("OUT")[0]) for r in results if r.as_numpy("OUT") is not None]
    assert values == [0, 1, 2, 3]


def test_loading_a_crashed_model_again_gives_it_a_new_process(tmp_path):
    write_python_model(tmp_path, "crasher", CRASH_CONFIG, CRASHER)
    with serve(tmp_path, control_mode="explicit", load_models=["*"]) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        with pytest.raises(InferenceServerException):
            client.infer("crasher", [http_input("HOW", np.array([1], np.int32), "INT32")])
        assert not client.is_model_ready("crasher")
        client.load_model("crasher")  # its files are unchanged, yet a version with a dead stub is not kept
        assert client.is_model_ready("crasher")
        assert client.infer("crasher", [http_input("HOW", np.array([0], np.int32), "INT32")]).as_numpy("OUT")[0] == 0


def test_sigint_and_sigterm_leave_a_stub_to_the_server(tmp_path):
    """As Triton's stub, a stub does nothing on SIGINT and SIGTERM: a Ctrl-C in the terminal (or a
    SIGTERM to the process group) reaches the stubs with the server, and the server still stops
    the model with its finalize (qa/L0_backend_python/logging counts the finalize's log lines)."""
    write_python_model(tmp_path, "add", "max_batch_size: 0\n", ADD)
    with serve(tmp_path) as server:
        stub = int((tmp_path / "add" / "initialized").read_text().split()[1])
        os.kill(stub, signal.SIGINT)
        os.kill(stub, signal.SIGTERM)
        time.sleep(0.3)  # what the signals do is done by then
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.infer("add", [http_input("IN", np.array([1], np.int32), "INT32")]).as_numpy("OUT").tolist() == [2]
        assert client.is_model_ready("add")
    assert (tmp_path / "add" / "finalized").read_text() == "yes"


def test_a_stub_killed_in_initialize_fails_the_load_with_tritons_words(tmp_path):
    """Triton's qa/python_models/init_exit (an out-of-memory kill while initializing): the server
    log and the repository index say "Stub process '<instance>' is not healthy."."""
    write_python_model(tmp_path, "init_exit", "max_batch_size: 0\ninstance_group [ { kind: KIND_CPU count: 1 } ]\n", '''
import os, signal

class TritonPythonModel:
    def initialize(self, args):
        os.kill(os.getpid(), signal.SIGKILL)

    def execute(self, requests):
        pass
''')
    with serve(tmp_path, strict_readiness=False) as server:
        index = httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    reason = next(row["reason"] for row in index if row["name"] == "init_exit")
    assert "Stub process 'init_exit_0_0' is not healthy. It ended (killed by signal 9) in initialize" in reason
