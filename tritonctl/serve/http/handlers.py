"""The HTTP endpoints (serving_protocol.md A.1) without a transport: a hand-written router,
orjson, model work handed to the core's worker threads. Both transports (native.py, the C++ one
over libevent, and asgi.py, uvicorn) hand it whole requests (``HttpRequest``) and write the
reply it answers with, in wire form (``Answer``); the router, the trace sampler, the reply
writer, the request-parameter semantics and the error replies are here alone."""

from __future__ import annotations

import asyncio
import gzip
import logging
import re
import zlib
from typing import Callable
from urllib.parse import unquote_to_bytes

import orjson

from tritonctl.serve.core.errors import ServeError, Status, invalid_arg
from tritonctl.serve.core import override_files
from tritonctl.serve.core import restrictions as restricted
from tritonctl.serve.core.header_forward import HeaderForwarding
from tritonctl.serve.core.restrictions import Restrictions
from tritonctl.serve.core.names import check_model_name
from tritonctl.serve.core.server import InferenceServer
from tritonctl.serve.core.shm import CUDA, SYSTEM
from tritonctl.serve.core.trace_config import http_update
from tritonctl.serve.http import shm_requests
from tritonctl.serve.http.codec import (decode_raw_request, decode_request, encode_response, error_body, log_changes,
                                        parse_json, parse_json_value)
from tritonctl.serve.http.generate import ACTIONS as GENERATE_ACTIONS, GenerateReply, decode_generate

log = logging.getLogger("tritonctl.serve.http")

JSON = [(b"content-type", b"application/json")]
OCTET = b"application/octet-stream"


class Reply:
    __slots__ = ("status", "body", "headers", "compressible")

    def __init__(self, status: int = 200, body=b"", headers: list | None = None, compressible: bool = False):
        self.status = status
        self.body = body  # bytes, or a list of buffers sent as one body
        self.headers = headers if headers is not None else (JSON if body else [])
        self.compressible = compressible  # inference responses follow Accept-Encoding, as in Triton


def json_reply(value, status: int = 200) -> Reply:
    return Reply(status, orjson.dumps(value))


def error_reply(error: ServeError) -> Reply:
    return Reply(error.status.http_status, error_body(error))


# (status, headers, body): a reply as the transport writes it; body bytes, or a list of buffers
# written one after the other
Answer = Callable[[int, list, "bytes | list"], None]

MODEL_ACTIONS = ("", "ready", "config", "stats", "infer", "generate", "generate_stream")
INFERENCE_ACTIONS = ("infer", "generate", "generate_stream")
NOT_FOUND = Reply(404, b'{"error":"Not Found"}')
METHOD_NOT_ALLOWED = Reply(405, b'{"error":"Method Not Allowed"}')


def not_utf8() -> ServeError:
    return invalid_arg("the request path is not valid UTF-8")


class HttpRequest:
    """One request as a transport read it: method, path (as sent: percent-encoded, without the
    query), headers (lower-case names, bytes) and the body as sent (``body()`` undoes its
    Content-Encoding). ``sent_headers``: the headers with their names as the client spelled them,
    which forwarded headers are named by (HttpHandlers.forwarding); None where the transport did
    not keep them (the lower-case names are used)."""

    __slots__ = ("method", "path", "headers", "raw", "sent_headers")

    def __init__(self, method: str, path: str, headers: list, raw: bytes, sent_headers: list | None = None):
        self.method = method
        self.path = path
        self.headers = headers
        self.raw = raw
        self.sent_headers = sent_headers


class InferCall:
    """One inference request between its decoding and its reply. ``cancel()``: the client went
    away (the request is dropped if it has not run)."""

    __slots__ = ("request", "refuse")

    def __init__(self, request, refuse: Callable[[Exception], None]):
        self.request = request
        self.refuse = refuse  # answers the request with the error it was refused with

    def cancel(self) -> None:
        self.request.cancel()


