"""tritonserver's ``--backend-config=[BACKEND,]SETTING=VALUE``: settings handed to backends, for
one backend or (without BACKEND) for every backend, a backend's own setting winning.

This server uses ``default-max-batch-size`` (the max_batch_size the onnxruntime backend's
auto-complete gives a model that can batch; 4 unless set; 0 leaves such models unbatched). The
other backends' settings are about Triton's own processes and memory (the Python backend's
shared-memory sizes, TensorFlow's version, ...): they are taken, and have no effect here.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_BATCH_SIZE = "default-max-batch-size"


class BackendConfigError(ValueError):
    """A ``--backend-config`` value tritonserver refuses, in its words."""


@dataclass(frozen=True)
class BackendConfig:
    settings: tuple[tuple[str, str, str], ...] = ()  # (backend, or "" for every backend; setting; value)

    def value(self, backend: str, setting: str) -> str | None:
        """``setting`` for ``backend``: its own, else the one for every backend; the last given wins."""
        own = [v for b, s, v in self.settings if b == backend and s == setting]
        every = [v for b, s, v in self.settings if b == "" and s == setting]
        return (own or every or [None])[-1]

    def unused(self) -> list[str]:
        """The settings this server does not use, as given."""
        return [f"{b + ',' if b else ''}{s}={v}" for b, s, v in self.settings
                if not (s == DEFAULT_MAX_BATCH_SIZE and b in ("", "onnxruntime"))]


def parse_backend_config(values: list[str]) -> BackendConfig:
    """Parse ``--backend-config`` values as tritonserver does; BackendConfigError when one is refused."""
    settings = []
    for text in values:
        backend, comma, rest = text.partition(",")
        if not comma:
            backend, rest = "", text
        elif not backend:
            raise BackendConfigError("No backend specified. --backend-config option format is <backend name>,"
                                     f"<setting>=<value> or <setting>=<value>. Got {text}")
        setting, equals, value = rest.partition("=")
        if not equals:
            raise BackendConfigError(f"--backend-config option format is '<backend name>,<setting>=<value>'. Got "
                                     f"{text}")
        if setting == DEFAULT_MAX_BATCH_SIZE and not (value.isdigit() and value.isascii()):
            raise BackendConfigError(f"--backend-config {text}: {DEFAULT_MAX_BATCH_SIZE} takes a non-negative "
                                     f"integer, got '{value}'")
        settings.append((backend, setting, value))
    return BackendConfig(tuple(settings))


def default_max_batch_size(config: BackendConfig, default: int) -> int:
    """The onnxruntime backend's ``default-max-batch-size`` under ``config`` (``default`` unless set)."""
    value = config.value("onnxruntime", DEFAULT_MAX_BATCH_SIZE)
    return default if value is None else int(value)
