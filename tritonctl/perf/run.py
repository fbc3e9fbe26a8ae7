"""``run_perf``: measure a model at each load level until perf_analyzer's stability rule holds."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable

from tritonctl.perf.client import ModelInfo, PerfClient, RequestSettings
from tritonctl.perf.export import LevelRecord, record_level
from tritonctl.perf.inputs import GENERATED, build_workload, request_shapes
from tritonctl.perf.intervals import describe as describe_intervals
from tritonctl.perf.loadgen import LoadGenerator, Workload
from tritonctl.perf.measurement import LevelResult, Responses, ServerStats, Window, is_stable, merge_windows
from tritonctl.perf.options import PerfError, PerfOptions, check_options
from tritonctl.perf.sequences import DEFAULT_SEQUENCE_LENGTH, SequencePlayer
from tritonctl.perf.sweep import walk

CLIENT_BOUND_CPU_PCT = 80.0  # the client's event loop is one thread: near 100% of a core, it is the limit


@dataclass
class PerfResult:
    """Every load level's merged result plus run-wide totals."""

    options: PerfOptions
    model: ModelInfo
    levels: list[LevelResult] = field(default_factory=list)
    total_sent: int = 0
    server_total: ServerStats | None = None  # statistics delta over the whole run, warm-up included
    warnings: list[str] = field(default_factory=list)
    records: list[LevelRecord] = field(default_factory=list)  # with options.record_requests


def run_perf(options: PerfOptions, progress: Callable[[str], None] | None = None) -> PerfResult:
    """Run the whole sweep in a fresh event loop. Raises PerfError on anything the user must fix."""
    check_options(options)
    return asyncio.run(_run(options, progress or (lambda _message: None)))