def path_segments(path: str) -> list[str]:
    """The segments of a request path as sent, each percent-decoded on its own (so ``%2F`` stays
    inside its segment, where a model name check refuses it); a segment that is not UTF-8, raw
    or percent-encoded, is refused (400)."""
    parts = path.strip("/").split("/")
    if "%" not in path and path.isascii():
        return parts
    try:
        return [unquote_to_bytes(part).decode("utf-8") if "%" in part else part for part in parts]
    except UnicodeDecodeError:
        raise invalid_arg(f"the request path {path!r} is not valid UTF-8 once percent-decoded") from None


def inference_target(method: str, path: str) -> tuple[str, str, str] | None:
    """(action, model, version) when ``path`` is ``/v2/models/NAME[/versions/N]/ACTION`` for an
    action that runs the model (infer, generate, generate_stream) and the method POST: the routes
    a transport asks about first (inference starts without a coroutine). A path that does not
    decode is left to ``handle``, which refuses it."""
    if method != "POST":
        return None
    action = path.rpartition("/")[2]
    if action not in INFERENCE_ACTIONS:
        return None
    try:
        parts = path_segments(path)
    except ServeError:
        return None
    if parts[:2] != ["v2", "models"] or not parts[2]:
        return None
    if len(parts) == 4:
        return action, parts[2], ""
    if len(parts) == 6 and parts[3] == "versions" and parts[4].isdigit():
        return action, parts[2], parts[4]
    return None


# The --http-restricted-api category of a model route's action (tritonserver's http_server.cc).
MODEL_ACTION_CATEGORY = {"": restricted.METADATA, "ready": restricted.HEALTH, "config": restricted.MODEL_CONFIG,
                         "stats": restricted.STATISTICS, "infer": restricted.INFERENCE, "trace": restricted.TRACE,
                         "generate": restricted.INFERENCE, "generate_stream": restricted.INFERENCE}
TOP_CATEGORY = {"health": restricted.HEALTH, "repository": restricted.MODEL_REPOSITORY,
                "logging": restricted.LOGGING, "systemsharedmemory": restricted.SHARED_MEMORY,
                "cudasharedmemory": restricted.SHARED_MEMORY, "trace": restricted.TRACE}


def api_category(parts: list[str]) -> str:
    """The restricted-API category of a request path's segments; "" for a path in none (which
    ends as 404)."""
    if parts[:1] != ["v2"]:
        return ""
    if len(parts) == 1:
        return restricted.METADATA
    if parts[1] != "models":
        return TOP_CATEGORY.get(parts[1], "")
    tail = parts[3:]
    if parts[2:] == ["stats"]:
        return restricted.STATISTICS
    if len(tail) >= 2 and tail[0] == "versions":
        tail = tail[2:]
    return MODEL_ACTION_CATEGORY.get(tail[0] if tail else "", "")


