"""Triton's shared-memory extensions (serving_protocol.md A.1 rows 15-20, A.2, A.4).

A client registers named regions: system shared memory (a POSIX shared-memory object the
server opens with ``shm_open`` and maps, as Triton does; the key is the object's name) or CUDA
memory (a ``cudaIpcMemHandle_t`` opened with cuda-python where a GPU is usable). Inputs and
requested outputs then name a region, an offset and a byte size instead of carrying data.
Region names share one namespace for both kinds.

An input read from a system region is a read-only numpy view of the mapping: no copy. The view
keeps the mapping alive, so a region's memory outlives any unregistering while a request reads
it; the mapping is released when the last view goes. As in Triton after 2.51 (2.51 refuses:
"Cannot unregister shared memory region '<name>', it is currently in use."), a region that
requests in flight read or write stays registered when it is unregistered, and goes when the
last of them ends: each request holds the regions it names (``Holds``) until its response is
made. CUDA inputs are copied to host memory when the request is decoded, and CUDA outputs are
written under the registry lock, so a CUDA region is never closed while it is being read or
written.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from tritonctl.serve.core.cuda_ipc import CUDA_IPC_HANDLE_SIZE, CudaIpc
from tritonctl.serve.core.errors import ServeError, Status, internal, invalid_arg, not_found
from tritonctl.serve.core.tensors import from_raw, to_raw

log = logging.getLogger("tritonctl.serve")

SYSTEM = "system"
CUDA = "cuda"
REGION, OFFSET, BYTE_SIZE = "shared_memory_region", "shared_memory_offset", "shared_memory_byte_size"


@dataclass(frozen=True, slots=True)
class ShmParams:
    """Where a tensor lives: ``byte_size`` bytes at ``offset`` into region ``region``."""

    region: str
    offset: int
    byte_size: int


def shm_params(params, tensor: str, grpc: bool = False) -> ShmParams | None:
    """The shared-memory parameters of a tensor (None when it names no region), checked as
    Triton checks them; ``grpc`` selects the gRPC wording for a value of the wrong type."""
    if REGION not in params and OFFSET not in params and BYTE_SIZE not in params:
        return None
    region = params.get(REGION)
    if region is None:
        given = OFFSET if OFFSET in params else BYTE_SIZE
        raise invalid_arg(f"'{given}' can not be specified without '{REGION}' parameter for tensor '{tensor}'")
    if not isinstance(region, str):
        raise _type_error(REGION, "string_param", tensor, grpc)
    if BYTE_SIZE not in params:
        raise invalid_arg(f"'{BYTE_SIZE}' must be specified along with '{REGION}' parameter for tensor '{tensor}'")
    values = []
    for key in (OFFSET, BYTE_SIZE):
        value = params.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _type_error(key, "int64_param", tensor, grpc)
        if value < 0:
            raise invalid_arg(f"'{key}' for tensor '{tensor}' must not be negative, got {value}")
        values.append(value)
    return ShmParams(region, values[0], values[1])


def manager_for(shm: "SharedMemoryManager | None", where: ShmParams) -> "SharedMemoryManager":
    """``shm``, or Triton's unknown-region error for a request decoded without one."""
    if shm is None:
        raise not_found(f"Unable to find shared memory region: '{where.region}'")
    return shm


def _type_error(key: str, expected: str, tensor: str, grpc: bool) -> ServeError:
    if grpc:
        return invalid_arg(f"invalid value type for '{key}' parameter for tensor '{tensor}', expected {expected}.")
    return invalid_arg(f"Unable to parse '{key}'")


class Region:
    """One registered region. System regions hold the mapping and a writable view of the
    registered bytes; CUDA regions hold the opened device pointer."""

    __slots__ = ("name", "kind", "key", "offset", "byte_size", "device_id", "view", "mapping", "pointer", "holders",
                 "awaiting_unregister")

    def __init__(self, name: str, kind: str, byte_size: int, key: str = "", offset: int = 0, device_id: int = 0):
        self.name = name
        self.kind = kind
        self.key = key
        self.offset = offset
        self.byte_size = byte_size
        self.device_id = device_id
        self.view: memoryview | None = None
        self.mapping: mmap.mmap | None = None
        self.pointer = 0
        self.holders = 0  # requests in flight that name this region
        self.awaiting_unregister = False  # unregistered while held: goes when the last holder ends

    def status(self) -> dict:
        if self.kind == SYSTEM:
            return {"name": self.name, "key": self.key, "offset": self.offset, "byte_size": self.byte_size}
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}

    def release(self) -> None:
        """Drop this region's own hold on the mapping; tensors still viewing it keep it mapped
        until they go (closing it under them would fail, so it is left to them)."""
        if self.view is not None:
            self.view.release()
            self.view = None
        if self.mapping is not None:
            try:
                self.mapping.close()
            except BufferError:
                pass
            self.mapping = None


