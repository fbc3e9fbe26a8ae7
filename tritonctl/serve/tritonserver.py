"""Launch a real ``tritonserver`` with the options ``tritonctl serve`` takes, forward signals to it and
report its exit code: ``tritonctl serve --engine triton`` and ``tritonctl analyze --engine triton``
share this launcher."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# The bundled server's defaults; an option left at its default is not passed, so Triton keeps its own.
DEFAULT_HTTP_MAX_INPUT_SIZE = 1 << 26
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


class TritonserverError(Exception):
    """No usable tritonserver binary, or it could not be started."""


@dataclass
class TritonserverOptions:
    """What ``tritonctl serve`` was asked, in tritonserver's terms (a port of None turns it off)."""

    repository: Path
    host: str = "127.0.0.1"
    http_port: int | None = 8000
    grpc_port: int | None = 8001
    metrics_port: int | None = 8002
    control_mode: str = "none"
    load_models: list[str] = field(default_factory=list)
    repository_poll_secs: float = 15.0
    strict_readiness: bool = True
    exit_timeout_secs: float = 30.0
    model_config_name: str | None = None
    http_max_input_size: int = DEFAULT_HTTP_MAX_INPUT_SIZE
    cache_config: list[str] = field(default_factory=list)
    trace_config: list[str] = field(default_factory=list)
    metrics_config: list[str] = field(default_factory=list)
    http_header_forward_pattern: str | None = None  # None: the flag is not passed
    grpc_header_forward_pattern: str | None = None
    http_restricted_api: list[str] = field(default_factory=list)  # each passed as given
    grpc_restricted_protocol: list[str] = field(default_factory=list)
    log_verbose: int = 0
    log_format: str = "default"
    extra_args: list[str] = field(default_factory=list)  # passed last, as given


def find_tritonserver(binary: str | None) -> str:
    """``binary`` when it is an executable file, else ``tritonserver`` on PATH."""
    if binary:
        path = Path(binary).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise TritonserverError(f"--tritonserver {binary}: not an executable file")
        return str(path.resolve())
    found = shutil.which("tritonserver")
    if not found:
        raise TritonserverError("--engine triton needs a tritonserver binary, and none is on PATH: install Triton "
                                "(or run inside its container), give --tritonserver PATH, or leave out --engine to "
                                "use the bundled server")
    return found


def tritonserver_command(binary: str, options: TritonserverOptions) -> list[str]:
    """The tritonserver command line for ``options``."""

    def flag(name: str, value) -> str:
        if isinstance(value, bool):
            value = "true" if value else "false"
        return f"--{name}={value}"

    command = [binary, flag("model-repository", options.repository)]
    for protocol, port in (("http", options.http_port), ("grpc", options.grpc_port),
                           ("metrics", options.metrics_port)):
        if port is None:
            command.append(flag(f"allow-{protocol}", False))
        else:
            command += [flag(f"{protocol}-port", port), flag(f"{protocol}-address", options.host)]
    command += [flag("model-control-mode", options.control_mode)]
    command += [flag("load-model", name) for name in options.load_models]
    if options.control_mode == "poll":
        # tritonserver takes whole seconds; a shorter interval than asked is never silently longer.
        command.append(flag("repository-poll-secs", max(1, int(options.repository_poll_secs))))
    command += [flag("strict-readiness", options.strict_readiness),
                flag("exit-timeout-secs", max(0, round(options.exit_timeout_secs)))]
    if options.model_config_name:
        command.append(flag("model-config-name", options.model_config_name))
    if options.http_max_input_size != DEFAULT_HTTP_MAX_INPUT_SIZE:
        command.append(flag("http-max-input-size", options.http_max_input_size))
    command += [flag("cache-config", value) for value in options.cache_config]
    command += [flag("trace-config", value) for value in options.trace_config]
    command += [flag("metrics-config", value) for value in options.metrics_config]
    for protocol, pattern in (("http", options.http_header_forward_pattern),
                              ("grpc", options.grpc_header_forward_pattern)):
        if pattern is not None:
            command.append(flag(f"{protocol}-header-forward-pattern", pattern))
    command += [flag("http-restricted-api", value) for value in options.http_restricted_api]
    command += [flag("grpc-restricted-protocol", value) for value in options.grpc_restricted_protocol]
    if options.log_verbose:
        command.append(flag("log-verbose", options.log_verbose))
    if options.log_format != "default":
        command.append(flag("log-format", options.log_format))
    return command + list(options.extra_args)


def exit_status(returncode: int) -> int:
    """A shell's exit status for a child's return code: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def run_tritonserver(command: list[str]) -> int:
    """Run tritonserver in the foreground, forwarding SIGTERM, SIGINT, SIGHUP and SIGQUIT to it, until
    it exits; its exit status (128 + N when signal N ended it)."""
    try:
        process = subprocess.Popen(command)
    except OSError as exc:
        raise TritonserverError(f"cannot start {command[0]}: {exc}") from None

    def forward(signum, _frame) -> None:
        if process.poll() is None:
            process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        while True:
            try:
                return exit_status(process.wait())
            except KeyboardInterrupt:  # a handler other than ours raised it: forward and go on waiting
                forward(signal.SIGINT, None)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
