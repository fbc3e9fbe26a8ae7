"""perf_analyzer's command-line rules beyond one option's value: the deprecated load spellings
(``-t``, ``-c``, ``-d``), repeated ``--input-data``, ``-H`` headers, ``--request-parameter``,
``--trace-*`` settings, option pairs perf_analyzer refuses, and its options tritonctl perf does not
support, each refused with the reason."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from tritonctl.perf.options import PerfError, Range, parse_range, range_levels

_TLS = "TLS is not supported by tritonctl perf; measure over a plain connection (or put a proxy in front)"
UNSUPPORTED = {
    "--periodic-concurrency-range": "concurrency that grows every --request-period responses is not supported; "
                                    "measure levels with --concurrency-range and --streaming",
    "--request-period": "it belongs to --periodic-concurrency-range, which is not supported",
    "--session-concurrency": "it is for perf_analyzer's OpenAI service kind",
    "--endpoint": "it is for perf_analyzer's OpenAI service kind",
    "--num-of-sequences": "sequences are started as the load needs them, one request in flight each "
                          "(serial sequences)",
    "--schedule": "fixed schedules are not supported; replay intervals with --request-intervals",
    "--bls-composing-models": "the composing models' statistics are not reported",
    "--enable-mpi": "multi-model MPI runs are not supported; see tritonctl analyze --concurrent",
    "--triton-server-directory": "it is for perf_analyzer's C API service kind; measure a running server",
    "--model-repository": "it is for perf_analyzer's C API service kind; measure a running server",
    "--version": "this is tritonctl perf; see tritonctl --help",
    **{flag: "server metrics (GPU utilization, power, memory) are not collected; read the server's metrics "
             "endpoint (Triton's :8002/metrics)" for flag in ("--collect-metrics", "--metrics-url",
                                                              "--metrics-interval")},
    **{f"--ssl-{name}": _TLS for name in (
        "grpc-use-ssl", "grpc-root-certifications-file", "grpc-private-key-file", "grpc-certificate-chain-file",
        "https-verify-peer", "https-verify-host", "https-ca-certificates-file", "https-client-certificate-file",
        "https-client-certificate-type", "https-private-key-file", "https-private-key-type")},
}
SERVICE_KINDS = ("triton", "openai", "tfserving", "torchserve", "triton_c_api")
TRACE_LEVELS = ("OFF", "TIMESTAMPS", "TENSORS")
PARAMETER_TYPES = ("bool", "int", "string")


def refuse_extra_args(args: list[str], known: list[str]) -> None:
    """Arguments left over by the parser: a perf_analyzer option refused with its reason, else unknown."""
    for arg in args:
        if not arg.startswith("-"):
            raise PerfError(f"unexpected argument {arg!r}")
        name = arg.split("=", 1)[0]
        if name in UNSUPPORTED:
            raise PerfError(f"perf_analyzer's {name} is not supported: {UNSUPPORTED[name]}")
        close = difflib.get_close_matches(name, known, n=1)
        raise PerfError(f"no such option: {name}" + (f" (did you mean {close[0]}?)" if close else ""))


@dataclass(frozen=True)
class Load:
    """One kind of load as PerfOptions takes it."""

    concurrency: tuple[int, ...] = ()
    request_rates: tuple[float, ...] = ()
    search_range: Range | None = None


def load_from_flags(concurrency_range: str | None, request_rate_range: str | None, intervals: bool,
                    threads: int | None, max_concurrency: int | None, dynamic: bool, binary_search: bool) -> Load:
    """The load of perf_analyzer's flags: one of the ranges, the deprecated ``-t`` (with ``-d``: from
    ``-t`` up to ``-c``, 0 for no end) or a trace; concurrency 1 without any."""
    old = threads is not None or max_concurrency is not None or dynamic
    given = [flag for flag, value in (("--concurrency-range", concurrency_range),
                                      ("--request-rate-range", request_rate_range),
                                      ("--request-intervals", intervals)) if value]
    if len(given) > 1:
        raise PerfError("Cannot specify more than one inference load mode: give only one of "
                        + ", ".join(given))
    if old and given:
        raise PerfError(f"Cannot use the deprecated options -t, -c and -d with {given[0]}")
    if intervals:
        return Load()
    if request_rate_range:
        return _load(parse_range(request_rate_range, "--request-rate-range", False, open_end=True), False,
                     binary_search, "--request-rate-range")
    if old:
        start = 1 if threads is None else threads
        if start < 1:
            raise PerfError("-t: The start of the search range must be > 0")
        end = (max_concurrency or 0) if dynamic else start
        if end and end < start:
            raise PerfError(f"-c {end}: the maximum concurrency is below -t {start}")
        return _load(Range(start, end, 1), True, binary_search)
    return _load(parse_range(concurrency_range or "1", "--concurrency-range", True, open_end=True), True,
                 binary_search, "--concurrency-range")


def _load(value: Range, whole: bool, binary_search: bool, flag: str = "-d") -> Load:
    searched = binary_search or value.open
    levels = (value.start,) if searched else range_levels(value, flag)
    if whole:
        return Load(concurrency=tuple(int(v) for v in levels), search_range=value if searched else None)
    return Load(request_rates=levels, search_range=value if searched else None)


def input_data_from_flags(values: list[str], zero: bool) -> tuple[str, tuple[str, ...]]:
    """``--input-data`` (repeatable), ``--data-directory`` and ``-z`` -> (input_data, extra JSON files)."""
    paths = [v for v in values if v not in ("random", "zero")]
    for value in paths:
        if not Path(value).exists():
            raise PerfError(f"--input-data {value!r}: Unsupported type provided. The available options are "
                            "'zero', 'random', the path of a directory, or a JSON file")
    if (zero or "zero" in values) and paths:
        raise PerfError("-z (--input-data zero) cannot be combined with input data files")
    if paths:
        return paths[0], tuple(paths[1:])
    return ("zero" if zero or "zero" in values else "random"), ()


def parse_headers(values: list[str]) -> dict[str, str]:
    """``-H 'Name:Value'`` (repeatable): the value is everything after the first colon."""
    headers: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition(":")
        if not sep or not name.strip():
            raise PerfError(f"-H {value!r}: the header must be given as 'Header:Value'")
        headers[name.strip()] = rest.strip()
    return headers


def parse_request_parameters(values: list[str]) -> dict[str, object]:
    """``--request-parameter name:value:type`` (type bool, int or string) -> {name: value}."""
    parameters: dict[str, object] = {}
    for value in values:
        parts = value.split(":")
        if len(parts) != 3 or not parts[0]:
            raise PerfError(f"--request-parameter {value!r}: The value does not match <name:value:type>")
        name, text, kind = parts[0], parts[1], parts[2].lower()
        if kind == "bool" and text.lower() in ("true", "false"):
            parameters[name] = text.lower() == "true"
        elif kind == "int" and text.lstrip("-").isdigit():
            parameters[name] = int(text)
        elif kind == "string":
            parameters[name] = text
        else:
            raise PerfError(f"--request-parameter {value!r}: the type is one of {', '.join(PARAMETER_TYPES)} "
                            "and the value must be of that type (true/false for bool)")
    return parameters


def trace_settings(levels: list[str], rate: str | None, count: str | None, log_frequency: str | None) -> dict:
    """Triton's trace settings for ``--trace-level`` (repeatable), ``--trace-rate``, ``--trace-count`` and
    ``--log-frequency``; empty when none is given."""
    settings: dict[str, object] = {}
    for level in levels:
        if level not in TRACE_LEVELS:
            raise PerfError(f"--trace-level {level!r}: Unsupported type provided. The available options are "
                            + ", ".join(TRACE_LEVELS))
    if levels:
        settings["trace_level"] = list(dict.fromkeys(levels))
    for flag, key, value, least in (("--trace-rate", "trace_rate", rate, 1),
                                    ("--trace-count", "trace_count", count, -1),
                                    ("--log-frequency", "log_frequency", log_frequency, 0)):
        if value is None:
            continue
        try:
            number = int(value)
        except ValueError:
            raise PerfError(f"{flag} {value!r}: Invalid value provided, expected a whole number") from None
        if number < least:
            raise PerfError(f"{flag} {value!r}: the value must be >= {least}")
        settings[key] = str(number)
    return settings
