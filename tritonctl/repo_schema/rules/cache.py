"""Response cache and decoupled models (RC-*).

Sequence models with a response cache are the sequence rules' finding (SB-01).
"""

from __future__ import annotations

from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, Example
from tritonctl.repo_schema.rules import model_rule

CACHE_WITH_DECOUPLED = register(
    "RC01", "response cache on a decoupled model", "error",
    """
    A decoupled model may send any number of responses per request, which the response
    cache cannot store. Triton refuses the combination: "Response Cache does not
    currently support model <m> with 'decoupled' transaction policy". Disable one of
    the two.
    """, "RC-01",
    example=Example(H + IO + "model_transaction_policy { decoupled: true }\nresponse_cache { enable: true }\n"))
CACHE_NEEDS_SERVER = register(
    "RC50", "response cache needs a server-side cache", "warning",
    """
    `response_cache { enable: true }` only takes effect when tritonserver is started
    with a cache, for example `--cache-config local,size=1048576`; without one Triton
    silently serves every request uncached. tritonctl cannot see the server's flags:
    ignore this warning (--ignore RC50) when the server has a cache configured.
    """, "RC-03",
    example=Example(H + IO + "response_cache { enable: true }\n"))
DECOUPLED_CLIENTS = register(
    "RC51", "decoupled model needs streaming clients", "info",
    """
    A decoupled model (model_transaction_policy { decoupled: true }) can only be called
    through gRPC streaming (tritonclient's start_stream / async_stream_infer) or the
    generate endpoints. HTTP /infer and unary gRPC ModelInfer fail at request time:
    "ModelInfer RPC doesn't support models with decoupled transaction policy".
    """, "RC-04",
    example=Example(H + IO + "model_transaction_policy { decoupled: true }\n"))


@model_rule
def check_response_cache(ctx) -> None:
    config = ctx.config
    enabled = config.response_cache.enable
    decoupled = config.model_transaction_policy.decoupled
    if enabled and decoupled:
        ctx.report(CACHE_WITH_DECOUPLED, f"Response Cache does not currently support model {ctx.name} with "
                   "'decoupled' transaction policy. Please disable the response cache.",
                   ("response_cache", "enable"),
                   hint="remove response_cache, or set model_transaction_policy { decoupled: false }")
    elif enabled:
        ctx.report(CACHE_NEEDS_SERVER, f"model '{ctx.name}' enables the response cache, which works only when "
                   "tritonserver runs with --cache-config", ("response_cache", "enable"),
                   hint="start tritonserver with --cache-config local,size=<bytes> (or redis,...)")
    if decoupled:
        ctx.report(DECOUPLED_CLIENTS, f"model '{ctx.name}' is decoupled: clients must use gRPC streaming",
                   ("model_transaction_policy", "decoupled"),
                   hint="call it with tritonclient.grpc start_stream() / async_stream_infer()")
