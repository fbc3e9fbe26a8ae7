"""Asyncio load generation: N requests in flight (concurrency) or sends on a schedule (a request
rate, or a trace of intervals replayed in a loop)."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator

from tritonctl.perf.intervals import gaps_s
from tritonctl.perf.measurement import Responses

DELAY_THRESHOLD_NS = 2_000_000  # a scheduled send that leaves more than 2 ms late counts as delayed


@dataclass
class Completion:
    end_ns: int
    latency_ns: int
    ok: bool
    responses: Responses | None = None  # a streamed request's responses; it ends at the last one


@dataclass
class LoadState:
    """What the generator has done so far; the measurement loop slices ``completions`` at window edges."""

    completions: list[Completion] = field(default_factory=list)
    sent: int = 0
    delayed: int = 0
    first_error: str | None = None
    target: int = 0  # set ``reached`` once this many completions exist
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    def wait_for_count(self, count: int) -> asyncio.Event:
        self.target = count
        self.reached = asyncio.Event()
        if len(self.completions) >= count:
            self.reached.set()
        return self.reached


@dataclass
class Workload:
    """How the load generator sends: ``send`` one of ``requests``; ``close``, when given, after the
    last request of a level has been answered, sends what ends the level and says how many requests."""

    send: Callable[[Any], Awaitable[Responses | None]]
    requests: list[Any]
    close: Callable[[], Awaitable[int]] | None = None


class LoadGenerator:
    """Runs the workload's ``send(request)`` over its requests (round-robin) until ``stop()``, or
    until ``limit`` requests have been sent. A send that returns the request's ``Responses`` (a
    streamed request) is timed to its last response."""

    def __init__(self, workload: Workload, limit: int | None = None):
        self._send = workload.send
        self._requests = workload.requests
        self._close = workload.close
        self._limit = limit
        self._next = 0
        self._stopping = False
        self._tasks: list[asyncio.Task] = []
        self._in_flight: set[asyncio.Task] = set()
        self.state = LoadState()

    def start_concurrency(self, concurrency: int) -> None:
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(concurrency)]

    def start_request_rate(self, rate: float, distribution: str, seed: int = 0) -> None:
        rng = random.Random(seed)
        gaps = (rng.expovariate(rate) if distribution == "poisson" else 1.0 / rate for _ in itertools.count())
        self._tasks = [asyncio.create_task(self._scheduler(gaps))]

    def start_intervals(self, intervals_us: tuple[int, ...]) -> None:
        """Send after each interval in turn (perf_analyzer's custom intervals), from the top again at the end."""
        self._tasks = [asyncio.create_task(self._scheduler(gaps_s(intervals_us)))]

    async def stop(self) -> None:
        """Stop sending and wait for every request in flight, so the counts are final; then close
        the workload (the sequences still live)."""
        self._stopping = True
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
        if self._close is not None:
            self.state.sent += await self._close()

    def _pick(self) -> Any:
        request = self._requests[self._next]
        self._next = (self._next + 1) % len(self._requests)
        return request

    def _done_sending(self) -> bool:
        return self._stopping or (self._limit is not None and self.state.sent >= self._limit)

    async def _worker(self) -> None:
        while not self._done_sending():
            await self._one(self._pick())

    async def _scheduler(self, gaps_s: Iterator[float]) -> None:
        next_ns = time.perf_counter_ns()
        for gap_s in gaps_s:
            if self._done_sending():
                break
            next_ns += int(gap_s * 1e9)
            wait_ns = next_ns - time.perf_counter_ns()
            # Behind schedule, the loop still yields, so the requests already sent get to run.
            await asyncio.sleep(max(wait_ns, 0) / 1e9)
            if self._done_sending():
                break
            if time.perf_counter_ns() - next_ns > DELAY_THRESHOLD_NS:
                self.state.delayed += 1
            task = asyncio.create_task(self._one(self._pick()))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)

    async def _one(self, request: Any) -> None:
        state = self.state
        state.sent += 1
        start = time.perf_counter_ns()
        ok, responses = True, None
        try:
            responses = await self._send(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            ok = False
            if state.first_error is None:
                state.first_error = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        end = responses.last_ns if responses is not None else time.perf_counter_ns()
        state.completions.append(Completion(end, end - start, ok, responses))
        if state.target and len(state.completions) >= state.target:
            state.reached.set()
