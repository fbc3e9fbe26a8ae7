"""The metrics models define themselves (the Python backend's ``pb_utils.MetricFamily``), as
Triton keeps them: families by name, each with a kind and the description it was first made with;
metrics by their labels; counters that only go up, gauges, histograms with their buckets. A family
or metric lives while a model holds it: every instance counts what it took (``MetricUser``) and
gives back whatever is left when it closes, so an unloaded model's metrics leave ``/metrics``.
The server's ``/metrics`` shows them after its own (``snapshot``)."""

from __future__ import annotations

import bisect
import math
import re
import threading
from collections import Counter
from dataclasses import dataclass, field

COUNTER, GAUGE, HISTOGRAM = 0, 1, 2  # pb_utils.COUNTER, GAUGE, HISTOGRAM
KIND_NAMES = {COUNTER: "counter", GAUGE: "gauge", HISTOGRAM: "histogram"}
RESERVED_PREFIXES = ("nv_", "tritonctl_")  # the server's own families (Triton's, then tritonctl's)
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")

LabelKey = tuple[tuple[str, str], ...]


class MetricError(ValueError):
    """A request the metrics refuse; the model gets it as TritonModelException."""


@dataclass
class Metric:
    value: float = 0.0  # a histogram's sum
    buckets: tuple[float, ...] = ()  # a histogram's upper bounds
    counts: list[int] = field(default_factory=list)  # per bucket, then +Inf
    refs: int = 0


@dataclass
class Family:
    name: str
    description: str
    kind: int
    metrics: dict[LabelKey, Metric] = field(default_factory=dict)
    refs: int = 0


def label_key(labels: dict | None) -> LabelKey:
    if labels is None:
        return ()
    if not isinstance(labels, dict):
        raise MetricError(f"a metric's labels must be a dict of str to str, got {type(labels).__name__}")
    for name, value in labels.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise MetricError(f"a metric's labels must be a dict of str to str, got {name!r}: {value!r}")
        if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise MetricError(f"'{name}' is not a valid label name: letters, digits and _, not starting with a "
                              "digit or __")
    return tuple(sorted(labels.items()))


