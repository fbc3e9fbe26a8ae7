"""The load generator keeps exactly N requests in flight, or sends on schedule."""

from __future__ import annotations

import asyncio
import gc

import pytest
from hypothesis import given, settings, strategies as st

from tritonctl.perf.loadgen import LoadGenerator, LoadState, Workload
from tritonctl.perf.sequences import SequencePlayer


def test_concurrency_keeps_n_in_flight_and_drains_on_stop():
    in_flight, peak = 0, 0

    async def send(request):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.002)
        in_flight -= 1

    async def scenario():
        generator = LoadGenerator(Workload(send, ["a", "b"]))
        generator.start_concurrency(3)
        await asyncio.wait_for(generator.state.wait_for_count(30).wait(), 5)
        await generator.stop()
        return generator.state

    state = asyncio.run(scenario())
    assert peak == 3 and in_flight == 0
    assert state.sent == len(state.completions) >= 30


def test_request_rate_sends_at_the_rate_and_records_failures():
    async def send(request):
        if request == "bad":
            raise RuntimeError("model said no\nsecond line")

    async def scenario(distribution):
        generator = LoadGenerator(Workload(send, ["good", "bad"]))
        generator.start_request_rate(200, distribution)
        await asyncio.sleep(0.5)
        await generator.stop()
        return generator.state

    for distribution in ("constant", "poisson"):
        state = asyncio.run(scenario(distribution))
        assert 50 <= state.sent <= 130, state.sent
        assert sum(not c.ok for c in state.completions) == state.sent // 2
        assert state.first_error == "model said no"


def test_ctrl_c_is_never_swallowed_by_the_wait_for_progress():
    """A cancellation (asyncio.run's answer to Ctrl-C) that lands as the awaited count is reached
    must still end the sweep; asyncio.wait_for on Python 3.10/3.11 drops it in that case."""
    from tritonctl.perf.run import _wait

    async def cancelled_as_the_event_is_set() -> bool:
        event = asyncio.Event()
        task = asyncio.ensure_future(_wait(event, 10, LoadState()))
        await asyncio.sleep(0)
        event.set()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(cancelled_as_the_event_is_set())


def test_ctrl_c_inside_a_client_task_is_not_printed_again(caplog):
    """Ctrl-C can land inside a task of the HTTP client: the interrupt goes up to the user once,
    with no 'Task exception was never retrieved' traceback after it; other errors still show."""
    from tritonctl.perf.run import _quiet_about_interrupts

    async def client_task(error: BaseException):
        await asyncio.sleep(0)
        raise error

    async def measurement(error: BaseException):
        asyncio.get_running_loop().set_exception_handler(_quiet_about_interrupts)
        asyncio.get_running_loop().create_task(client_task(error))
        await asyncio.sleep(0.5)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(measurement(KeyboardInterrupt()))
    gc.collect()
    assert "never retrieved" not in caplog.text

    asyncio.run(measurement(RuntimeError("connection reset")))
    gc.collect()
    assert "never retrieved" in caplog.text and "connection reset" in caplog.text


@given(concurrency=st.integers(1, 5), length=st.integers(1, 6), rounds=st.integers(1, 30))
@settings(max_examples=40, deadline=None)
def test_sequences_have_one_request_in_flight_and_start_and_end_flags(concurrency, length, rounds):
    """N concurrent senders play N sequences; each sequence sends its steps in order, flagged start
    on the first and end on the last, and an id is never reused. Once the senders stop, every
    sequence still live is closed with its next step flagged end."""
    player = SequencePlayer([["a", "b", "c"]], length, 0, first_id=5)
    sent: dict[int, list[tuple[str, bool, bool]]] = {}

    async def sender():
        for _ in range(rounds):
            sequence, step, parameters = player.take()
            assert sequence.correlation_id not in busy
            busy.add(sequence.correlation_id)
            sent.setdefault(parameters["sequence_id"], []).append(
                (step, parameters["sequence_start"], parameters["sequence_end"]))
            await asyncio.sleep(0)
            busy.discard(sequence.correlation_id)
            player.give_back(sequence)

    busy: set = set()

    async def main():
        await asyncio.gather(*(sender() for _ in range(concurrency)))

    asyncio.run(main())
    live = {i for i, steps in sent.items() if not steps[-1][2]}
    endings = player.take_endings()
    assert {parameters["sequence_id"] for _, _, parameters in endings} == live
    for sequence, step, parameters in endings:
        assert parameters["sequence_end"]
        sent[parameters["sequence_id"]].append((step, parameters["sequence_start"], True))
        player.give_back(sequence)
    assert player.take_endings() == []
    assert min(sent) == 5
    for steps in sent.values():
        assert [s for s, _, _ in steps] == ["abc"[i % 3] for i in range(len(steps))]
        assert [start for _, start, _ in steps] == [True] + [False] * (len(steps) - 1)
        assert [end for _, _, end in steps] == [False] * (len(steps) - 1) + [True]
        assert len(steps) <= length


def test_sequences_take_their_length_from_the_stream_without_a_sequence_length():
    player = SequencePlayer([[1, 2, 3], [4]], None, 20, first_id=1, string_ids=True)
    first, step, parameters = player.take()
    assert first.length == 3 and step == 1
    assert parameters == {"sequence_id": "1", "sequence_start": True, "sequence_end": False}
    second, step, parameters = player.take()
    assert second.length == 1 and step == 4 and parameters["sequence_start"] and parameters["sequence_end"]


def test_sequence_ids_cycle_through_the_range_skipping_live_ones():
    player = SequencePlayer([["a"]], 2, 0, first_id=3, end_id=5)
    first, _, _ = player.take()
    second, _, _ = player.take()
    assert (first.correlation_id, second.correlation_id) == (3, 4)
    with pytest.raises(RuntimeError, match="--sequence-id-range 3:5: all 2 ids belong to live sequences"):
        player.take()
    for sequence in (first, first):  # the second request ends sequence 3: its id is free again
        player.give_back(sequence)
        if sequence.position < sequence.length:
            player.take()
    third, _, parameters = player.take()
    assert third.correlation_id == 3 and parameters["sequence_start"]


def test_a_limit_stops_sending_after_that_many_requests():
    async def send(request):
        await asyncio.sleep(0.001)

    async def scenario():
        generator = LoadGenerator(Workload(send, ["a"]), limit=7)
        generator.start_concurrency(3)
        await asyncio.wait_for(generator.state.wait_for_count(7).wait(), 5)
        await asyncio.sleep(0.01)
        await generator.stop()
        return generator.state

    state = asyncio.run(scenario())
    assert state.sent == len(state.completions) == 7