class HttpHandlers:
    """Every endpoint, for any transport (native.py, the C++ one over libevent, and asgi.py,
    uvicorn): every endpoint through ``handle``, inference (the route a transport asks
    ``inference_target`` about first) through ``begin`` and ``submit_infer``. ``forwarding``:
    the headers of an inference request that become its parameters
    (``--http-header-forward-pattern``), None for none; transports keep the headers' names as
    sent (``HttpRequest.sent_headers``) only where it is set. ``restrictions``: the APIs that need
    a header (``--http-restricted-api``), checked before anything else of a request."""

    def __init__(self, server: InferenceServer, max_input_size: int = 1 << 26,
                 forwarding: HeaderForwarding | None = None, restrictions: Restrictions | None = None):
        self.server = server
        self.max_input_size = max_input_size
        self.forwarding = forwarding
        self.restrictions = restrictions if restrictions else None

    def refusal(self, category: str, request: HttpRequest) -> Reply | None:
        """403 when ``request`` lacks the header ``category`` is restricted to, else None."""
        if self.restrictions is None:
            return None
        message = self.restrictions.refusal(category, request.headers)
        return None if message is None else Reply(403, error_body(message))

    # ---- the reply writer ----------------------------------------------------------------------
    @staticmethod
    def _deliver(reply: Reply, request_headers: list, answer: Answer, trace=None) -> None:
        """``reply`` in its wire form (compressed where it may be and the client accepts it) to
        ``answer``; a traced request's trace ends once the transport has taken the reply."""
        headers, body = wire_form(reply, request_headers)
        if trace is None:
            answer(reply.status, headers, body)
            return
        trace.capture("HTTP_SEND_START")
        answer(reply.status, headers, body)
        trace.capture("HTTP_SEND_END")
        trace.finish()

    # ---- bodies --------------------------------------------------------------------------------
    def body(self, request: HttpRequest) -> bytes:
        """The request's body, undone of its ``Content-Encoding``."""
        return self.decoded_body(request.headers, request.raw)

    def decoded_body(self, headers: list, body: bytes) -> bytes:
        """``body`` as sent, undone of its ``Content-Encoding``."""
        if len(body) > self.max_input_size:
            raise too_large(self.max_input_size, len(body))
        encoding = header_value(headers, b"content-encoding")
        if encoding and encoding not in (b"identity",):
            body = _decompress(body, encoding, self.max_input_size)
        return body

    # ---- inference -----------------------------------------------------------------------------
    def begin(self, action: str, model: str, version: str, request: HttpRequest, answer: Answer) -> InferCall | None:
        """``begin_infer`` or ``begin_generate``, for an ``inference_target``'s action."""
        if action == "infer":
            return self.begin_infer(model, version, request, answer)
        return self.begin_generate(model, version, request, GENERATE_ACTIONS[action], answer)

    def _inference_refused(self, request: HttpRequest, answer: Answer) -> bool:
        """Whether --http-restricted-api keeps this request from inference (then it is answered)."""
        if self.restrictions is None:
            return False
        refused = self.refusal(restricted.INFERENCE, request)
        if refused is not None:
            self._deliver(refused, request.headers, answer)
        return refused is not None

    def begin_generate(self, model: str, version: str, request: HttpRequest, streaming: bool,
                       answer: Answer) -> InferCall | None:
        """Decode a generate request (generate.py); as ``begin_infer``, except that for
        ``streaming`` the reply's body is a ChunkedBody the transport writes as it fills."""
        if self._inference_refused(request, answer):
            return None
        traces = self.server.traces
        trace = traces.sample(model) if traces.enabled else None
        path, headers = request.path, request.headers
        try:
            if trace is not None:
                trace.capture("HTTP_RECV_START")
                trace.capture("HTTP_RECV_END")
            if len(request.raw) > self.max_input_size:
                raise too_large(self.max_input_size, len(request.raw))
            infer = decode_generate(self.server, model, version, header_value(headers, b"content-encoding"),
                                    request.raw)
        except Exception as exc:
            self._deliver(failure_reply(exc, path), headers, answer, trace)
            return None
        infer.trace = trace

        def finished() -> None:  # the reply's last part is with the transport
            if trace is not None:
                trace.capture("HTTP_SEND_START")
                trace.capture("HTTP_SEND_END")
                trace.finish()

        reply = GenerateReply(streaming, answer, finished)
        infer.stream = reply.on_response
        infer.complete = lambda response, error: reply.on_response(response, error, True)
        return InferCall(infer, lambda exc: self._deliver(failure_reply(exc, path), headers, answer, trace))

    def begin_infer(self, model: str, version: str, request: HttpRequest, answer: Answer) -> InferCall | None:
        """Decode an inference request. ``answer(status, headers, body)`` runs once: at once when
        the request is refused (then None is returned), else from the thread that finishes it,
        after ``submit_infer``. Between the two the transport may note the call as open."""
        if self._inference_refused(request, answer):
            return None
        traces = self.server.traces
        trace = traces.sample(model) if traces.enabled else None
        try:
            if trace is not None:
                trace.capture("HTTP_RECV_START")
            body = self.body(request)
            if trace is not None:
                trace.capture("HTTP_RECV_END")
            infer, options = self.infer_request(model, version, request.headers, body, trace)
            if self.forwarding is not None:  # after the body's parameters, which a header of the same name replaces
                sent = request.sent_headers
                infer.parameters.update(self.forwarding.parameters(request.headers if sent is None else sent))
        except Exception as exc:
            self._deliver(failure_reply(exc, request.path), request.headers, answer, trace)
            return None
        path, headers = request.path, request.headers

        def complete(response, error) -> None:
            if error is not None:
                reply = failure_reply(error, path)
            else:
                try:
                    reply = infer_reply(response, infer, options, trace)
                except Exception as exc:  # an output that does not fit its shared-memory region, or a bug
                    reply = failure_reply(exc, path)
            infer.release_shm()  # its outputs are written: a region unregistered meanwhile goes before the answer
            self._deliver(reply, headers, answer, trace)

        infer.complete = complete
        return InferCall(infer, lambda exc: self._deliver(failure_reply(exc, path), headers, answer, trace))

    def submit_infer(self, call: InferCall) -> None:
        """Queue the decoded request; a refusal is answered at once."""
        try:
            self.server.submit(call.request, "HTTP end point")
        except Exception as exc:
            call.refuse(exc)

    def infer_request(self, name: str, version: str, headers: list, body: bytes, trace):
        """The InferRequest (and output options) of an infer call's decoded body."""
        check_model_name(name)
        header = header_value(headers, b"inference-header-content-length")
        header_length = len(body) if header is None else inference_header_length(header, len(body))
        if header_length == 0:
            request, options = decode_raw_request(body, self.server.manager.get(name, version), version)
        else:
            request, options = decode_request(body, None if header is None else header_length, name, version,
                                              self.server.shm)
        request.trace = trace
        return request, options

    # ---- every other endpoint ------------------------------------------------------------------
    def refuse(self, request: HttpRequest, error: ServeError, answer: Answer) -> None:
        """Answer a request the transport could not read whole (``error``)."""
        self._deliver(failure_reply(error, request.path), request.headers, answer)

    async def handle(self, request: HttpRequest, answer: Answer) -> None:
        """Answer any request but an inference one (``inference_target``)."""
        try:
            reply = await self.route(request)
        except Exception as exc:
            reply = failure_reply(exc, request.path)
        self._deliver(reply, request.headers, answer)

    async def route(self, request: HttpRequest) -> Reply:
        method = request.method
        if request.path.endswith("/") and request.path != "/":  # Triton's routes match whole paths
            return NOT_FOUND
        parts = path_segments(request.path)
        if self.restrictions is not None:
            refused = self.refusal(api_category(parts), request)
            if refused is not None:
                return refused
        if not parts or parts[0] != "v2":
            return NOT_FOUND
        rest = parts[1:]
        if not rest:
            return self.get_only(method) or json_reply(self.server.metadata())
        head = rest[0]
        if head == "health" and len(rest) == 2 and rest[1] in ("live", "ready"):
            if method != "GET":
                return METHOD_NOT_ALLOWED
            ok = self.server.live if rest[1] == "live" else self.server.ready()
            return Reply(200 if ok else 400)
        if head == "models":
            return await self.models(method, rest[1:], request)
        if head == "repository":
            return await self.repository(method, rest[1:], request)
        if head == "logging" and len(rest) == 1:
            return await self.logging(method, request)
        if head in ("systemsharedmemory", "cudasharedmemory"):
            return await self.shared_memory(SYSTEM if head[0] == "s" else CUDA, method, rest[1:], request)
        if rest == ["trace", "setting"]:
            return await self.trace_setting(method, "", request)
        return NOT_FOUND

    @staticmethod
    def get_only(method: str) -> Reply | None:
        return None if method == "GET" else METHOD_NOT_ALLOWED

    async def models(self, method: str, rest: list[str], request: HttpRequest) -> Reply:
        if rest == ["stats"]:
            return self.get_only(method) or json_reply(self.server.statistics())
        if not rest or not rest[0]:
            return NOT_FOUND
        name, version, action = rest[0], "", ""
        tail = rest[1:]
        if len(tail) >= 2 and tail[0] == "versions":
            version, tail = tail[1], tail[2:]
            if not version.isdigit():
                return NOT_FOUND
        if tail == ["trace", "setting"]:  # global or per model; a version has none (404, as in Triton)
            return NOT_FOUND if version else await self.trace_setting(method, name, request)
        if len(tail) > 1:
            return NOT_FOUND
        action = tail[0] if tail else ""
        if action not in MODEL_ACTIONS:  # an unknown route is 404 whatever the method, as in Triton
            return NOT_FOUND
        server = self.server
        if action in INFERENCE_ACTIONS:  # a POST never comes here (inference_target)
            return METHOD_NOT_ALLOWED
        if method != "GET":
            return METHOD_NOT_ALLOWED
        if action == "":
            return json_reply(server.model_metadata(name, version))
        if action == "ready":  # off the loop: a Python model's own is_ready() may take seconds
            ready = await asyncio.get_running_loop().run_in_executor(None, server.manager.is_ready, name, version)
            return Reply(200) if ready else Reply(400, error_body("Model version not ready"))
        if action == "config":
            return json_reply(server.model_config_json(name, version))
        if action == "stats":
            return json_reply(server.statistics(name, version))
        raise AssertionError(action)

    async def repository(self, method: str, rest: list[str], request: HttpRequest) -> Reply:
        control = len(rest) in (3, 4) and rest[-3] == "models" and rest[-1] in ("load", "unload")
        known = rest == ["index"] or (len(rest) == 2 and rest[1] == "index") or control
        if not known:
            return NOT_FOUND
        if method != "POST":
            return METHOD_NOT_ALLOWED
        if rest == ["index"]:
            body = self.body(request)
            ready = bool(parse_json(body).get("ready", False)) if body.strip() else False
            return json_reply(self.server.manager.index(ready_only=ready))
        if len(rest) in (2, 4):  # /v2/repository/{repository}/...: Triton serves one repository
            return error_reply(ServeError(Status.UNSUPPORTED, "'repository_name' specification is not supported"))
        body = self.body(request)
        params = parse_json(body).get("parameters") if body.strip() else None
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise invalid_arg(f"failed to {rest[2]} '{rest[1]}': 'parameters' must be a JSON object")
        await self.repository_action(rest[2], rest[1], params)
        return Reply(200)

    async def repository_action(self, action: str, name: str, params: dict) -> None:
        manager = self.server.manager
        loop = asyncio.get_running_loop()
        if action == "load":  # file contents come as base64 text in JSON
            params = override_files.decode_base64_files(name, params)
            await loop.run_in_executor(None, manager.load_from_api, name, params)
        else:
            await loop.run_in_executor(None, manager.unload_from_api, name)

    async def shared_memory(self, kind: str, method: str, rest: list[str], request: HttpRequest) -> Reply:
        """``v2/{system,cuda}sharedmemory[/region/NAME]/{status,register,unregister}``."""
        if len(rest) == 3 and rest[0] == "region" and rest[1]:
            name, action = rest[1], rest[2]
        elif len(rest) == 1:
            name, action = "", rest[0]
        else:
            return NOT_FOUND
        if action not in ("status", "register", "unregister"):
            return NOT_FOUND
        if method != ("GET" if action == "status" else "POST"):
            return METHOD_NOT_ALLOWED
        shm = self.server.shm
        if action == "status":
            return json_reply(shm.status(kind, name))
        if action == "unregister":
            shm.unregister(kind, name)
        else:
            shm_requests.check_name(kind, name)
            body = parse_json(self.body(request))
            shm_requests.check_cuda(shm, kind, name)
            shm_requests.register(shm, kind, name, body)
        return Reply(200)

    async def trace_setting(self, method: str, model: str, request: HttpRequest) -> Reply:
        """``v2[/models/MODEL]/trace/setting``: GET the settings, POST changes (null clears one)."""
        if method not in ("GET", "POST"):
            return METHOD_NOT_ALLOWED
        settings = self.server.trace_setting(model)  # an unknown model is refused before the body is read
        if method == "POST":
            settings = self.server.trace_setting(model, http_update(parse_json_value(self.body(request))))
        return json_reply(settings)

    async def logging(self, method: str, request: HttpRequest) -> Reply:
        settings = self.server.log_settings
        if method == "POST":
            body = self.body(request)
            return json_reply(settings.update(log_changes(parse_json(body) if body.strip() else {})))
        if method != "GET":
            return METHOD_NOT_ALLOWED
        return json_reply(settings.values)


