"""The logging extension as Triton's qa/L0_backend_python/logging runs it: a Python model's
pb_utils.Logger lines (initialize, execute, finalize) reach the server's log as the server's log
settings say, changed at run time over HTTP or gRPC: verbose lines once log_verbose_level is 1,
no INFO, WARNING or ERROR lines once log_info, log_warning and log_error are false. In stub
processes (whose every line the server decides on) and in the server's process."""

from __future__ import annotations

import logging
from collections import Counter

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from helpers.serve_models import write_python_model
from tritonctl.serve.core.log_settings import LOGGERS
from tritonctl.serve.runtime import BackgroundServer, ServeOptions

# Triton's qa/python_models/identity_fp32_logging, in short: every level at each stage.
MODEL = '''
import triton_python_backend_utils as pb_utils


def log_all(stage):
    logger = pb_utils.Logger
    logger.log(f"{stage}-Specific Msg!", logger.INFO)
    logger.log_info(f"{stage}-Info Msg!")
    logger.log_warn(f"{stage}-Warning Msg!")
    logger.log_error(f"{stage}-Error Msg!")
    logger.log_verbose(f"{stage}-Verbose Msg!")


class TritonPythonModel:
    def initialize(self, args):
        log_all("Initialize")

    def execute(self, requests):
        log_all("Execute")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
            request, "INPUT0").as_numpy())]) for request in requests]

    def finalize(self):
        log_all("Finalize")
'''
CONFIG = '''
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
'''
KINDS = ("Specific", "Info", "Warning", "Error", "Verbose")


def counts(caplog) -> dict:
    seen = Counter(kind for record in caplog.records for kind in KINDS if f"-{kind} Msg!" in record.getMessage())
    return {kind: seen[kind] for kind in KINDS}


def run(tmp_path, isolation: str, change=None) -> BackgroundServer:
    """Start, change the settings (``change(http_client, grpc_client)``), infer once, stop."""
    write_python_model(tmp_path, "logging_model", CONFIG, MODEL)
    options = ServeOptions(tmp_path, http_port=0, grpc_port=0, metrics_port=0, python_isolation=isolation)
    with BackgroundServer(options) as server:
        http = httpclient.InferenceServerClient(server.http_url)
        if change is not None:
            change(http, grpcclient.InferenceServerClient(server.grpc_url))
        tensor = httpclient.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(np.array([1.0], np.float32))
        assert http.infer("logging_model", [tensor]).as_numpy("OUTPUT0").tolist() == [1.0]
    return server


@pytest.fixture
def caplog_all(caplog):
    caplog.handler.setLevel(logging.DEBUG)
    return caplog


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_the_default_settings_log_all_but_verbose(tmp_path, isolation, caplog_all):
    settings = run(tmp_path, isolation).runtime.server.log_settings
    assert counts(caplog_all) == {"Specific": 3, "Info": 3, "Warning": 3, "Error": 3, "Verbose": 0}
    assert not any(settings in logging.getLogger(name).filters for name in LOGGERS)  # they went with the server


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_verbose_level_set_at_run_time_lets_verbose_lines_through(tmp_path, isolation, caplog_all):
    def change(http, grpc):
        assert http.update_log_settings({"log_verbose_level": 1})["log_verbose_level"] == 1
    run(tmp_path, isolation, change)
    assert counts(caplog_all) == {"Specific": 3, "Info": 3, "Warning": 3, "Error": 3, "Verbose": 2}


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_info_warning_and_error_switched_off_over_grpc(tmp_path, isolation, caplog_all):
    def change(http, grpc):
        settings = grpc.update_log_settings({"log_info": False, "log_warning": False, "log_error": False},
                                            as_json=True)["settings"]
        assert {key: settings[key]["bool_param"] for key in ("log_info", "log_warning", "log_error")} == \
            {"log_info": False, "log_warning": False, "log_error": False}
    run(tmp_path, isolation, change)
    assert counts(caplog_all) == {"Specific": 1, "Info": 1, "Warning": 1, "Error": 1, "Verbose": 0}  # initialize's


HTTP_REFUSALS = [  # Triton's HTTP front end: TritonJson's words for a value of another type
    ({"log_info": 1}, "400", "attempt to access JSON non-boolean as boolean"),
    ({"log_verbose_level": -1}, "400", "attempt to access JSON non-unsigned-integer as unsigned-integer"),
    ({"log_verbose_level": True}, "400", "attempt to access JSON non-unsigned-integer as unsigned-integer"),
    ({"log_format": 1}, "400", "attempt to access JSON non-string as string"),
    ({"log_format": "iso"}, "400", "invalid argument for --log_format, got: iso"),
    ({"log_file": "log_file.log", "log_info": False}, "501",
     "log file location can not be updated through network protocol"),
]
GRPC_REFUSALS = [  # Triton's gRPC front end: each setting has its parameter field
    ({"log_info": ("uint32_param", 1)}, grpc.StatusCode.INVALID_ARGUMENT, "expect boolean for 'log_info'"),
    ({"log_verbose_level": ("string_param", "1")}, grpc.StatusCode.INVALID_ARGUMENT,
     "expect int32 for 'log_verbose_level'"),
    ({"log_format": ("bool_param", True)}, grpc.StatusCode.INVALID_ARGUMENT, "expect string for 'log_format'"),
    ({"log_format": ("string_param", "iso")}, grpc.StatusCode.INVALID_ARGUMENT,
     "invalid argument for log_format, got: iso"),
    ({"log_file": ("string_param", "elsewhere.log"), "log_info": ("bool_param", False)},
     grpc.StatusCode.UNIMPLEMENTED, "log file location can not be updated through network protocol"),
]


def grpc_log_settings(url: str, settings: dict):
    request = service_pb2.LogSettingsRequest()
    for key, (field, value) in settings.items():
        setattr(request.settings[key], field, value)
    with grpc.insecure_channel(url) as channel:
        return service_pb2_grpc.GRPCInferenceServiceStub(channel).LogSettings(request)


def test_settings_are_refused_in_tritons_words_and_change_nothing(tmp_path):
    with BackgroundServer(ServeOptions(tmp_path, http_port=0, grpc_port=0, metrics_port=None)) as server:
        http = httpclient.InferenceServerClient(server.http_url)
        for bad, status, text in HTTP_REFUSALS:
            with pytest.raises(InferenceServerException) as refused:
                http.update_log_settings(bad)
            assert (refused.value.status(), refused.value.message()) == (status, text), bad
        for bad, code, text in GRPC_REFUSALS:
            with pytest.raises(grpc.RpcError) as refused:
                grpc_log_settings(server.grpc_url, bad)
            assert (refused.value.code(), refused.value.details()) == (code, text), bad
        initial = {"log_file": "", "log_info": True, "log_warning": True, "log_error": True, "log_verbose_level": 0,
                   "log_format": "default"}
        assert http.get_log_settings() == initial
        assert http.update_log_settings({"nonsense": True, "log_error": None}) == initial  # as Triton: ignored
        assert grpc_log_settings(server.grpc_url, {"nonsense": ("bool_param", False)}).settings["log_info"].bool_param
        assert http.update_log_settings({"log_format": "ISO8601"})["log_format"] == "ISO8601"