class CustomMetrics:
    """Every model's metric families of one server. Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._families: dict[str, Family] = {}

    # ---- families and metrics, counted ------------------------------------------------------------
    def family(self, name: str, description: str, kind: int) -> None:
        if not isinstance(name, str) or not _METRIC_NAME.fullmatch(name):
            raise MetricError(f"'{name}' is not a valid metric family name: letters, digits, _ and :, not starting "
                              "with a digit")
        if name.startswith(RESERVED_PREFIXES):
            raise MetricError(f"metric family name '{name}' is taken: names starting with "
                              f"{' or '.join(RESERVED_PREFIXES)} are the server's own metrics")
        if kind not in KIND_NAMES:
            raise MetricError(f"unknown metric kind {kind!r}: use pb_utils.COUNTER, pb_utils.GAUGE or "
                              "pb_utils.HISTOGRAM")
        with self._lock:
            family = self._families.get(name)
            if family is None:
                family = self._families[name] = Family(name, str(description), kind)
            elif family.kind != kind:
                raise MetricError(f"metric family '{name}' already exists as a {KIND_NAMES[family.kind]}; it cannot "
                                  f"be made again as a {KIND_NAMES[kind]}")
            family.refs += 1

    def metric(self, name: str, labels: LabelKey, buckets: list | None) -> None:
        with self._lock:
            family = self._family(name)
            metric = family.metrics.get(labels)
            if metric is None:
                metric = family.metrics[labels] = self._new_metric(family, buckets)
            elif family.kind == HISTOGRAM and buckets is not None and tuple(map(float, buckets)) != metric.buckets:
                raise MetricError(f"histogram '{name}' with these labels already has the buckets "
                                  f"{list(metric.buckets)}")
            metric.refs += 1
            family.refs += 1  # a metric keeps its family

    @staticmethod
    def _new_metric(family: Family, buckets: list | None) -> Metric:
        if family.kind != HISTOGRAM:
            if buckets is not None:
                raise MetricError(f"buckets are for histograms; '{family.name}' is a {KIND_NAMES[family.kind]}")
            return Metric()
        if buckets is None:
            raise MetricError(f"histogram '{family.name}' needs its buckets: Metric(labels, buckets=[...])")
        try:
            bounds = tuple(float(b) for b in buckets)
        except (TypeError, ValueError):
            raise MetricError(f"the buckets of histogram '{family.name}' must be numbers, got {buckets!r}") from None
        if list(bounds) != sorted(set(bounds)) or any(math.isnan(b) for b in bounds):
            raise MetricError(f"the buckets of histogram '{family.name}' must increase, got {list(buckets)}")
        return Metric(buckets=bounds, counts=[0] * (len(bounds) + 1))

    def release_family(self, name: str) -> None:
        with self._lock:
            family = self._families.get(name)
            if family is not None:
                self._drop_family_ref(family)

    def release_metric(self, name: str, labels: LabelKey) -> None:
        with self._lock:
            family = self._families.get(name)
            metric = family.metrics.get(labels) if family is not None else None
            if metric is None:
                return
            metric.refs -= 1
            if metric.refs <= 0:
                del family.metrics[labels]
            self._drop_family_ref(family)

    def _drop_family_ref(self, family: Family) -> None:
        family.refs -= 1
        if family.refs <= 0:
            del self._families[family.name]

    def _family(self, name: str) -> Family:
        family = self._families.get(name)
        if family is None:
            raise MetricError(f"metric family '{name}' no longer exists")
        return family

    def _metric(self, name: str, labels: LabelKey) -> tuple[Family, Metric]:
        family = self._family(name)
        metric = family.metrics.get(labels)
        if metric is None:
            raise MetricError(f"the metric of family '{name}' with labels {dict(labels)} no longer exists")
        return family, metric

    # ---- values ------------------------------------------------------------------------------------
    def update(self, name: str, labels: LabelKey, op: str, value: float | None = None) -> float | None:
        """``op``: increment, set, observe, or value (which returns it)."""
        if op != "value" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise MetricError(f"{op}() takes a number, got {type(value).__name__}")
        with self._lock:
            family, metric = self._metric(name, labels)
            kind = KIND_NAMES[family.kind]
            if op == "value":
                if family.kind == HISTOGRAM:
                    raise MetricError(f"value() is not supported for a histogram ('{name}')")
                return metric.value
            if op == "observe":
                if family.kind != HISTOGRAM:
                    raise MetricError(f"observe() is for histograms; '{name}' is a {kind}")
                metric.counts[bisect.bisect_left(metric.buckets, value)] += 1
                metric.value += value
            elif family.kind == HISTOGRAM:
                raise MetricError(f"{op}() is not supported for a histogram ('{name}'); use observe()")
            elif op == "increment":
                if family.kind == COUNTER and value < 0:
                    raise MetricError(f"a counter only goes up: increment({value}) of '{name}' refused")
                metric.value += value
            elif op == "set":
                if family.kind == COUNTER:
                    raise MetricError(f"a counter cannot be set ('{name}'): use increment()")
                metric.value = float(value)
            else:
                raise MetricError(f"unknown metric operation '{op}'")
            return None

    def snapshot(self) -> list[tuple[Family, list[tuple[LabelKey, Metric]]]]:
        """A copy of every family and its metrics, by name, for the exposition."""
        with self._lock:
            return [(Family(f.name, f.description, f.kind),
                     [(labels, Metric(m.value, m.buckets, list(m.counts))) for labels, m in f.metrics.items()])
                    for f in sorted(self._families.values(), key=lambda f: f.name)]


class MetricUser:
    """One model instance's use of the server's metrics: what it took, given back at ``close``."""

    def __init__(self, metrics: CustomMetrics):
        self.metrics = metrics
        self._held: Counter = Counter()  # ("family", name) or ("metric", name, labels) -> references
        self._lock = threading.Lock()

    def family(self, name: str, description: str, kind: int) -> None:
        self.metrics.family(name, description, kind)
        with self._lock:
            self._held[("family", name)] += 1

    def metric(self, name: str, labels: dict | None, buckets: list | None) -> None:
        key = label_key(labels)
        self.metrics.metric(name, key, buckets)
        with self._lock:
            self._held[("metric", name, key)] += 1

    def release_family(self, name: str) -> None:
        if self._take(("family", name)):
            self.metrics.release_family(name)

    def release_metric(self, name: str, labels: dict | None) -> None:
        key = label_key(labels)
        if self._take(("metric", name, key)):
            self.metrics.release_metric(name, key)

    def update(self, name: str, labels: dict | None, op: str, value: float | None = None) -> float | None:
        return self.metrics.update(name, label_key(labels), op, value)

    def _take(self, key: tuple) -> bool:
        with self._lock:
            if self._held[key] <= 0:
                return False
            self._held[key] -= 1
            return True

    def close(self) -> None:
        """Give back every reference still held (the model's objects outlived it, or its stub died)."""
        with self._lock:
            held, self._held = self._held, Counter()
        for key, count in held.items():
            for _ in range(count):
                if key[0] == "metric":
                    self.metrics.release_metric(key[1], key[2])
                else:
                    self.metrics.release_family(key[1])