def _quiet_about_interrupts(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """A Ctrl-C that lands inside a task of the HTTP or gRPC client leaves that task holding the
    KeyboardInterrupt, and asyncio would print it with a traceback once the task is collected;
    the interrupt is already on its way to the user, so only other errors are reported."""
    if not isinstance(context.get("exception"), KeyboardInterrupt):
        loop.default_exception_handler(context)


async def prepare_requests(client: PerfClient, options: PerfOptions):
    """The model's metadata and the workload of the load generator (its requests built once)."""
    info = await client.model_info(options.model, options.model_version)
    check_model(info, options)
    check_sequence_ids(info, options)
    real_data = options.input_data not in GENERATED
    shapes = request_shapes(info, options.batch_size, options.shapes, data_gives_shapes=real_data)
    workload = build_workload(info, shapes, options.input_data, options.batch_size, options.string_length,
                              options.string_data, options.extra_input_data)
    datatypes = {t.name: t.datatype for t in info.inputs}
    outputs = client.make_outputs([t.name for t in info.outputs])
    streams = [[PreparedRequest(client.make_inputs(r.inputs, datatypes), r.expected) for r in stream]
               for stream in workload.streams]

    async def infer(request: PreparedRequest, sequence: dict | None = None) -> Responses | None:
        responses = None
        if options.streaming:
            answer = await client.stream_infer(options.model, options.model_version, request.inputs, outputs,
                                               sequence)
            result, responses = answer.result, answer.responses
        else:
            result = await client.infer(options.model, options.model_version, request.inputs, outputs, sequence)
        check_outputs(result, request.expected)
        return responses

    if not info.sequence:
        return info, Workload(infer, [r for stream in streams for r in stream])
    player = SequencePlayer(streams, options.sequence_length or (None if real_data else DEFAULT_SEQUENCE_LENGTH),
                            options.sequence_length_variation, options.sequence_id_start,
                            info.string_correlation_id, end_id=options.sequence_id_end)

    async def send_in_sequence(_: object) -> Responses | None:
        sequence, request, parameters = player.take()
        try:
            return await infer(request, parameters)
        finally:
            player.give_back(sequence)

    async def close_sequences() -> int:
        """End every live sequence; these requests are sent but not measured."""
        endings = player.take_endings()
        await asyncio.gather(*(infer(request, parameters) for _, request, parameters in endings),
                             return_exceptions=True)
        for sequence, _, _ in endings:
            player.give_back(sequence)
        return len(endings)

    return info, Workload(send_in_sequence, [None], close_sequences)


@dataclass
class PreparedRequest:
    inputs: list
    expected: dict


def check_model(info: ModelInfo, options: PerfOptions) -> None:
    """Refuse what this load generator cannot measure, before any request is sent."""
    if info.decoupled and not options.streaming:
        raise PerfError(f"model '{info.name}' is decoupled (model_transaction_policy {{ decoupled: true }}): "
                        "Decoupled models must be run with `--async` and `--streaming` and either `-i grpc` or "
                        "`--service-kind=triton_c_api` (here: -i grpc --streaming)")
    if info.sequence and options.batch_size > 1:
        raise PerfError(f"-b {options.batch_size}: model '{info.name}' has a sequence batcher, whose requests "
                        "each carry one step of one sequence; use -b 1 (the batcher batches sequences itself)")


def check_sequence_ids(info: ModelInfo, options: PerfOptions) -> None:
    """perf_analyzer's check that an id range leaves every live sequence an id of its own."""
    if not info.sequence or options.sequence_id_end is None:
        return
    span = options.sequence_id_end - options.sequence_id_start
    sweep = options.search_range
    most = max((*options.concurrency, *((sweep.start, sweep.end) if sweep and options.concurrency else ())),
               default=0)
    if span < most:
        raise PerfError(f"--sequence-id-range {options.sequence_id_start}:{options.sequence_id_end} holds {span} "
                        f"ids, fewer than the {int(most)} sequences live at concurrency {int(most)}: sequence id "
                        "collision may occur; widen the range")


def check_outputs(result, expected: dict) -> None:
    """Compare the outputs with ``validation_data``; a mismatch fails the request."""
    import numpy as np

    for name, want in expected.items():
        got = result.as_numpy(name) if result is not None else None
        if got is None:
            raise ValueError(f"validation: the response has no output '{name}'")
        got, want = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
        if got.dtype.kind == "f" and want.size == got.size:
            same = np.allclose(got, want, rtol=1e-5, atol=1e-6)
        else:
            same = want.size == got.size and all(_same(a, b) for a, b in zip(got.tolist(), want.tolist()))
        if not same:
            raise ValueError(f"validation: output '{name}' does not match validation_data: expected "
                             f"{_preview(want)}, got {_preview(got)}")


def _same(got, want) -> bool:
    if isinstance(got, bytes) and isinstance(want, str):
        want = want.encode()
    return got == want


def _preview(array) -> str:
    values = array.tolist()
    return str(values[:8])[:-1] + (", ...]" if len(values) > 8 else "]")


def request_settings(options: PerfOptions) -> RequestSettings:
    return RequestSettings(headers=dict(options.headers), binary_inputs=options.binary_tensors[0],
                           binary_outputs=options.binary_tensors[1], compression=options.grpc_compression,
                           parameters=dict(options.request_parameters))


async def _run(options: PerfOptions, progress: Callable[[str], None]) -> PerfResult:
    asyncio.get_running_loop().set_exception_handler(_quiet_about_interrupts)
    async with PerfClient(options.url, options.protocol, options.request_timeout_s,
                          request_settings(options)) as client:
        info, workload = await prepare_requests(client, options)
        if options.trace_settings:
            await client.update_trace_settings(options.model, options.trace_settings)
        result = PerfResult(options, info)
        check_latency = not (options.streaming or (info.sequence if options.async_mode is None
                                                   else options.async_mode))
        before = await client.statistics(options.model, options.model_version)
        levels = walk(options)
        value = next(levels)
        while True:
            concurrency, rate = _load(options, value)
            label = level_label(options, concurrency, rate)
            progress(f"measuring {label}")
            limit = options.request_count + options.warmup_requests if options.request_count else None
            generator = LoadGenerator(workload, limit)
            level = await _measure_level(options, client, generator, concurrency, rate, check_latency,
                                         result.records)
            result.total_sent += generator.state.sent
            result.levels.append(level)
            result.warnings.extend(_level_warnings(level, label, generator.state.first_error))
            reached = _threshold_reached(options, level)
            if reached:
                result.warnings.append(f"{label}: latency {reached:g} ms reached the --latency-threshold of "
                                       f"{options.latency_threshold_ms} ms")
            try:
                value = levels.send(level.stable and not reached)
            except StopIteration:
                break
        after = await client.statistics(options.model, options.model_version)
        if before is not None and after is not None:
            result.server_total = after - before
    return result


def _load(options: PerfOptions, value: float) -> tuple[int | None, float | None]:
    if options.concurrency:
        return int(value), None
    if options.request_rates:
        return None, value
    return None, None  # request intervals: the trace is one level


def _threshold_reached(options: PerfOptions, level: LevelResult) -> int:
    """The level's latency in whole ms if it reached the threshold, else 0 (perf_analyzer compares the
    stabilizing latency, the average or the --percentile value, truncated to ms)."""
    if options.latency_threshold_ms is None:
        return 0
    latency_us = (level.avg_latency_us if options.latency_percentile is None
                  else level.percentiles_us[options.latency_percentile])
    latency_ms = int(latency_us // 1000)
    return latency_ms if latency_ms >= options.latency_threshold_ms else 0


async def _measure_level(options: PerfOptions, client: PerfClient, generator: LoadGenerator,
                         concurrency: int | None, rate: float | None, check_latency: bool = True,
                         records: list[LevelRecord] | None = None) -> LevelResult:
    state = generator.state
    if concurrency:
        generator.start_concurrency(concurrency)
    elif rate:
        generator.start_request_rate(rate, options.request_distribution)
    else:
        generator.start_intervals(options.request_intervals)
    try:
        if options.warmup_requests:
            await _wait(state.wait_for_count(options.warmup_requests), options.request_timeout_s, state)
        windows: list[Window] = []
        stats = await client.statistics(options.model, options.model_version)
        mark, delayed_mark = len(state.completions), state.delayed
        first_mark = mark
        stable = False
        while len(windows) < options.max_trials:
            start_ns, cpu0 = time.perf_counter_ns(), time.thread_time()
            if options.request_count:  # every request sent (the generator stops at warm-up + count) answered
                await _wait(state.wait_for_count(options.warmup_requests + options.request_count),
                            options.request_timeout_s, state)
            elif options.measurement_mode == "time_windows":
                await asyncio.sleep(options.measurement_interval_ms / 1000)
            else:
                await _wait(state.wait_for_count(mark + options.measurement_request_count),
                            options.request_timeout_s, state)
            end_ns, cpu1 = time.perf_counter_ns(), time.thread_time()
            done = state.completions[mark:]
            mark = len(state.completions)
            new_stats = await client.statistics(options.model, options.model_version)
            window = Window.of(start_ns, end_ns, done, state.delayed - delayed_mark, cpu1 - cpu0,
                               new_stats - stats if stats is not None and new_stats is not None else None,
                               options.streaming)
            delayed_mark, stats = state.delayed, new_stats
            if window.errors and not window.count:
                raise PerfError(f"every request failed: {state.first_error}")
            windows.append(window)
            if options.request_count:  # one window of exactly that many requests, as perf_analyzer measures it
                stable = True
                break
            if is_stable(windows, options.stability_percentage, options.latency_percentile, check_latency):
                stable = True
                break
    finally:
        await generator.stop()
    if records is not None and options.record_requests:
        records.append(record_level(options, concurrency, rate, windows, state.completions[first_mark:mark]))
    return merge_windows(windows[-3:], options.batch_size, concurrency, rate, stable, len(windows),
                         options.latency_percentile)


async def _wait(event: asyncio.Event, timeout_s: float, state) -> None:
    # Not asyncio.wait_for: on Python 3.10 and 3.11 it swallows a cancellation (Ctrl-C) that lands
    # as the event is set, and the sweep would go on as if nothing had been pressed.
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout_s)
    finally:
        waiter.cancel()
    if not done:
        detail = f" (first error: {state.first_error})" if state.first_error else ""
        raise PerfError(f"no progress for {timeout_s:g} s: only {len(state.completions)} requests "
                        f"completed{detail}")


def level_label(options: PerfOptions, concurrency: int | None, rate: float | None) -> str:
    """``concurrency 4``, ``request rate 50/s`` or ``trace of 3 intervals, mean 37.5/s``."""
    if concurrency:
        return f"concurrency {concurrency}"
    if rate:
        return f"request rate {rate:g}/s"
    return describe_intervals(options.request_intervals)


def _level_warnings(level: LevelResult, label: str, first_error: str | None = None) -> list[str]:
    warnings = []
    if not level.stable:
        warnings.append(f"{label}: failed to obtain a stable measurement within {level.windows} windows; "
                        "use a longer --measurement-interval or a larger --measurement-request-count")
    if level.error_count:
        warnings.append(f"{label}: {level.error_count} requests failed"
                        + (f" (first error: {first_error})" if first_error else ""))
    if level.client_cpu_pct >= CLIENT_BOUND_CPU_PCT:
        warnings.append(f"{label}: the client used {level.client_cpu_pct:.0f}% of a core; it is probably the "
                        "bottleneck, so throughput may be understated")
    sent = level.request_count + level.error_count
    if not level.concurrency and sent and level.delayed_count / sent > 0.01:
        warnings.append(f"{label}: {level.delayed_count} of {sent} requests left late; the client could not "
                        "sustain the " + ("rate" if level.request_rate else "intervals"))
    return warnings
