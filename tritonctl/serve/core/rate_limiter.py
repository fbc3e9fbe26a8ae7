"""Triton's rate limiter (``tritonserver --rate-limit=execution_count``, core ``rate_limiter.cc``).

A model instance runs a batch only once it holds the resources its instance group's
``rate_limiter`` asks for; while it waits it is *staged*, and only the staged instance with the
lowest execution count times priority (priority 0 counts as 1; ties: the one staged first) may
take resources: an instance of priority 2 gets half the turns of one of priority 1.

A resource is global (one pool for the server) or per device (a pool on each device; an
instance's device is its GPU, 0 for a CPU instance, as Triton counts it). How much there is of
each: by default the most any registered instance asks for, so that every instance can run;
with ``--rate-limit-resource NAME:COUNT[:DEVICE]`` flags, what they give (a flag without a device
gives COUNT on every device; a global resource takes the largest COUNT given for its name), and
0 for a resource no flag names. An instance that asks for more than there is cannot load, in
Triton's words.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import defaultdict
from dataclasses import dataclass, field

from tritonctl.serve.core.errors import invalid_arg

log = logging.getLogger("tritonctl.serve")

GLOBAL = -2  # the device key of a global resource
EVERY_DEVICE = -1  # a --rate-limit-resource flag without a device
Pools = dict[int, dict[str, int]]  # device key -> resource name -> count


class RateLimitOptionError(ValueError):
    """A ``--rate-limit`` or ``--rate-limit-resource`` value tritonserver refuses, in its words."""


def parse_mode(text: str) -> bool:
    """``--rate-limit``: True for execution_count, False for off."""
    mode = text.lower()
    if mode not in ("execution_count", "off"):
        raise RateLimitOptionError("invalid argument for --rate-limit")
    return mode == "execution_count"


def parse_resource(text: str) -> tuple[str, int, int]:
    """``--rate-limit-resource NAME:COUNT[:DEVICE]``: (name, count, device, EVERY_DEVICE without one)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise RateLimitOptionError("--rate-limit-resource option format is '<resource_name>:<count>:<device>' or "
                                   f"'<resource_name>:<count>'. Got {text}")
    numbers = []
    for part in parts[1:]:
        try:
            numbers.append(int(part))
        except ValueError:
            raise RateLimitOptionError(f"Invalid option value. Got {part}") from None
    return parts[0], numbers[0], numbers[1] if len(numbers) == 2 else EVERY_DEVICE


def make_rate_limiter(execution_count: bool, resources: list[str]) -> "RateLimiter | None":
    """The server's rate limiter, None when it is off (``resources`` are checked either way, as
    tritonserver checks them, and not used when it is off). Raises RateLimitOptionError."""
    explicit = [parse_resource(text) for text in resources]
    return RateLimiter(explicit) if execution_count else None


@dataclass(eq=False)
class Slot:
    """One registered model instance: what it asks for, and how often it ran."""

    needs: Pools
    priority: int
    executions: int = 0

    @property
    def scaled_priority(self) -> int:
        return self.executions * max(self.priority, 1)


@dataclass(eq=False)
class _Waiting:
    slot: Slot
    ticket: int


