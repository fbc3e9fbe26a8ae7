"""The rate limiter's rules (core/rate_limiter.py): how much of each resource there is, which
staged instance goes next, and the --rate-limit-resource values it takes."""

from __future__ import annotations

import threading
import time

import pytest
from google.protobuf import text_format
from hypothesis import given
from hypothesis import strategies as st

from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.core.rate_limiter import (EVERY_DEVICE, RateLimiter, RateLimitOptionError, make_rate_limiter,
                                               parse_mode, parse_resource)


def _parse(text: str):
    return text_format.Parse(text, model_config_pb2().ModelRateLimiter())


def test_by_default_there_is_the_most_any_instance_asks_for():
    limiter = RateLimiter()
    small = limiter.register(_parse('resources [ { name: "R" count: 2 } ]'), -1)
    big = limiter.register(_parse('resources [ { name: "R" count: 5 } ]'), -1)
    limiter.acquire(big)
    held = threading.Event()
    waiter = threading.Thread(target=lambda: (limiter.acquire(small), held.set()))
    waiter.start()
    assert not held.wait(0.2)  # 5 of 5 taken: the small one waits
    limiter.release(big)
    assert held.wait(5)
    waiter.join()
    limiter.release(small)
    limiter.unregister([big])
    limiter.acquire(small)  # only 2 now, and free


def test_explicit_counts_replace_the_default_and_a_resource_no_flag_names_has_none():
    limiter = RateLimiter([parse_resource("R:3"), parse_resource("G:1:7")])
    limiter.register(_parse('resources [ { name: "R" count: 3 } ]'), 1)  # R on every device
    with pytest.raises(ServeError, match='"R" is limited to 0 .* minimum required count is 1'):
        RateLimiter([parse_resource("R:3:0")]).register(_parse('resources [ { name: "R" count: 1 } ]'), 2)
    # a global resource takes the largest count given for its name, whatever the device
    limiter.register(_parse('resources [ { name: "G" global: true count: 1 } ]'), -1)
    with pytest.raises(ServeError, match='"Z" is limited to 0'):
        limiter.register(_parse('resources [ { name: "Z" count: 1 } ]'), -1)


def test_a_resource_both_global_and_per_device_is_refused_and_the_refused_instance_is_not_kept():
    limiter = RateLimiter()
    device = limiter.register(_parse('resources [ { name: "R" count: 1 } ]'), 0)
    with pytest.raises(ServeError, match='Resource "R" is present as both global and device-specific'):
        limiter.register(_parse('resources [ { name: "R" global: true count: 1 } ]'), -1)
    limiter.acquire(device)  # the limits are as before the refusal
    limiter.release(device)


def test_staged_instances_take_turns_by_executions_times_priority():
    """Two instances that cannot run together and always have work: priority 1 runs twice for
    each run of priority 2."""
    limiter = RateLimiter()
    one = limiter.register(_parse('resources [ { name: "R" count: 1 } ] priority: 1'), -1)
    two = limiter.register(_parse('resources [ { name: "R" count: 1 } ] priority: 2'), -1)
    order: list[str] = []
    stop = threading.Event()

    def work(slot, name):
        while not stop.is_set():
            limiter.acquire(slot)
            order.append(name)
            time.sleep(0.002)
            limiter.release(slot)

    workers = [threading.Thread(target=work, args=(slot, name)) for slot, name in ((one, "1"), (two, "2"))]
    for worker in workers:
        worker.start()
    while len(order) < 60:
        time.sleep(0.01)
    stop.set()
    for worker in workers:
        worker.join()
    counts = order[:60].count("1"), order[:60].count("2")
    assert 38 <= counts[0] <= 42, order


def test_priority_0_counts_as_1():
    limiter = RateLimiter()
    slot = limiter.register(_parse("priority: 0"), -1)
    limiter.acquire(slot)
    limiter.release(slot)
    assert slot.scaled_priority == 1


def test_rate_limit_modes_and_resource_values():
    assert parse_mode("execution_count") and parse_mode("EXECUTION_COUNT") and not parse_mode("off")
    assert parse_resource("R1:4") == ("R1", 4, EVERY_DEVICE)
    assert parse_resource("R1:4:2") == ("R1", 4, 2)
    assert make_rate_limiter(False, ["R1:4"]) is None
    with pytest.raises(RateLimitOptionError):
        make_rate_limiter(False, ["R1"])  # checked even when off, as tritonserver does


@given(st.text(alphabet=st.sampled_from("R1:-x 0"), max_size=12))
def test_any_resource_value_is_taken_or_refused_in_words(text):
    try:
        name, count, device = parse_resource(text)
    except RateLimitOptionError as exc:
        assert str(exc).startswith(("--rate-limit-resource option format is", "Invalid option value. Got"))
        return
    parts = text.split(":")
    assert len(parts) in (2, 3) and name == parts[0] and count == int(parts[1])
    assert device == (int(parts[2]) if len(parts) == 3 else EVERY_DEVICE)
