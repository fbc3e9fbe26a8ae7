"""tritonserver's command line, read by ``tritonctl serve``: its spellings of the options serve has
(``--exit-on-error=false``, ``--http-address``, the deprecated ``--trace-file``, ...) are rewritten
into serve's own before the command line is parsed, so that a command copied from a tritonserver
deployment serves as written. tritonserver's tuning options that mean nothing to this server
(memory pools, thread counts, gRPC keepalive, ...) are taken and reported as without effect;
those it cannot honour (gRPC over SSL, SageMaker, Vertex AI, model namespacing) are refused.
"""

from __future__ import annotations

from typer.core import TyperCommand

from tritonctl.cli.errors import CliError

# Boolean options: tritonserver's take a value (--exit-on-error=false, --exit-on-error false);
# serve's are switches (--exit-on-error / --no-exit-on-error).
SWITCHES = ("--exit-on-error", "--strict-readiness", "--strict-model-config")
# --allow-http=false, --allow-grpc=false: that endpoint is off (its port -1)
ENDPOINTS = {"--allow-http": "--http-port=-1", "--allow-grpc": "--grpc-port=-1"}
ADDRESSES = ("--http-address", "--grpc-address", "--metrics-address")
# tritonserver's older spellings, mapped as tritonserver maps them
DEPRECATED = {
    "--response-cache-byte-size": "--cache-config=local,size={}",
    "--trace-file": "--trace-config=triton,file={}",
    "--trace-level": "--trace-config=level={}",
    "--trace-rate": "--trace-config=rate={}",
    "--trace-count": "--trace-config=count={}",
    "--trace-log-frequency": "--trace-config=triton,log-frequency={}",
}
# Options that tune what this server does not have: taken, and reported as without effect.
WITHOUT_EFFECT = (
    "--model-load-thread-count", "--model-load-retry-count", "--model-load-gpu-limit", "--enable-peer-access",
    "--reuse-http-port", "--reuse-grpc-port", "--http-thread-count", "--grpc-infer-allocation-pool-size",
    "--grpc-infer-response-compression-level", "--grpc-keepalive-time", "--grpc-keepalive-timeout",
    "--grpc-keepalive-permit-without-calls", "--grpc-http2-max-pings-without-data",
    "--grpc-http2-min-recv-ping-interval-without-data", "--grpc-http2-max-ping-strikes", "--grpc-max-connection-age",
    "--grpc-max-connection-age-grace", "--grpc-server-cert", "--grpc-server-key", "--grpc-root-cert",
    "--sagemaker-port", "--sagemaker-safe-port-range", "--sagemaker-thread-count", "--vertex-ai-port",
    "--vertex-ai-thread-count", "--vertex-ai-default-model", "--repoagent-directory", "--cache-directory",
    "--pinned-memory-pool-byte-size", "--cuda-memory-pool-byte-size", "--cuda-virtual-address-size",
    "--min-supported-compute-capability", "--buffer-manager-thread-count", "--host-policy",
)
# Boolean options this server cannot honour when true: refused then, without effect when false.
UNSUPPORTED = {
    "--grpc-use-ssl": "gRPC over SSL/TLS (put a TLS-terminating proxy in front, or use --engine triton)",
    "--grpc-use-ssl-mutual": "gRPC over mutual TLS (put a TLS-terminating proxy in front, or use --engine triton)",
    "--allow-sagemaker": "the SageMaker endpoint (use --engine triton)",
    "--allow-vertex-ai": "the Vertex AI endpoint (use --engine triton)",
    "--model-namespacing": "model namespacing (use --engine triton)",
}
NOTED = "--without-effect"  # the hidden serve option that carries what was taken without effect
_BOOL_WORDS = ("true", "on", "1", "false", "off", "0")


def parse_bool(value: str) -> bool:
    """A tritonserver boolean option's value, refused in its words."""
    if value.lower() in ("true", "on", "1"):
        return True
    if value.lower() in ("false", "off", "0"):
        return False
    raise CliError(f"invalid value for bool option: {value}", 2)


def rewrite(args: list[str]) -> list[str]:
    """``args`` with tritonserver's spellings rewritten into serve's; CliError for a value
    tritonserver refuses or an option this server cannot honour."""
    rewritten: list[str] = []
    last: list[str] = []  # appended at the end, to win over a later port or address
    addresses: dict[str, str] = {}
    pending = list(args)
    while pending:
        arg = pending.pop(0)
        name, has_value, value = arg.partition("=")
        known = (name in SWITCHES or name in ENDPOINTS or name in UNSUPPORTED or name in ADDRESSES
                 or name in DEPRECATED or name in WITHOUT_EFFECT)
        if not known:
            rewritten.append("--strict-model-config" if arg == "--disable-auto-complete-config" else arg)
            continue
        takes_bool = name in SWITCHES or name in ENDPOINTS or name in UNSUPPORTED
        if not has_value and pending and (not takes_bool or pending[0].lower() in _BOOL_WORDS):
            has_value, value = True, pending.pop(0)
        if takes_bool:
            on = not has_value or parse_bool(value)
            if name in SWITCHES:
                rewritten.append(name if on else "--no-" + name[2:])
            elif name in ENDPOINTS:
                last += [] if on else [ENDPOINTS[name]]
            elif on:
                raise CliError(f"{name}: this server does not have {UNSUPPORTED[name]}", 2)
            continue
        if not has_value:
            raise CliError(f"option '{name}' requires a value", 2)
        if name in ADDRESSES:
            addresses[name] = value
        elif name in DEPRECATED:
            rewritten.append(DEPRECATED[name].format(value))
        else:
            rewritten.append(f"{NOTED}={name}={value}")
    if len(set(addresses.values())) > 1:
        given = ", ".join(f"{name}={value}" for name, value in addresses.items())
        raise CliError(f"this server listens on one address for HTTP, gRPC and metrics (--host); got {given}", 2)
    return rewritten + [f"--host={value}" for value in list(addresses.values())[:1]] + last


class TritonserverCommandLine(TyperCommand):
    """A command that reads tritonserver's spellings of its options too (``rewrite``)."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, rewrite(args))
