"""CUDA IPC for the CUDA shared-memory extension, through cuda-python (the package
tritonclient's own CUDA shared-memory utilities use), imported only when a CUDA region is first
registered: open the device memory another process exported with ``cudaIpcGetMemHandle``, copy
tensors out of and into it, close it."""

from __future__ import annotations

import ctypes
import logging

import numpy as np

from tritonctl.optional import unavailable
from tritonctl.serve.core.errors import internal, invalid_arg

log = logging.getLogger("tritonctl.serve")

CUDA_IPC_HANDLE_SIZE = 64  # bytes of a cudaIpcMemHandle_t


class CudaIpc:
    """Device memory of other processes. ``reason`` says why CUDA shared memory is unavailable
    here (no cuda-python, no usable GPU), or is None."""

    def __init__(self) -> None:
        self._rt = self._driver = None
        self.reason: str | None = unavailable("cuda.bindings.runtime")
        if self.reason is None:
            import cuda.bindings.driver as driver
            import cuda.bindings.runtime as runtime

            error, count = runtime.cudaGetDeviceCount()
            if error != runtime.cudaError_t.cudaSuccess or count == 0:
                self.reason = f"no usable CUDA device ({_error_name(runtime, error)})"
            else:
                self._rt, self._driver = runtime, driver
        if self.reason:
            log.info("CUDA shared memory is unavailable: %s", self.reason)

    def _check(self, result, what: str):
        error = result[0]
        if error != self._rt.cudaError_t.cudaSuccess:
            raise internal(f"{what}: {_error_name(self._rt, error)}")
        return result[1] if len(result) > 1 else None

    def open(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> int:
        rt = self._rt
        handle = rt.cudaIpcMemHandle_t()
        ctypes.memmove(handle.getPtr(), raw_handle, CUDA_IPC_HANDLE_SIZE)
        self._check(rt.cudaSetDevice(device_id), "cudaSetDevice failed")
        error, pointer = rt.cudaIpcOpenMemHandle(handle, rt.cudaIpcMemLazyEnablePeerAccess)
        if error != rt.cudaError_t.cudaSuccess:
            log.error("failed to open CUDA IPC handle: %s", _error_name(rt, error))
            raise invalid_arg("failed to register shared memory region: invalid args")
        pointer = int(pointer)
        error, _base, size = self._driver.cuMemGetAddressRange(pointer)
        if error != self._driver.CUresult.CUDA_SUCCESS or byte_size > int(size):
            self.close(pointer, device_id)
            raise invalid_arg(f"failed to register shared memory region '{name}': invalid args")
        return pointer

    def read(self, pointer: int, byte_size: int, device_id: int) -> np.ndarray:
        host = np.empty(byte_size, dtype=np.uint8)
        self._check(self._rt.cudaSetDevice(device_id), "cudaSetDevice failed")
        self._check(self._rt.cudaMemcpy(host.ctypes.data, pointer, byte_size,
                                        self._rt.cudaMemcpyKind.cudaMemcpyDeviceToHost), "cudaMemcpy failed")
        return host

    def write(self, pointer: int, raw, device_id: int) -> None:
        host = np.frombuffer(raw, dtype=np.uint8)
        if not host.size:
            return
        self._check(self._rt.cudaSetDevice(device_id), "cudaSetDevice failed")
        self._check(self._rt.cudaMemcpy(pointer, host.ctypes.data, host.size,
                                        self._rt.cudaMemcpyKind.cudaMemcpyHostToDevice), "cudaMemcpy failed")

    def close(self, pointer: int, device_id: int) -> None:
        self._check(self._rt.cudaSetDevice(device_id), "cudaSetDevice failed")
        self._check(self._rt.cudaIpcCloseMemHandle(pointer), "failed to close CUDA IPC handle")


def _error_name(runtime, error) -> str:
    try:
        return runtime.cudaGetErrorString(error)[1].decode()
    except Exception:  # an error code cuda-python cannot name
        return str(error)
