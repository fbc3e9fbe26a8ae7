"""A realistic analyze run made in code: candidate configs x concurrencies with plausible numbers.

The numbers follow a small queueing model of a batching server on a few CPU cores: a batch of n
takes `overhead + n * per_item` ms, instances run batches in parallel up to the core count, a queue
delay lets batches fill at low load but adds latency, and throughput stops growing once the
instances are saturated. Noise is seeded, so every run of the tests sees the same table.
"""

from __future__ import annotations

import itertools
import random

CORES = 2
OVERHEAD_MS = 1.6
PER_ITEM_MS = 0.22
DEFAULT = dict(max_batch_size=8, preferred_batch_size=0, max_queue_delay_us=0, instance_count=1)


def config_id(max_batch_size, max_queue_delay_us, instance_count, kind="KIND_CPU") -> str:
    return f"b{max_batch_size}-d{max_queue_delay_us}-i{instance_count}-{kind.removeprefix('KIND_').lower()}"


def make_measurements(batch_sizes=(1, 8, 32), queue_delays=(0, 500), instance_counts=(1, 2),
                      concurrencies=(1, 2, 4, 8), max_p99_ms: float | None = 20.0, seed: int = 7):
    """One row per (config, concurrency) with every column of the analyze measurements table.

    The default grid is 12 configs x 4 concurrencies; objective = throughput."""
    import pandas as pd

    noise = random.Random(seed)
    rows = []
    for number, (batch, delay, instances) in enumerate(itertools.product(batch_sizes, queue_delays, instance_counts)):
        is_default = dict(max_batch_size=batch, preferred_batch_size=0, max_queue_delay_us=delay,
                          instance_count=instances) == DEFAULT
        for concurrency in concurrencies:
            rows.append(_point(batch, delay, instances, concurrency, noise) | dict(
                config_id=config_id(batch, delay, instances), max_batch_size=batch, preferred_batch_size=0,
                max_queue_delay_us=delay, instance_count=instances, instance_kind="KIND_CPU",
                concurrency=concurrency, is_default=is_default,
                stage="baseline" if is_default else ("explore" if number % 3 else "refine")))
    frame = pd.DataFrame(rows)
    frame["meets_constraints"] = frame["p99_ms"] <= max_p99_ms if max_p99_ms is not None else True
    frame["objective"] = frame["throughput"]
    return frame


def _point(batch, delay_us, instances, concurrency, noise) -> dict:
    """Latency and throughput of one load level from the queueing model, with +-4% noise."""
    in_flight_per_instance = max(concurrency / instances, 1.0)
    # A queue delay lets a batch gather up to what is in flight; without one, batches are what arrived.
    filled = min(batch, in_flight_per_instance if delay_us else max(1.0, in_flight_per_instance * 0.6))
    service_ms = OVERHEAD_MS + filled * PER_ITEM_MS
    parallel = min(instances, CORES)
    capacity = parallel * filled / service_ms * 1000.0 * (0.92 if instances > CORES else 1.0)
    waiting_ms = delay_us / 1000.0 * (1.0 if filled < batch else 0.4)
    avg_ms = service_ms + waiting_ms + max(0.0, concurrency / capacity * 1000.0 - service_ms) * 0.8
    throughput = min(concurrency / avg_ms * 1000.0, capacity) * noise.uniform(0.96, 1.04)
    avg_ms = concurrency / throughput * 1000.0
    tail = 1.35 + 0.05 * concurrency
    return dict(
        throughput=throughput, avg_ms=avg_ms, p50_ms=avg_ms * 0.93, p90_ms=avg_ms * 1.18, p95_ms=avg_ms * 1.27,
        p99_ms=avg_ms * tail, avg_batch_size=filled * noise.uniform(0.97, 1.0),
        queue_us=(avg_ms - service_ms) * 1000.0 * 0.9, compute_us=service_ms * 1000.0)


def make_meta(frame, **overrides) -> dict:
    """The run's meta dict, with the best config picked the way analyze picks it."""
    meeting = frame[frame["meets_constraints"]]
    best = meeting.sort_values(["objective", "p99_ms"], ascending=[False, True]).iloc[0] if len(meeting) else None
    default_ids = frame.loc[frame["is_default"], "config_id"]
    meta = dict(
        model="mlp", strategy="smart", objective="throughput", constraints={"max_p99_ms": 20.0},
        best_config_id=None if best is None else best["config_id"],
        default_config_id=default_ids.iloc[0] if len(default_ids) else frame["config_id"].iloc[0],
        best_config_pbtxt=_pbtxt(best), decisions=[
            "baseline: measured the default config b8-d0-i1-cpu at concurrency 1-8",
            "explore: instance count 2 gave 1.7x the throughput of 1 -> keep 2 instances",
            "explore: max batch 32 beat 8 by 12% at the same p99 -> try larger batches",
            "refine: queue delay 500 us added 0.4 ms p99 for +6% throughput -> keep 500 us",
            "stop: no neighbour improved the best by more than the noise (3%)",
        ],
        engine="bundled server (subprocess)", started="2025-01-01T10:00:00.250000+00:00",
        finished="2025-01-01T10:06:12.650000+00:00",
        wall_s=372.4, candidates_total=48, candidates_measured=frame["config_id"].nunique(),
        tritonctl_version="0.1.0")
    meta.update(overrides)
    return meta


def _pbtxt(best) -> str:
    if best is None:
        return ""
    return (f"# tritonctl analyze: best of 12 measured configs, {best['throughput']:.0f} infer/s at "
            f"p99 {best['p99_ms']:.2f} ms (concurrency {best['concurrency']})\n"
            f'name: "mlp"\nbackend: "onnxruntime"\nmax_batch_size: {best["max_batch_size"]}\n'
            f"dynamic_batching {{\n  max_queue_delay_microseconds: {best['max_queue_delay_us']}\n}}\n"
            f"instance_group [\n  {{\n    count: {best['instance_count']}\n    kind: KIND_CPU\n  }}\n]\n")
