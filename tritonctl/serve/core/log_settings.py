"""The server's log settings, Triton's logging extension (HTTP ``v2/logging``, gRPC
``LogSettings``): what they hold, which changes are taken, and what they do to the server's log.
``log_verbose_level`` above 0 lets verbose (DEBUG) records through; ``log_info``,
``log_warning`` and ``log_error`` let INFO, WARNING and ERROR records through; ``log_format``
(``default`` or ``ISO8601``) is how the log's handlers write times. Both hold for the
server's own messages and for its Python models' (``pb_utils.Logger``, stub processes included:
a stub forwards every record and the server's logger decides), at once.
"""

from __future__ import annotations

import logging

from tritonctl.serve.core.errors import ServeError, Status

SERVER_LOGGER = "tritonctl.serve"
# every logger the server writes to (children of SERVER_LOGGER: its level holds for them)
LOGGERS = (SERVER_LOGGER, "tritonctl.serve.grpc", "tritonctl.serve.http", "tritonctl.serve.python_model")
_SWITCHES = {logging.INFO: "log_info", logging.WARNING: "log_warning", logging.ERROR: "log_error"}
DATE_FORMATS = {"default": "%H:%M:%S", "ISO8601": "%Y-%m-%dT%H:%M:%SZ"}
# The settings a request may change, and the kind of value each takes ('log_file' may not be changed).
SETTABLE = {"log_info": "bool", "log_warning": "bool", "log_error": "bool", "log_verbose_level": "uint",
            "log_format": "string"}


def file_not_settable() -> ServeError:
    """Triton's answer to a request that sets ``log_file``."""
    return ServeError(Status.UNSUPPORTED, "log file location can not be updated through network protocol")


class LogSettings(logging.Filter):
    """One server's settings; a filter on the server's loggers while the server runs (``close``)."""

    def __init__(self, verbose_level: int = 0, log_format: str = "default", log_file: str = "",
                 info: bool = True, warning: bool = True, error: bool = True):
        """As tritonserver's --log-verbose, --log-format, --log-file (where the log goes; "": the
        console) and --log-info / --log-warning / --log-error."""
        super().__init__()
        self.values: dict = {"log_file": log_file, "log_info": info, "log_warning": warning, "log_error": error,
                             "log_verbose_level": verbose_level, "log_format": log_format}
        for name in LOGGERS:
            logging.getLogger(name).addFilter(self)
        self._apply_level()

    def update(self, changes: dict) -> dict:
        """Apply ``changes``, checked by the protocol's handler (``SETTABLE`` names, their kinds, a
        known log_format); the settings after them."""
        self.values.update(changes)
        self._apply_level()
        if "log_format" in changes:
            for handler in logging.getLogger().handlers:
                if handler.formatter is not None:
                    handler.formatter.datefmt = DATE_FORMATS[self.values["log_format"]]
        return dict(self.values)

    def _apply_level(self) -> None:
        logging.getLogger(SERVER_LOGGER).setLevel(logging.DEBUG if self.values["log_verbose_level"] else logging.INFO)

    def filter(self, record: logging.LogRecord) -> bool:
        switch = _SWITCHES.get(record.levelno)
        return switch is None or self.values[switch]

    def close(self) -> None:
        for name in LOGGERS:
            logging.getLogger(name).removeFilter(self)
