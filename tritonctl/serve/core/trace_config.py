"""Trace settings as they arrive: tritonserver's ``--trace-config`` options at startup, and the
updates of Triton's trace extension (serving_protocol.md A.1 row 13, A.2 TraceSetting) over
HTTP and gRPC, checked with Triton's texts. ``trace.py`` applies them."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from tritonctl.serve.core.errors import ServeError, Status, invalid_arg

OFF, TIMESTAMPS, TENSORS = 0, 1, 2  # level bits
LEVEL_NAMES = (("TIMESTAMPS", TIMESTAMPS), ("TENSORS", TENSORS))
FIELDS = ("level", "rate", "count", "log_frequency")
MIN_COUNT, INT32_MAX, UINT32_MAX = -1, 2**31 - 1, 2**32 - 1
CLEAR = object()  # an update value that clears a field: back to the level above


class TraceConfigError(ValueError):
    """A bad ``--trace-config`` value."""


@dataclass(frozen=True)
class TraceConfig:
    """The startup trace settings, Triton's defaults."""

    level: int = OFF
    rate: int = 1000
    count: int = -1
    log_frequency: int = 0
    file: str = ""


def parse_trace_config(values: list[str]) -> TraceConfig:
    """tritonserver's ``--trace-config [MODE,]SETTING=VALUE`` options: global ``level``,
    ``rate``, ``count``, ``mode``; ``triton,file=`` and ``triton,log-frequency=``."""
    config = TraceConfig()
    levels: list[int] = []
    for arg in values:
        mode, setting, value = _split_config(arg)
        if mode == "opentelemetry" or (not mode and setting == "mode" and value.lower() == "opentelemetry"):
            raise TraceConfigError("--trace-config: the opentelemetry trace mode is not supported by tritonctl serve; "
                                   "use the triton mode (the default), which writes Triton's trace file")
        where = f"{mode}," if mode else ""
        try:
            if not mode and setting == "level":
                levels.append(_parse_level_option(value))
            elif not mode and setting == "rate":
                config = replace(config, rate=_parse_int(value, 0, UINT32_MAX))
            elif not mode and setting == "count":
                config = replace(config, count=_parse_int(value, MIN_COUNT, INT32_MAX))
            elif not mode and setting == "mode":
                if value.lower() != "triton":
                    raise TraceConfigError(f"invalid value for trace mode option: {value}. Available options are "
                                           "\"triton\" and \"opentelemetry\"")
            elif mode and setting == "file":
                config = replace(config, file=value)
            elif mode and setting == "log-frequency":
                config = replace(config, log_frequency=_parse_int(value, 0, UINT32_MAX))
            else:
                raise TraceConfigError(f"unknown setting '{setting}'. Global settings are level, rate, count and mode "
                                       "(--trace-config level=TIMESTAMPS); triton settings are file and log-frequency "
                                       "(--trace-config triton,file=trace.json)")
        except TraceConfigError as exc:
            raise TraceConfigError(f"Bad option: \"--trace-config {where}{setting}\": {exc}") from None
    level = OFF
    for bits in levels:  # repeatable and combined, as in Triton: "off" adds nothing to another level
        level |= bits
    config = replace(config, level=level)
    if config.file and not Path(config.file).parent.is_dir():
        raise TraceConfigError(f"--trace-config triton,file={config.file}: the directory "
                               f"{Path(config.file).parent} does not exist")
    if config.level != OFF and not config.file:
        raise TraceConfigError("--trace-config level=... needs a trace file: add --trace-config triton,file=PATH")
    if config.level != OFF and config.rate == 0:
        raise TraceConfigError("--trace-config rate=0 samples no request: use rate=1 to trace every request, "
                               "rate=N for every N-th")
    return config


def _split_config(arg: str) -> tuple[str, str, str]:
    """Triton's ParseTraceConfigOption: ``mode,setting=value`` or ``setting=value``."""
    comma = arg.find(",")
    equals = arg.find("=", comma + 1)
    if comma == 0:
        raise TraceConfigError("No trace mode specified. --trace-config option format is <trace mode>,<setting>=<value> "
                               f"or <setting>=<value>. Got {arg}")
    mode = ""
    if comma > 0:
        mode = arg[:comma].lower()
        if mode not in ("triton", "opentelemetry"):
            raise TraceConfigError(f"invalid value for trace mode option: {arg[:comma]}. Available options are "
                                   "\"triton\" and \"opentelemetry\"")
    setting, value = arg[comma + 1:equals], arg[equals + 1:]
    if equals < 0 or not setting or not value:
        raise TraceConfigError(f"--trace-config option format is '<trace mode>,<setting>=<value>'. Got {arg}")
    return mode, setting, value


def _parse_level_option(value: str) -> int:
    lowered = value.lower()
    if lowered in ("false", "off"):
        return OFF
    if lowered in ("true", "on", "min", "max", "timestamps"):
        return TIMESTAMPS
    if lowered == "tensors":
        return TENSORS
    raise TraceConfigError(f"invalid value for trace level option: {value}")


