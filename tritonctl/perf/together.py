"""Several models measured at once, each under its own load, in the same time windows: what
serving them side by side on one server gives each of them (``tritonctl analyze --concurrent``).

Each model gets its own client and load generator (one load level each: a concurrency, a request
rate or a trace), all in one event loop. Every load starts together and runs until every model's
measurement is done; the windows are the same wall-clock intervals for every model, and the
measurement ends once every model's last windows are stable (perf_analyzer's rule, per model)
or after ``max_trials`` windows. The window settings are the first options'.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack

from tritonctl.perf.client import PerfClient
from tritonctl.perf.loadgen import LoadGenerator
from tritonctl.perf.measurement import LevelResult, Window, is_stable, merge_windows
from tritonctl.perf.options import PerfError, PerfOptions, check_options
from tritonctl.perf.run import _quiet_about_interrupts, _wait, prepare_requests


def run_together(loads: list[PerfOptions]) -> list[LevelResult]:
    """Measure every model of ``loads`` at once (each options names one model and one load level);
    returns their results in the same order. Raises PerfError on anything the user must fix."""
    if not loads:
        raise PerfError("no model to measure")
    for options in loads:
        check_options(options)
        levels = len(options.concurrency) + len(options.request_rates) + bool(options.request_intervals)
        if levels != 1:
            raise PerfError(f"model '{options.model}': measuring models together takes one load level each")
    if loads[0].measurement_mode != "time_windows":
        raise PerfError("models measured together share time windows: use --measurement-mode time_windows")
    return asyncio.run(_together(loads))


async def _together(loads: list[PerfOptions]) -> list[LevelResult]:
    asyncio.get_running_loop().set_exception_handler(_quiet_about_interrupts)
    first = loads[0]
    async with AsyncExitStack() as stack:
        clients: list[PerfClient] = []
        generators: list[LoadGenerator] = []
        for options in loads:
            client = await stack.enter_async_context(PerfClient(options.url, options.protocol,
                                                                options.request_timeout_s))
            generators.append(await _generator(client, options))
            clients.append(client)
        for generator, options in zip(generators, loads):
            _start(generator, options)
        try:
            for generator, options in zip(generators, loads):
                if options.warmup_requests:
                    await _wait(generator.state.wait_for_count(options.warmup_requests), options.request_timeout_s,
                                generator.state)
            stats = [await c.statistics(o.model, o.model_version) for c, o in zip(clients, loads)]
            marks = [(len(g.state.completions), g.state.delayed) for g in generators]
            windows: list[list[Window]] = [[] for _ in loads]
            stable = [False] * len(loads)
            while len(windows[0]) < first.max_trials and not all(stable):
                start_ns, cpu0 = time.perf_counter_ns(), time.thread_time()
                await asyncio.sleep(first.measurement_interval_ms / 1000)
                end_ns, cpu1 = time.perf_counter_ns(), time.thread_time()
                cuts = [(g.state.completions[marks[i][0]:], g.state.delayed) for i, g in enumerate(generators)]
                for i, (generator, options) in enumerate(zip(generators, loads)):
                    state = generator.state
                    done, delayed = cuts[i]
                    new_stats = await clients[i].statistics(options.model, options.model_version)
                    window = Window.of(start_ns, end_ns, done, delayed - marks[i][1], cpu1 - cpu0,
                                       new_stats - stats[i] if stats[i] is not None and new_stats is not None
                                       else None, options.streaming)
                    marks[i] = (marks[i][0] + len(done), delayed)
                    stats[i] = new_stats
                    if window.errors and not window.count:
                        raise PerfError(f"model '{options.model}': every request failed: {state.first_error}")
                    windows[i].append(window)
                    stable[i] = is_stable(windows[i], first.stability_percentage, first.latency_percentile)
        finally:
            for generator in generators:
                await generator.stop()
    return [merge_windows(w[-3:], o.batch_size, (o.concurrency or (None,))[0], (o.request_rates or (None,))[0],
                          s, len(w)) for w, o, s in zip(windows, loads, stable)]


async def _generator(client: PerfClient, options: PerfOptions) -> LoadGenerator:
    _, workload = await prepare_requests(client, options)
    return LoadGenerator(workload)


def _start(generator: LoadGenerator, options: PerfOptions) -> None:
    if options.concurrency:
        generator.start_concurrency(options.concurrency[0])
    elif options.request_rates:
        generator.start_request_rate(options.request_rates[0], options.request_distribution)
    else:
        generator.start_intervals(options.request_intervals)