@dataclass(frozen=True, slots=True)
class OutputTarget:
    """Where a requested output is to be written, resolved when the request is decoded."""

    manager: "SharedMemoryManager"
    region: Region
    offset: int
    byte_size: int
    view: memoryview | None  # system regions: the writable bytes; CUDA: None

    def write(self, name: str, datatype: str, data: np.ndarray) -> None:
        self.manager.write_output(self, name, datatype, data)


class Holds:
    """The regions one request names, held registered until ``release`` (called when its
    response is made, or when the request is dropped unanswered: a refused or undecodable one)."""

    __slots__ = ("manager", "regions", "__weakref__")

    def __init__(self, manager: "SharedMemoryManager"):
        self.manager = manager
        self.regions: list[Region] = []

    def release(self) -> None:
        regions, self.regions = self.regions, []
        if regions:
            self.manager._let_go(regions)


class SharedMemoryManager:
    """The registered regions of one server, thread-safe."""

    def __init__(self) -> None:
        self._regions: dict[str, Region] = {}
        # Reentrant: a dropped request's Holds are released by its finalizer, which the garbage
        # collector may run while this thread holds the lock.
        self._lock = threading.RLock()
        self._cuda: CudaIpc | None = None

    # ---- registration ------------------------------------------------------------------------
    def register_system(self, name: str, key: str, offset: int, byte_size: int) -> None:
        if not name:
            raise invalid_arg("'region name' is necessary to register system shared memory region")
        with self._lock:
            self._check_new(name)
            region = Region(name, SYSTEM, byte_size, key=key, offset=offset)
            region.mapping, region.view = _map_system(name, key, offset, byte_size)
            self._regions[name] = region

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        if not name:
            raise invalid_arg("'region name' is necessary to register cuda shared memory region")
        cuda = self._cuda_or_error(name)
        if len(raw_handle) != CUDA_IPC_HANDLE_SIZE:
            raise invalid_arg("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
        with self._lock:
            self._check_new(name)
            region = Region(name, CUDA, byte_size, device_id=device_id)
            region.pointer = cuda.open(name, raw_handle, device_id, byte_size)
            self._regions[name] = region

    def cuda_supported(self) -> bool:
        """Whether CUDA regions can be registered here (cuda-python and a usable GPU)."""
        if self._cuda is None:
            self._cuda = CudaIpc()
        return self._cuda.reason is None

    def _cuda_or_error(self, name: str) -> CudaIpc:
        if not self.cuda_supported():
            raise invalid_arg(f"failed to register CUDA shared memory region: '{name}', GPUs not supported")
        return self._cuda

    def _check_new(self, name: str) -> None:
        if name in self._regions:
            raise ServeError(Status.ALREADY_EXISTS, f"shared memory region '{name}' already in manager")

    def status(self, kind: str, name: str = "") -> list[dict]:
        with self._lock:
            if not name:  # by name, as Triton's std::map holds them
                return [r.status() for _, r in sorted(self._regions.items()) if r.kind == kind]
            region = self._regions.get(name)
            if region is None:
                raise not_found(f"Unable to find {'cuda' if kind == CUDA else 'system'} shared memory region: "
                                f"'{name}'")
            if region.kind != kind:
                registered, asked = ("CUDA", "system") if region.kind == CUDA else ("system", "CUDA")
                raise not_found(f"The region named '{name}' is registered as {registered} shared memory, not "
                                f"{asked} shared memory")
            return [region.status()]

    def unregister(self, kind: str, name: str = "") -> None:
        """Unregister region ``name`` of ``kind``, or every region of ``kind`` when ``name`` is
        empty; a name that is not registered (as that kind) is not an error, as in Triton. A
        region a request in flight names stays until the last such request ends."""
        with self._lock:
            regions = [r for n, r in list(self._regions.items()) if r.kind == kind and (not name or n == name)]
            for region in regions:
                if region.holders:
                    region.awaiting_unregister = True
                    log.debug("Shared memory region '%s' will be unregistered after in-flight requests complete.",
                              region.name)
                elif self._regions.get(region.name) is region:
                    del self._regions[region.name]
                    self._close(region)

    def _hold(self, region: Region, holder) -> None:
        """``holder`` (an InferRequest) names ``region``: it stays registered until the request
        releases its Holds. Called under the lock."""
        if holder is None:
            return
        region.holders += 1  # first: a finalizer run by what follows must not see it unheld
        holds = holder.shm_holds
        if holds is None:
            holds = holder.shm_holds = Holds(self)
            weakref.finalize(holder, holds.release).atexit = False  # a request dropped unanswered lets go too
        holds.regions.append(region)

    def _let_go(self, regions: list[Region]) -> None:
        with self._lock:
            for region in regions:
                region.holders -= 1
                if (not region.holders and region.awaiting_unregister
                        and self._regions.get(region.name) is region):
                    del self._regions[region.name]
                    self._close(region)

    def close(self) -> None:
        """Release every region (server stop)."""
        with self._lock:
            regions, self._regions = list(self._regions.values()), {}
            for region in regions:
                try:
                    self._close(region)
                except ServeError as exc:  # one region that will not close must not keep the others
                    log.error("releasing shared memory region '%s': %s", region.name, exc.message)

    def _close(self, region: Region) -> None:
        if region.kind == CUDA:
            self._cuda.close(region.pointer, region.device_id)
        else:
            region.release()

    # ---- tensors ----------------------------------------------------------------------------
    def _locate(self, params: ShmParams) -> Region:
        """Triton's GetMemoryInfo: the region, with the tensor's bytes checked to lie in it."""
        region = self._regions.get(params.region)
        if region is None:
            raise not_found(f"Unable to find shared memory region: '{params.region}'")
        if params.offset >= region.byte_size:
            raise invalid_arg(f"Invalid offset for shared memory region: '{params.region}'")
        if params.offset + params.byte_size > region.byte_size:
            raise invalid_arg(f"Invalid offset + byte size for shared memory region: '{params.region}'")
        return region

    def input_array(self, params: ShmParams, datatype: str, shape: list[int], name: str, model: str,
                    request_id: str = "", holder=None) -> np.ndarray:
        """The input tensor stored at ``params``: a read-only view for system memory.
        ``holder``: the InferRequest reading it, which holds the region until it ends."""
        with self._lock:
            region = self._locate(params)
            self._hold(region, holder)
            start, end = params.offset, params.offset + params.byte_size
            if region.kind == SYSTEM:
                buffer = region.view[start:end].toreadonly()
            else:
                buffer = self._cuda.read(region.pointer + start, params.byte_size, region.device_id)
        return from_raw(datatype, shape, buffer, name, model, request_id)  # Triton's core names the request

    def output_target(self, params: ShmParams, holder=None) -> OutputTarget:
        with self._lock:
            region = self._locate(params)
            self._hold(region, holder)
            view = None
            if region.kind == SYSTEM:
                view = region.view[params.offset:params.offset + params.byte_size]
            return OutputTarget(self, region, params.offset, params.byte_size, view)

    def write_output(self, target: OutputTarget, name: str, datatype: str, data: np.ndarray) -> None:
        """Write an output tensor into its region; Triton's error when the region is too small."""
        raw = to_raw(datatype, data)
        size = len(raw)
        if size > target.byte_size:
            raise internal(f"shared memory size specified with the request for output '{name}' ({target.byte_size} "
                           f"bytes) should be at least {size} bytes to hold the results")
        if target.view is not None:
            target.view[:size] = raw
            return
        with self._lock:
            region = target.region
            if self._regions.get(region.name) is not region:
                raise not_found(f"Unable to find shared memory region: '{region.name}'")
            self._cuda.write(region.pointer + target.offset, raw, region.device_id)


def _map_system(name: str, key: str, offset: int, byte_size: int) -> tuple[mmap.mmap, memoryview]:
    """shm_open the object ``key`` and map the registered bytes; Triton's errors."""
    try:
        from _posixshmem import shm_open
    except ImportError:
        raise ServeError(Status.UNSUPPORTED, "Shared memory feature is currently not supported on Windows") from None
    try:
        fd = shm_open(key, os.O_RDWR, mode=0o600)
    except (OSError, ValueError) as exc:
        log.debug("shm_open(%r) failed: %s", key, exc)
        raise internal(f"Unable to open shared memory region: '{key}'") from None
    try:
        size = os.fstat(fd).st_size
        if offset + byte_size > size:
            raise invalid_arg(f"failed to register shared memory region '{name}': invalid args")
        if byte_size == 0:  # mmap's EINVAL, in Triton's words
            raise invalid_arg(f"failed to register shared memory region '{name}': unable to process address space"
                              "Invalid argument")
        start = offset - offset % mmap.ALLOCATIONGRANULARITY  # mmap offsets must be page-aligned
        try:
            mapping = mmap.mmap(fd, offset + byte_size - start, offset=start)
        except OSError as exc:
            raise invalid_arg(f"failed to register shared memory region '{name}': unable to process address space"
                              f"{exc.strerror}") from None
    finally:
        os.close(fd)
    return mapping, memoryview(mapping)[offset - start:offset - start + byte_size]
