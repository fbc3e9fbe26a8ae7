"""perf_analyzer's ``--streaming``: requests sent over gRPC's bidirectional ``ModelStreamInfer``, the
only way to call a decoupled model. Each stream carries one request at a time, so N requests in
flight use N streams (one per concurrency slot, as perf_analyzer gives each context its own).

Every request asks for the empty final response (``triton_enable_empty_final_response``), so its end
is known even when the model sends the final flag alone; a response is the request's last when its
``triton_final_response`` parameter is true (or absent, as tritonclient reads it). An error message
inside the stream fails its request with the server's text and leaves the stream open; a stream that
breaks (a gRPC status, no answer within the request timeout) fails its request and is replaced."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from tritonctl.perf.measurement import Responses

ENABLE_EMPTY_FINAL = "triton_enable_empty_final_response"
FINAL_RESPONSE = "triton_final_response"
CLOSE_GRACE_S = 1.0


class StreamError(Exception):
    """A streamed request failed: an error response, or a stream that broke."""


@dataclass(frozen=True)
class Answer:
    """A streamed request's responses, and the last one that carried outputs (an InferResult, or None)."""

    responses: Responses
    result: Any


def request_message(model: str, version: str, inputs: list, outputs: list, parameters: dict,
                    sequence: dict | None = None) -> Any:
    """The ModelInferRequest of one streamed request (tritonclient's own encoding), asking for the
    empty final response."""
    from tritonclient.grpc._utils import _get_inference_request

    sequence = sequence or {}
    message = _get_inference_request(
        model_name=model, inputs=inputs, model_version=version, request_id="", outputs=outputs,
        sequence_id=sequence.get("sequence_id", 0), sequence_start=sequence.get("sequence_start", False),
        sequence_end=sequence.get("sequence_end", False), priority=0, timeout=None, parameters=parameters or None)
    message.parameters[ENABLE_EMPTY_FINAL].bool_param = True
    return message


class StreamPool:
    """Streams to one server: a request takes an idle stream or opens one, and gives it back once its
    final response has come. Use ``await pool.close()`` at the end."""

    def __init__(self, url: str, compression: str | None, timeout_s: float):
        import grpc
        from tritonclient.grpc import service_pb2_grpc

        self._grpc = grpc
        self._channel = grpc.aio.insecure_channel(url, options=[("grpc.max_send_message_length", -1),
                                                                ("grpc.max_receive_message_length", -1)])
        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)
        self._compression = {"gzip": grpc.Compression.Gzip, "deflate": grpc.Compression.Deflate}.get(
            compression or "", grpc.Compression.NoCompression)
        self._timeout_s = timeout_s
        self._idle: list[Any] = []

    async def infer(self, message: Any) -> Answer:
        """Send one request and read its responses up to the final one."""
        call = self._idle.pop() if self._idle else self._stub.ModelStreamInfer(compression=self._compression)
        try:
            answer, error = await self._exchange(call, message)
        except self._grpc.aio.AioRpcError as exc:
            call.cancel()
            raise StreamError(f"the stream ended: {exc.details() or exc.code().name}") from None
        except BaseException:
            call.cancel()
            raise
        self._idle.append(call)
        if error:
            raise StreamError(error)
        return answer

    async def close(self) -> None:
        """Tell the server every idle stream is done, then close the channel (cancelling what is left)."""
        for call in self._idle:
            try:
                await call.done_writing()
            except self._grpc.aio.AioRpcError:
                pass
        self._idle.clear()
        await self._channel.close(grace=CLOSE_GRACE_S)

    async def _exchange(self, call: Any, message: Any) -> tuple[Answer, str | None]:
        from tritonclient.grpc import InferResult

        await call.write(message)
        times: list[int] = []
        last, error, empty_final = None, None, False
        while True:
            response = await self._read(call)
            now = time.perf_counter_ns()
            infer = response.infer_response
            final = infer.parameters[FINAL_RESPONSE].bool_param if FINAL_RESPONSE in infer.parameters else True
            if response.error_message:
                error = error or response.error_message
            else:
                times.append(now)
                if infer.outputs:
                    last = infer
                elif final:
                    empty_final = True  # the final flag alone: not a response of the model's
            if final:
                break
        result = InferResult(last) if last is not None else None
        return Answer(Responses(tuple(times), empty_final), result), error

    async def _read(self, call: Any) -> Any:
        # Not asyncio.wait_for, for the reason run._wait gives.
        read = asyncio.ensure_future(call.read())
        try:
            done, _ = await asyncio.wait({read}, timeout=self._timeout_s)
        finally:
            if not read.done():
                read.cancel()
        if not done:
            raise StreamError(f"no final response within {self._timeout_s:g} s")
        response = read.result()
        if response is self._grpc.aio.EOF:
            raise StreamError("the server ended the stream before the request's final response")
        return response