def infer_reply(response, request, options, trace) -> Reply:
    parts, header_length = encode_response(response, request, options)
    if trace is not None:
        trace.capture("INFER_RESPONSE_COMPLETE")
        trace.record_tensors("TENSOR_BACKEND_OUTPUT", response.outputs)
    if header_length is None:
        return Reply(200, parts, JSON, compressible=True)
    headers = [(b"content-type", OCTET), (b"inference-header-content-length", str(header_length).encode())]
    return Reply(200, parts, headers, compressible=True)


def failure_reply(exc: Exception, path=None) -> Reply:
    """The reply to a request that raised: Triton's status and ``{"error": ...}`` for a ServeError."""
    if isinstance(exc, ServeError):
        reply = error_reply(exc)
        if exc.message == "Unsupported compression type":
            reply.headers = [*reply.headers, (b"accept-encoding", b"gzip, deflate")]
        return reply
    log.error("unhandled error for %s", path, exc_info=exc)  # one request never takes the server down
    return Reply(500, error_body(f"internal server error: {exc}"))


def wire_form(reply: Reply, request_headers: list) -> tuple[list, bytes | list]:
    """The reply's headers and body as sent (bytes, or a list of buffers sent one after the
    other), compressed when it may be and the client accepts it."""
    body = reply.body
    headers = list(reply.headers)
    encoding = _accepted_encoding(request_headers) if body and reply.compressible else None
    if encoding:
        data = b"".join(body) if isinstance(body, list) else body
        body = gzip.compress(data, 1) if encoding == b"gzip" else zlib.compress(data, 1)
        headers.append((b"content-encoding", encoding))
    return headers, body