@dataclass
class RateLimiter:
    """The server's one rate limiter. ``explicit``: the ``--rate-limit-resource`` flags, parsed."""

    explicit: list[tuple[str, int, int]] = field(default_factory=list)

    def __post_init__(self):
        self._cond = threading.Condition()
        self._slots: list[Slot] = []
        self._limits: Pools = {}
        self._held: Pools = defaultdict(lambda: defaultdict(int))
        self._staged: list[_Waiting] = []
        self._tickets = itertools.count()

    # ---- registration (at load, and when a model update adds or removes instances) --------------
    def register(self, rate_limiter, device_id: int) -> Slot:
        """Register an instance of a group whose ``rate_limiter`` is given, on ``device_id`` (its
        GPU, or -1 for a CPU instance); raises ServeError (invalid argument) when the resources
        it asks for cannot all be had, and then it is not registered."""
        needs: Pools = defaultdict(dict)
        for resource in rate_limiter.resources:
            needs[GLOBAL if getattr(resource, "global") else max(device_id, 0)][resource.name] = resource.count
        slot = Slot(dict(needs), rate_limiter.priority)
        with self._cond:
            self._slots.append(slot)
            try:
                self._limits = self._compute_limits()
            except Exception:
                self._slots.remove(slot)
                raise
        return slot

    def unregister(self, slots: list[Slot]) -> None:
        with self._cond:
            for slot in slots:
                if slot in self._slots:
                    self._slots.remove(slot)
            try:
                self._limits = self._compute_limits()
            except Exception as exc:  # what is left asked for no more than before: never expected
                log.warning("rate limiter: %s", exc)
            self._cond.notify_all()

    def _compute_limits(self) -> Pools:
        """Triton's UpdateResourceLimits: the most each resource is asked for, on each device,
        replaced by the explicit counts when there are any; checked."""
        limits: Pools = defaultdict(dict)
        for slot in self._slots:
            for device, resources in slot.needs.items():
                for name, count in resources.items():
                    limits[device][name] = max(limits[device].get(name, 0), count)
        if self.explicit:
            for device in sorted(limits):
                for name in sorted(limits[device]):
                    given = max((count for n, count, d in self.explicit
                                 if n == name and (device == GLOBAL or d in (device, EVERY_DEVICE))), default=0)
                    if given < limits[device][name]:
                        raise invalid_arg(f'Resource count for "{name}" is limited to {given} which will prevent '
                                          "scheduling of one or more model instances, the minimum required count is "
                                          f"{limits[device][name]}")
                    limits[device][name] = given
        for name in sorted(limits.get(GLOBAL, {})):
            if any(name in resources for device, resources in limits.items() if device != GLOBAL):
                raise invalid_arg(f'Resource "{name}" is present as both global and device-specific resource in the '
                                  "model configuration.")
        if log.isEnabledFor(logging.DEBUG):
            # Triton's verbose line, its newlines and tabs escaped as Triton's log writes them
            text = "\\nMax Resource Map===>\\n"
            for device in sorted(limits):
                if limits[device]:
                    text += f"\\tDevice: {'GLOBAL' if device == GLOBAL else device}\\n"
                    text += "".join(f"\\t\\tResource: {name}\\t Count: {count}\\n"
                                    for name, count in sorted(limits[device].items()))
            log.debug(text)
        return dict(limits)

    # ---- execution ------------------------------------------------------------------------------
    def acquire(self, slot: Slot) -> None:
        """Wait until ``slot`` is the first staged instance and its resources are free; take them."""
        with self._cond:
            waiting = _Waiting(slot, next(self._tickets))
            self._staged.append(waiting)
            while self._first() is not waiting or not self._free_for(slot):
                self._cond.wait()
            self._staged.remove(waiting)
            for device, resources in slot.needs.items():
                for name, count in resources.items():
                    self._held[device][name] += count
            self._cond.notify_all()  # the next staged instance may fit beside this one

    def release(self, slot: Slot) -> None:
        """``slot`` ran: count the execution and free its resources."""
        with self._cond:
            slot.executions += 1
            for device, resources in slot.needs.items():
                for name, count in resources.items():
                    self._held[device][name] -= count
            self._cond.notify_all()

    def _first(self) -> _Waiting:
        return min(self._staged, key=lambda w: (w.slot.scaled_priority, w.ticket))

    def _free_for(self, slot: Slot) -> bool:
        return all(self._held[device][name] + count <= self._limits.get(device, {}).get(name, 0)
                   for device, resources in slot.needs.items() for name, count in resources.items())


@dataclass(frozen=True)
class Gate:
    """One instance's way through the rate limiter: ``acquire`` before it runs, ``release`` after."""

    limiter: RateLimiter
    slot: Slot

    def acquire(self) -> None:
        self.limiter.acquire(self.slot)

    def release(self) -> None:
        self.limiter.release(self.slot)
