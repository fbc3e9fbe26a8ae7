"""A thin protocol layer over tritonclient's asyncio clients: metadata, statistics and inference."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tritonctl.perf.measurement import ServerStats
from tritonctl.perf.options import PerfError


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str
    shape: tuple[int, ...]  # as the metadata gives it, batch dimension included, -1 for variable
    optional: bool = False


@dataclass(frozen=True)
class ModelInfo:
    name: str
    max_batch_size: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    sequence: bool = False  # the model has a sequence batcher: requests go in sequences
    string_correlation_id: bool = False  # its CONTROL_SEQUENCE_CORRID input is TYPE_STRING
    decoupled: bool = False


@dataclass(frozen=True)
class RequestSettings:
    """How every inference request is sent: HTTP headers and tensor encodings, gRPC compression and
    request parameters."""

    headers: dict[str, str] = field(default_factory=dict)
    binary_inputs: bool = True
    binary_outputs: bool = True
    compression: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)


class PerfClient:
    """One asyncio client for either protocol. Use as ``async with PerfClient(...) as client``."""

    def __init__(self, url: str, protocol: str, timeout_s: float, settings: RequestSettings | None = None):
        self.url = _strip_scheme(url)
        self.protocol = protocol
        self.timeout_s = timeout_s
        self.settings = settings or RequestSettings()
        if protocol == "grpc":
            import tritonclient.grpc.aio as module
        else:
            import tritonclient.http.aio as module
        from tritonclient.utils import triton_to_np_dtype

        self._module = module
        # what this tritonclient takes BF16 from: ml_dtypes' bfloat16 (float32 before r26.06)
        self._bf16_dtype = triton_to_np_dtype("BF16")
        self._client: Any = None
        self._streams: Any = None  # the StreamPool of streamed requests, opened by the first one

    async def __aenter__(self) -> "PerfClient":
        if self.protocol == "grpc":
            self._client = self._module.InferenceServerClient(self.url)
        else:
            self._client = self._module.InferenceServerClient(self.url, conn_limit=1024, conn_timeout=self.timeout_s)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._streams is not None:
            await self._streams.close()
        await self._client.close()

    async def model_info(self, model: str, version: str) -> ModelInfo:
        try:
            if self.protocol == "grpc":
                metadata = await self._client.get_model_metadata(model, version, as_json=True)
                config = (await self._client.get_model_config(model, version, as_json=True))["config"]
            else:
                metadata = await self._client.get_model_metadata(model, version)
                config = await self._client.get_model_config(model, version)
        except Exception as exc:
            raise PerfError(f"cannot read model '{model}' from {self.protocol}://{self.url}: {_short(exc)}") from None
        return model_info_from_json(model, metadata, config)

    async def statistics(self, model: str, version: str) -> ServerStats | None:
        """Cumulative statistics summed over the model's versions, or None if the server has none."""
        try:
            if self.protocol == "grpc":
                stats = await self._client.get_inference_statistics(model, version, as_json=True)
            else:
                stats = await self._client.get_inference_statistics(model, version)
        except Exception:
            return None
        return stats_from_json(stats)

    def make_inputs(self, arrays: dict[str, Any], datatypes: dict[str, str]) -> list[Any]:
        """tritonclient InferInput objects for one request, filled from numpy arrays."""
        inputs = []
        for name, array in arrays.items():
            if datatypes[name] == "BF16":
                array = array.astype(self._bf16_dtype, copy=False)
            item = self._module.InferInput(name, list(array.shape), datatypes[name])
            if self.protocol == "http":
                item.set_data_from_numpy(array, binary_data=self.settings.binary_inputs)
            else:
                item.set_data_from_numpy(array)
            inputs.append(item)
        return inputs

    def make_outputs(self, names: list[str]) -> list[Any]:
        if self.protocol == "http":
            return [self._module.InferRequestedOutput(n, binary_data=self.settings.binary_outputs) for n in names]
        return [self._module.InferRequestedOutput(n) for n in names]

    async def infer(self, model: str, version: str, inputs: list[Any], outputs: list[Any],
                    sequence: dict[str, Any] | None = None) -> Any:
        """One request; ``sequence`` holds sequence_id / sequence_start / sequence_end for a sequence model."""
        settings = self.settings
        if self.protocol == "grpc":
            return await self._client.infer(model, inputs, model_version=version, outputs=outputs,
                                            client_timeout=self.timeout_s, compression_algorithm=settings.compression,
                                            parameters=settings.parameters or None, **(sequence or {}))
        return await self._client.infer(model, inputs, model_version=version, outputs=outputs,
                                        headers=settings.headers or None, **(sequence or {}))

    async def stream_infer(self, model: str, version: str, inputs: list[Any], outputs: list[Any],
                           sequence: dict[str, Any] | None = None) -> Any:
        """One request over a gRPC stream (--streaming): a streaming.Answer, its responses' arrival times
        and the last response with outputs. Raises StreamError for an error response."""
        from tritonctl.perf.streaming import StreamPool, request_message

        if self._streams is None:
            self._streams = StreamPool(self.url, self.settings.compression, self.timeout_s)
        return await self._streams.infer(request_message(model, version, inputs, outputs, self.settings.parameters,
                                                         sequence))

    async def update_trace_settings(self, model: str, settings: dict[str, Any]) -> None:
        """Triton's trace settings for ``model`` (perf_analyzer's --trace-* options)."""
        try:
            await self._client.update_trace_settings(model_name=model, settings=settings)
        except Exception as exc:
            raise PerfError(f"cannot update the trace settings of model '{model}' on {self.protocol}://"
                            f"{self.url}: {_short(exc)}") from None