LEADING_INTEGER = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)")


def inference_header_length(value: bytes, body_size: int) -> int:
    """Inference-Header-Content-Length read as Triton reads it (C's atoi: leading blanks, a sign and
    digits, the rest ignored, no digits read as 0, then taken as a C int), refused when it is
    negative or more than the body holds."""
    match = LEADING_INTEGER.match(value)
    number = int(match.group(1)) if match else 0
    number = max(-(1 << 63), min(number, (1 << 63) - 1))  # strtol's saturation
    number = (number + (1 << 31)) % (1 << 32) - (1 << 31)
    if number < 0 or number > body_size:
        raise invalid_arg(f"inference header size should be in range (0, {body_size}), got: "
                          f"{value.decode('latin-1')}")
    return number


def header_value(headers: list, name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def _accepted_encoding(headers: list) -> bytes | None:
    """The reply's encoding as Triton picks it from Accept-Encoding: of identity, deflate and
    gzip, the one of the highest weight above 0 (the first of equal weights); None for identity."""
    accept = header_value(headers, b"accept-encoding")
    if not accept:
        return None
    best, best_weight = b"identity", 0.0
    for item in accept.split(b","):
        kind, weight = _weighted_encoding(item)
        if kind in (b"identity", b"deflate", b"gzip") and weight > best_weight:
            best, best_weight = kind, weight
    return None if best == b"identity" else best


LEADING_FLOAT = re.compile(rb"[ \t\n\v\f\r]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _weighted_encoding(item: bytes) -> tuple[bytes, float]:
    """(encoding, q) of one Accept-Encoding entry, split as Triton splits it (at ';q='); an entry
    it cannot read has weight 0."""
    kind, separator, weight = item.lstrip(b" ").partition(b";q=")
    if not separator:
        return kind, 1.0
    match = LEADING_FLOAT.match(weight)
    return (kind, float(match.group(0))) if kind and match else (b"", 0.0)


def _decompress(body: bytes, encoding: bytes, limit: int) -> bytes:
    if encoding == b"gzip":
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == b"deflate":
        decompressor = zlib.decompressobj()
    else:
        raise ServeError(Status.UNSUPPORTED, "Unsupported compression type")
    if not body:
        raise invalid_arg("nothing to be decompressed")
    try:
        data = decompressor.decompress(body, limit + 1)
    except zlib.error as exc:
        raise invalid_arg(f"failed to decompress the request body ({encoding.decode()}): {exc}") from None
    if len(data) > limit:
        raise too_large(limit)
    return data


def too_large(limit: int, size: int | None = None) -> ServeError:
    """Triton's refusal of a body over ``--http-max-input-size``; ``size``: the body's, where known."""
    what = f"Request body size of {size} bytes" if size is not None else "Request body"
    return invalid_arg(f"{what} exceeds the maximum allowed value of {limit} bytes. Use --http-max-input-size to "
                       "increase the limit")