def _parse_int(value: str, low: int, high: int) -> int:
    """Triton's reading (a C int, in its words), then this server's range: a negative rate or log
    frequency, or a count under -1, is refused where Triton wraps it around or keeps it."""
    try:
        number = int(value)
    except ValueError:
        raise TraceConfigError(f"Invalid option value. Got {value}") from None
    if not -INT32_MAX - 1 <= number <= INT32_MAX:
        raise TraceConfigError(f"Provided option value is out of bound. Got {value}")
    if not low <= number <= high:
        raise TraceConfigError(f"value must be in [ {low}, {high} ], got {number}")
    return number


# ---- setting updates from the protocol ------------------------------------------------------------
SETTING_FIELDS = {"trace_rate": "rate", "trace_count": "count", "log_frequency": "log_frequency"}
KNOWN_SETTINGS = ("trace_file", "trace_level", *SETTING_FIELDS)
_STOI = re.compile(r"\s*[+-]?\d+")  # what std::stoi reads


def http_update(doc) -> dict:
    """A POST ``trace/setting`` body as ``TraceManager.update`` changes. The fields are read in
    Triton's order (trace_file, trace_level, trace_rate, trace_count, log_frequency, whatever
    order the body has) with its checks and texts: a value of the wrong JSON type gets Triton's "attempt to access JSON
    non-... as ...", with 400 where Triton says 500 (a client's fault is never a 5xx here). What Triton ignores (an unknown key or level name, a
    negative rate or log frequency) is refused here, but only after Triton's own checks passed."""
    if not isinstance(doc, dict):  # Triton takes it as no change
        raise invalid_arg("failed to parse the request JSON buffer: the request must be a JSON object")
    changes: dict = {}
    refusals: list[ServeError] = []
    if "trace_file" in doc:
        raise _file_fixed()
    if "trace_level" in doc:
        value = doc["trace_level"]
        if value is None:
            changes["level"] = CLEAR
        elif not isinstance(value, list):
            raise invalid_arg("attempt to access JSON non-array as array")
        elif value:
            changes["level"] = _parse_levels(value, refusals, http=True)
    for key, field in SETTING_FIELDS.items():
        if key not in doc:
            continue
        value = doc[key]
        if value is None:
            changes[field] = CLEAR
        elif not isinstance(value, str):
            raise invalid_arg("attempt to access JSON non-string as string")
        else:
            changes[field] = _parse_number(key, value, refusals, grpc=False)
    refusals += [_unknown_setting(key) for key in doc if key not in KNOWN_SETTINGS]
    if refusals:
        raise refusals[0]
    return changes


def grpc_update(settings) -> dict:
    """A TraceSettingRequest's ``settings`` map as ``TraceManager.update`` changes: an empty
    value list clears a field. The fields are read in Triton's order, as over HTTP."""
    changes: dict = {}
    refusals: list[ServeError] = []
    if "trace_file" in settings:
        raise _file_fixed()
    if "trace_level" in settings:
        values = list(settings["trace_level"].value)
        changes["level"] = _parse_levels(values, refusals) if values else CLEAR
    for key, field in SETTING_FIELDS.items():
        if key not in settings:
            continue
        values = list(settings[key].value)
        if len(values) > 1:
            raise invalid_arg(f"expect only 1 value for '{key}'")
        changes[field] = _parse_number(key, values[0], refusals, grpc=True) if values else CLEAR
    refusals += [_unknown_setting(key) for key in settings if key not in KNOWN_SETTINGS]
    if refusals:
        raise refusals[0]
    return changes


def _parse_levels(names: list, refusals: list, http: bool = False) -> int:
    level = OFF
    for name in names:
        if http and not isinstance(name, str):
            raise invalid_arg("attempt to access JSON non-string as string")
        if name == "OFF":
            if len(names) != 1:
                raise invalid_arg("Expect only one trace level 'OFF' is specified")
        elif name in ("TIMESTAMPS", "TENSORS"):
            level |= TIMESTAMPS if name == "TIMESTAMPS" else TENSORS
        else:  # Triton skips the name
            refusals.append(invalid_arg(f"invalid trace level '{name}'; the levels are OFF, TIMESTAMPS and TENSORS"))
    return level


def _parse_number(key: str, text: str, refusals: list, grpc: bool) -> int:
    """std::stoi's reading of ``text`` (a leading integer), then Triton's range checks; a
    negative rate or log frequency, which Triton wraps around, is refused."""
    match = _STOI.match(text)
    if match is None:
        raise invalid_arg(f"Unable to parse '{key}', got: {text}")
    number = int(match.group())
    low, high = (MIN_COUNT, INT32_MAX) if key == "trace_count" else (0, UINT32_MAX)
    out_of_range = invalid_arg(f"Unable to parse '{key}', value is out of range [ {low}, {high} ], got: {text}")
    if not -INT32_MAX - 1 <= number <= INT32_MAX:
        raise out_of_range
    if key != "trace_count" and number < 0:
        refusals.append(out_of_range)
    elif number < MIN_COUNT:
        raise invalid_arg(f"Unable to parse '{key}'. Expecting value >= {MIN_COUNT}, got:{' ' if grpc else ''}{text}")
    return number


def _file_fixed() -> ServeError:
    return ServeError(Status.UNSUPPORTED, "trace file location can not be updated through network protocol")


def _unknown_setting(key: str) -> ServeError:
    return invalid_arg(f"unknown trace setting '{key}'; the settings that can be updated are trace_level, trace_rate, "
                       "trace_count and log_frequency")