def model_info_from_json(model: str, metadata: dict, config: dict) -> ModelInfo:
    """A ModelInfo from the metadata and configuration endpoints' JSON."""
    optional = {t.get("name") for t in config.get("input", []) if t.get("optional")}
    sequence = config.get("sequence_batching")
    return ModelInfo(
        name=model, max_batch_size=int(config.get("max_batch_size", 0) or 0),
        inputs=tuple(_spec(t, t["name"] in optional) for t in metadata.get("inputs", [])),
        outputs=tuple(_spec(t) for t in metadata.get("outputs", [])),
        sequence=sequence is not None,
        string_correlation_id=_string_correlation_id(sequence or {}),
        decoupled=bool((config.get("model_transaction_policy") or {}).get("decoupled")),
    )


def _string_correlation_id(sequence: dict) -> bool:
    for control_input in sequence.get("control_input", []):
        for control in control_input.get("control", []):
            if control.get("kind") == "CONTROL_SEQUENCE_CORRID":
                return control.get("data_type") == "TYPE_STRING"
    return False


def _spec(tensor: dict, optional: bool = False) -> TensorSpec:
    return TensorSpec(tensor["name"], tensor["datatype"], tuple(int(d) for d in tensor.get("shape", [])), optional)


def _strip_scheme(url: str) -> str:
    for scheme in ("http://", "https://", "grpc://"):
        if url.startswith(scheme):
            return url[len(scheme):].rstrip("/")
    return url.rstrip("/")


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def stats_from_json(stats: dict) -> ServerStats:
    """The statistics extension's JSON (``/v2/models/NAME/stats``) summed over the model's versions."""
    total = ServerStats()
    for entry in stats.get("model_stats", []):
        infer = entry.get("inference_stats", {})

        def part(key: str, field: str = "ns") -> int:
            return int(infer.get(key, {}).get(field, 0) or 0)

        total = total + ServerStats(
            success_count=part("success", "count"), success_ns=part("success"), queue_ns=part("queue"),
            compute_input_ns=part("compute_input"), compute_infer_ns=part("compute_infer"),
            compute_output_ns=part("compute_output"),
            inference_count=int(entry.get("inference_count", 0) or 0),
            execution_count=int(entry.get("execution_count", 0) or 0),
        )
    return total
