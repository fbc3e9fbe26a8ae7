"""Python models' tensors in GPU memory: ``pb_utils.Tensor.from_dlpack`` of a CUDA tensor (a
torch or cupy tensor, or the capsule ``torch.utils.dlpack.to_dlpack`` makes) stays on its device,
as in Triton's python_backend, and is copied to host memory (cuda-python's ``cudaMemcpy``) only
where it leaves the model: a response's output, a BLS request's input. Both wait for the work
queued on the device (``cudaDeviceSynchronize``), whatever stream the framework used.

A DLPack capsule is read in place through ctypes (``DLManagedTensor`` begins with its
``DLTensor``), without consuming it: the capsule, kept by the tensor, keeps the memory alive.
"""

from __future__ import annotations

import ctypes
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from tritonctl.optional import MissingDependency, require
from tritonctl.repo_schema.datatypes import DATATYPES

CPU, CUDA, CUDA_HOST = 1, 2, 3  # DLPack's kDLCPU, kDLCUDA, kDLCUDAHost
# A Python model's BF16 data: numpy has no bfloat16, so its raw 2-byte words, typed so that they
# are not taken for numbers (as_numpy refuses them, DLPack shares them as bfloat16).
BF16_WORDS = np.dtype("V2")
LEGACY_DEFAULT_STREAM = 1  # the array API's `stream` value for CUDA's legacy default stream
_CAPSULE_NAME = b"dltensor"
# DLDataTypeCode -> numpy kind (kDLInt, kDLUInt, kDLFloat, kDLBool); kDLBfloat (4) has no numpy type.
_NUMPY_KIND = {0: "int", 1: "uint", 2: "float"}
_UINT, _BOOL, _BFLOAT = 1, 6, 4
_TRITON_NUMPY = {t.numpy for t in DATATYPES if t.size}


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


class DLPackError(ValueError):
    """What a capsule holds that a Python model's tensor cannot (the message is Triton's where it
    has one)."""


@dataclass(frozen=True)
class DLView:
    """Where a DLPack tensor's elements are and how they are laid out."""

    pointer: int  # the first element (the DLTensor's data plus byte_offset)
    device: tuple[int, int]  # (DLDeviceType, device id)
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements; None: C order
    dtype: np.dtype  # BF16_WORDS for bfloat16

    @property
    def c_contiguous(self) -> bool:
        """Each dimension, read from the last, has the stride of the ones after it; dimensions of
        size 1 are passed over. (Triton's own check leaves out the first dimension, and then serves
        a tensor strided in it as if it were not: here it is refused.)"""
        if self.strides is None:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1:
                if stride != expected:
                    return False
                expected *= size
        return True


def read_capsule(capsule) -> DLView:
    """The tensor a DLPack capsule (``"dltensor"``, not yet consumed) describes."""
    name = _capsule_name(capsule)
    if name != _CAPSULE_NAME:
        raise DLPackError(f"the DLPack capsule is named {name.decode() if name else None!r}, not 'dltensor' "
                          "(it was consumed already, or is of another DLPack version)")
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, _CAPSULE_NAME))
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    strides = tuple(tensor.strides[i] for i in range(tensor.ndim)) if tensor.strides else None
    dtype = tensor.dtype
    if dtype.lanes != 1:
        raise DLPackError(f"DLPack tensors of {dtype.lanes} lanes are not supported")
    return DLView((tensor.data or 0) + tensor.byte_offset, (tensor.device.device_type, tensor.device.device_id),
                  shape, strides, _numpy_dtype(dtype.code, dtype.bits))


def _numpy_dtype(code: int, bits: int) -> np.dtype:
    if code == _BOOL and bits == 8:
        return np.dtype(bool)
    if code == _BFLOAT and bits == 16:
        return BF16_WORDS
    name = f"{_NUMPY_KIND.get(code)}{bits}"
    return np.dtype(name) if name in _TRITON_NUMPY else _unsupported(code, bits)


def _unsupported(code: int, bits: int):
    raise DLPackError(f"DLPack data type (code {code}, {bits} bits) has no Triton data type")


def retype_bfloat16(capsule, to_words: bool):
    """``capsule`` with its bfloat16 elements called uint16 (``to_words``), which numpy reads, or its
    uint16 elements called bfloat16, which torch reads as such: the same memory either way. Only
    the capsule's own DLTensor changes, before anyone consumes it."""
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, _CAPSULE_NAME))
    tensor.dtype.code = _UINT if to_words else _BFLOAT
    return capsule


def synchronize(device_id: int, needed_by: str) -> None:
    """Wait for the work queued on the device, on any stream: what a framework wrote there is in
    memory once this returns."""
    runtime = _runtime(needed_by)
    with _on_device(runtime, device_id, needed_by):
        _call(runtime, needed_by, "cudaDeviceSynchronize")


def copy_to_host(view: DLView, needed_by: str) -> np.ndarray:
    """The GPU tensor ``view`` describes, copied into a new numpy array once the work queued on its
    device is done."""
    runtime = _runtime(needed_by)
    host = np.empty(view.shape, view.dtype)
    if host.nbytes:
        with _on_device(runtime, view.device[1], needed_by):
            _call(runtime, needed_by, "cudaDeviceSynchronize")
            _call(runtime, needed_by, "cudaMemcpy", host.ctypes.data, view.pointer, host.nbytes,
                  runtime.cudaMemcpyKind.cudaMemcpyDeviceToHost)
    return host


def _runtime(needed_by: str):
    try:
        return require("cuda.bindings.runtime", needed_by)
    except MissingDependency as exc:
        raise DLPackError(str(exc)) from None


def _call(runtime, needed_by: str, function: str, *args):
    result = getattr(runtime, function)(*args)
    if result[0] != runtime.cudaError_t.cudaSuccess:
        raise DLPackError(f"{function} failed for {needed_by}: {runtime.cudaGetErrorString(result[0])[1].decode()}")
    return result[1] if len(result) > 1 else None


@contextmanager
def _on_device(runtime, device_id: int, needed_by: str):
    """The calling thread's current CUDA device is ``device_id`` inside, and what it was after."""
    before = _call(runtime, needed_by, "cudaGetDevice")
    if before != device_id:
        _call(runtime, needed_by, "cudaSetDevice", device_id)
    try:
        yield
    finally:
        if before != device_id:
            _call(runtime, needed_by, "cudaSetDevice", before)
