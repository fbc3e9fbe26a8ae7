"""tritonserver's ``--metrics-config KEY=VALUE`` settings: which latency metrics are published."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_QUANTILES = ((0.5, 0.05), (0.9, 0.01), (0.95, 0.001), (0.99, 0.001), (0.999, 0.0001))
BOOLEAN_KEYS = ("counter_latencies", "summary_latencies", "histogram_latencies")
KEYS = (*BOOLEAN_KEYS, "summary_quantiles")
TRUE_WORDS = ("true", "on", "1")
FALSE_WORDS = ("false", "off", "0")


class MetricsConfigError(ValueError):
    """A --metrics-config value tritonctl cannot use."""


@dataclass(frozen=True)
class MetricsConfig:
    counter_latencies: bool = True
    summary_latencies: bool = False
    histogram_latencies: bool = False
    summary_quantiles: tuple[tuple[float, float], ...] = DEFAULT_QUANTILES


def parse_metrics_config(values: list[str]) -> MetricsConfig:
    """The settings of ``--metrics-config`` values such as ``summary_latencies=true``; the last wins."""
    settings: dict = {}
    for value in values:
        key, sep, setting = value.partition("=")
        key = key.strip()
        if not sep:
            raise MetricsConfigError(f"--metrics-config option format is <setting>=<value>. Got {value}")
        if key not in KEYS:
            raise MetricsConfigError(f"--metrics-config {value}: unknown setting '{key}' (known: {', '.join(KEYS)})")
        settings[key] = _boolean(key, setting) if key in BOOLEAN_KEYS else _quantiles(setting)
    return MetricsConfig(**settings)


def _boolean(key: str, setting: str) -> bool:
    word = setting.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise MetricsConfigError(f"--metrics-config {key}={setting}: expected true or false")


def _quantiles(setting: str) -> tuple[tuple[float, float], ...]:
    pairs = [_quantile(part, setting) for part in setting.split(",")]
    return tuple(sorted(dict(pairs).items()))


def _quantile(part: str, setting: str) -> tuple[float, float]:
    quantile, sep, error = part.partition(":")
    try:
        pair = (float(quantile), float(error))
    except ValueError:
        pair = None
    if not sep or pair is None or not all(0.0 <= number <= 1.0 for number in pair):
        raise MetricsConfigError(f"--metrics-config summary_quantiles={setting}: expected "
                                 "<quantile>:<error>[,...] with each number in [0, 1], e.g. 0.5:0.05,0.9:0.01")
    return pair
