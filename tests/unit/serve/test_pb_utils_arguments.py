"""pb_utils refuses arguments as Triton's Python backend does (qa/L0_backend_python/
argument_validation): an argument of the wrong type is a TypeError, as from its pybind11
bindings; a None inside a list of tensors, an empty tensor name, or a DLPack source that is none,
a TritonModelException."""

from __future__ import annotations

import numpy as np
import pytest

from tritonctl.serve.backends import pb_utils

TENSOR = pb_utils.Tensor("INPUT0", np.asarray([1, 2], dtype=np.int32))
REQUEST = {"inputs": [TENSOR], "model_name": "my_model", "requested_output_names": ["my_output"]}


@pytest.mark.parametrize("changes, error", [
    ({"inputs": [None]}, pb_utils.TritonModelException),
    ({"inputs": None}, TypeError),
    ({"inputs": [1]}, TypeError),
    ({"model_name": None}, TypeError),
    ({"requested_output_names": [None]}, TypeError),
    ({"requested_output_names": None}, TypeError),
    ({"requested_output_names": "my_output"}, TypeError),
    ({"correleation_id": None}, TypeError),  # a misspelt keyword, as Triton's test has it
    ({"correlation_id": None}, TypeError),
    ({"request_id": None}, TypeError),
    ({"model_version": None}, TypeError),
    ({"flags": None}, TypeError),
    ({"timeout": "soon"}, TypeError),
    ({"preferred_memory": "cpu"}, TypeError),
])
def test_inference_request_refuses_arguments_as_triton(changes, error):
    with pytest.raises(error):
        pb_utils.InferenceRequest(**{**REQUEST, **changes})


def test_inference_request_takes_empty_lists_and_numpy_integers():
    request = pb_utils.InferenceRequest(requested_output_names=[], inputs=[], model_name="m",
                                        correlation_id=np.uint64(7), flags=np.int32(1), model_version=np.int64(2))
    assert request.correlation_id() == 7 and request.flags() == 1 and request.model_version() == 2
    assert request.inputs() == [] and request.requested_output_names() == []


@pytest.mark.parametrize("arguments, error", [
    ({"output_tensors": [None]}, pb_utils.TritonModelException),
    ({"output_tensors": None}, TypeError),
    ({"output_tensors": [TENSOR], "error": "failed"}, TypeError),
])
def test_inference_response_refuses_arguments_as_triton(arguments, error):
    with pytest.raises(error):
        pb_utils.InferenceResponse(**arguments)


def test_inference_response_takes_no_tensors_or_a_list():
    assert pb_utils.InferenceResponse().output_tensors() == []
    assert pb_utils.InferenceResponse(output_tensors=[]).output_tensors() == []
    assert pb_utils.InferenceResponse([TENSOR]).output_tensors() == [TENSOR]
    assert pb_utils.InferenceResponse(error=pb_utils.TritonError("x")).has_error()


@pytest.mark.parametrize("make, error", [
    (lambda: pb_utils.Tensor(None, np.asarray([1])), TypeError),
    (lambda: pb_utils.Tensor("OUTPUT0", None), TypeError),
    (lambda: pb_utils.Tensor("", None), TypeError),
    (lambda: pb_utils.Tensor.from_dlpack("OUTPUT0", None), pb_utils.TritonModelException),
    (lambda: pb_utils.Tensor.from_dlpack("", None), pb_utils.TritonModelException),
])
def test_tensor_refuses_arguments_as_triton(make, error):
    with pytest.raises(error):
        make()


ARRAY = np.asarray([1, 2], dtype=np.int32)
NOT_DLPACK = ("Provided tensor is not supported. Tensor must be a DLPack capsule         or have `__dlpack__` and "
              "`__dlpack_device__` attributes")


@pytest.mark.parametrize("make, error, text", [
    (lambda: pb_utils.Tensor("", ARRAY), pb_utils.TritonModelException, "Tensor name cannot be an empty string."),
    (lambda: pb_utils.Tensor("OUTPUT0", [1, 2]), TypeError, None),  # a numpy.ndarray only
    (lambda: pb_utils.Tensor("OUTPUT0", 3), TypeError, None),
    (lambda: pb_utils.Tensor.from_dlpack(None, ARRAY), TypeError, None),
    (lambda: pb_utils.Tensor.from_dlpack("", None), pb_utils.TritonModelException,
     "Tensor name cannot be an empty string."),
    (lambda: pb_utils.Tensor.from_dlpack("OUTPUT0", None), pb_utils.TritonModelException, NOT_DLPACK),
    (lambda: pb_utils.Tensor.from_dlpack("OUTPUT0", 1), pb_utils.TritonModelException, NOT_DLPACK),
    (lambda: pb_utils.InferenceRequest(**{**REQUEST, "inputs": [None], "request_id": "7"}),
     pb_utils.TritonModelException,
     "Input tensor for request with id '7' and model name 'my_model' should not be empty."),
    (lambda: pb_utils.InferenceRequest(**{**REQUEST, "inputs": [None], "flags": None}), TypeError, None),
    (lambda: pb_utils.InferenceRequest(**{**REQUEST, "inputs": [None, 1]}), TypeError, None),
    (lambda: pb_utils.InferenceResponse([None]), pb_utils.TritonModelException,
     "Output tensor for inference response should not be empty."),
    (lambda: pb_utils.InferenceResponse([None], error="failed"), TypeError, None),
    (lambda: pb_utils.TritonError(None), TypeError, None),
    (lambda: pb_utils.TritonError(1), TypeError, None),
    (lambda: pb_utils.TritonError("failed", "INTERNAL"), TypeError, None),
])
def test_refusals_have_tritons_type_order_and_words(make, error, text):
    """Measured on Triton 2.51: the types of all arguments are checked first (TypeError), then
    Triton's own checks, in its words."""
    with pytest.raises(error) as raised:
        make()
    assert text is None or str(raised.value) == text


def test_from_dlpack_takes_a_capsule_or_an_object_with_both_dlpack_methods():
    assert pb_utils.Tensor.from_dlpack("A", ARRAY.__dlpack__()).as_numpy().tolist() == [1, 2]
    assert pb_utils.Tensor.from_dlpack("B", TENSOR).as_numpy().tolist() == [1, 2]


@pytest.mark.parametrize("call", [
    lambda: pb_utils.Logger.log("Invalid Level", None),
    lambda: pb_utils.Logger.log("Invalid Level", 1),
    lambda: pb_utils.Logger.log(None),
    lambda: pb_utils.Logger.log_info(3),
])
def test_logger_refuses_levels_and_messages_of_other_types(call):
    with pytest.raises(TypeError):
        call()


def test_logger_levels_are_tritons(caplog):
    caplog.set_level("DEBUG", logger="tritonctl.serve.python_model")
    logger = pb_utils.Logger
    for level in (logger.INFO, logger.WARNING, logger.ERROR, logger.VERBOSE, logger.LogLevel.INFO):
        logger.log(f"at {level.name}", level)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "at INFO"), ("WARNING", "at WARNING"), ("ERROR", "at ERROR"), ("DEBUG", "at VERBOSE"),
        ("INFO", "at INFO")]
