"""Triton's response cache (serving_protocol.md B.7, Triton's response_cache.md).

On only when the server has a cache (``--cache-config local,size=BYTES``) *and* the model
enables it (``response_cache { enable: true }``); a model that enables it on a server without a
cache is served uncached, silently, as in Triton. One cache is shared by every model, bounded
by the bytes of the outputs it holds, least recently used entries leaving first.

The lookup happens where Triton's does, as a request is queued: a hit is answered at once and
never queues or runs. A miss runs normally and its successful response is stored as it
completes. Only successful responses are stored; sequence and decoupled models are never
cached (Triton refuses that combination at load).

The key is a BLAKE2b digest (hashlib, so no dependency) of the model name, version, and every
input's name, datatype, shape and wire bytes in name order, plus the requested outputs.
Triton hashes name and bytes with a 64-bit ``boost::hash_combine``; here shape and datatype
are included (two requests with the same bytes but other shapes must not share a response)
and the 128-bit digest makes a collision negligible. BLAKE2b runs at over 1 GB/s, far below
the cost of the model run it saves, where a 64-bit non-cryptographic hash (xxhash) would be
faster still but a new dependency. Requested outputs are part of the key because the stored
response carries only the outputs its request asked for. Request parameters are not part of
the key, as in Triton.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import threading
import time
from collections import OrderedDict

from tritonctl.serve.core.tensors import to_raw
from tritonctl.serve.core.types import InferRequest, InferResponse, InferTensor

log = logging.getLogger("tritonctl.serve")

CACHE_KINDS = ("local",)


class CacheConfigError(ValueError):
    """A ``--cache-config`` value tritonctl serve cannot use."""


def parse_cache_config(values: list[str] | tuple[str, ...]) -> int | None:
    """The local cache size in bytes from tritonserver-style ``--cache-config`` values
    (``<cache>,<key>=<value>``, repeatable, keys collected per cache), or None when none given."""
    settings: dict[str, dict[str, str]] = {}
    for value in values:
        name, comma, setting = value.partition(",")
        key, equals, item = setting.partition("=")
        if not comma or not name:
            raise CacheConfigError(f"No cache specified. --cache-config option format is "
                                   f"<cache name>,<setting>=<value>. Got {value}")
        if not equals or not key or not item:
            raise CacheConfigError(f"--cache-config option format is '<cache name>,<setting>=<value>'. Got {value}")
        settings.setdefault(name, {})[key] = item
    if not settings:
        return None
    if len(settings) > 1:  # tritonserver's text
        raise CacheConfigError("found multiple cache configurations, but only a single cache is currently supported")
    unsupported = [n for n in settings if n not in CACHE_KINDS]
    if unsupported:
        raise CacheConfigError(f"cache implementation '{unsupported[0]}' is not available in tritonctl serve; "
                               "use --cache-config local,size=<bytes>")
    local = settings["local"]
    if "size" not in local:  # tritonserver's text, then what to write
        raise CacheConfigError("Failed to initialize LocalCache: config didn't contain a valid 'size' field. "
                               "The local cache needs a size: --cache-config local,size=<bytes>")
    unknown = sorted(k for k in local if k != "size")
    if unknown:
        raise CacheConfigError(f"unknown setting '{unknown[0]}' for the local cache; it takes only size=<bytes>")
    try:
        size = int(local["size"])
    except ValueError:
        raise CacheConfigError(f"Failed to initialize LocalCache: --cache-config local,size= needs a whole number "
                               f"of bytes, got '{local['size']}'") from None
    if size <= 0:
        raise CacheConfigError(f"Failed to initialize LocalCache: --cache-config local,size= must be positive, got "
                               f"{size}; leave --cache-config out to serve without a cache")
    return size


def request_key(model: str, version: str, request: InferRequest) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{model}\0{version}\0".encode())
    for name in sorted(request.inputs):
        tensor = request.inputs[name]
        shape = tensor.data.shape
        digest.update(f"{name}\0{tensor.datatype}\0".encode())
        digest.update(struct.pack(f"<{len(shape) + 1}q", len(shape), *shape))
        digest.update(to_raw(tensor.datatype, tensor.data))
    requested = request.requested_outputs
    outputs = "*" if requested is None else ",".join(f"{o.name}:{o.classification}" for o in requested)
    digest.update(outputs.encode())
    return digest.digest()


def response_bytes(outputs: list[InferTensor]) -> int:
    """What an entry costs: its outputs' wire bytes (BYTES elements with their length prefixes)."""
    return sum(len(to_raw(t.datatype, t.data)) for t in outputs)


class ResponseCache:
    """A byte-bounded LRU map from request keys to response outputs, safe across threads."""

    def __init__(self, capacity_bytes: int):
        self.capacity = capacity_bytes
        self.used = 0
        self._entries: OrderedDict[bytes, tuple[list[InferTensor], int]] = OrderedDict()
        self._lock = threading.Lock()
        # the cache-wide totals Triton publishes (nv_cache_num_hits, nv_cache_lookup_duration, ...)
        self.hits = self.misses = self.evictions = 0
        self.lookup_ns = self.insertion_ns = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: bytes) -> list[InferTensor] | None:
        start = time.monotonic_ns()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            self.hits += entry is not None
            self.misses += entry is None
            self.lookup_ns += time.monotonic_ns() - start
            return None if entry is None else entry[0]

    def utilization(self) -> float:
        """The share of the capacity the stored outputs take, as nv_cache_util reports it."""
        return self.used / self.capacity

    def insert(self, key: bytes, outputs: list[InferTensor]) -> bool:
        """Store ``outputs`` (copied, so the cache never shares a buffer with a batch). False only
        when the key is already there (Triton's ALREADY_EXISTS, which is not a miss); an entry
        larger than the whole cache is not stored but still counts as a miss, as in Triton."""
        size = response_bytes(outputs)
        if size > self.capacity:
            log.debug("a response of %d bytes does not fit a response cache of %d bytes", size, self.capacity)
            return True
        start = time.monotonic_ns()
        stored = [InferTensor(t.name, t.datatype, t.data.copy()) for t in outputs]
        with self._lock:
            if key in self._entries:
                return False
            while self.used + size > self.capacity:
                _, (_, evicted) = self._entries.popitem(last=False)
                self.used -= evicted
                self.evictions += 1
            self._entries[key] = (stored, size)
            self.used += size
            self.insertion_ns += time.monotonic_ns() - start
        return True


def serve_from_cache(cache: ResponseCache, model, request: InferRequest) -> bool:
    """Answer ``request`` for ``model`` (a ModelVersion) from ``cache``: True on a hit (the
    request is finished). On a miss, arrange for the response to be stored when it succeeds."""
    queue_start = time.monotonic_ns()
    request.queue_start_ns = queue_start
    lookup_start = time.monotonic_ns()
    key = request_key(model.name, model.version_str, request)
    outputs = cache.lookup(key)
    lookup_ns = time.monotonic_ns() - lookup_start
    if outputs is not None:
        response = InferResponse(model.name, model.version_str, request.id, list(outputs))
        end = time.monotonic_ns()
        model.stats.record_cache_hit(end - request.arrival_ns, lookup_start - queue_start, lookup_ns)
        model.scheduler.hold_in_order(request)
        request.finish(response)
        return True
    deliver = request.complete

    def complete(response: InferResponse | None, error) -> None:
        if response is not None and error is None:
            insert_start = time.monotonic_ns()
            if cache.insert(key, response.outputs):
                model.stats.record_cache_miss(lookup_ns + time.monotonic_ns() - insert_start)
        if deliver is not None:
            deliver(response, error)

    request.complete = complete
    return False
