"""Sequences for models with a sequence batcher, as perf_analyzer sends them: each sequence has its own
correlation id, its first request carries the start flag and its last the end flag, and one sequence
has at most one request in flight, so N requests in flight are N live sequences. When a level ends,
every sequence still live is closed with one more request flagged end (perf_analyzer's
CompleteOngoingSequences), so none is left holding a slot of the server's sequence batcher."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

DEFAULT_SEQUENCE_LENGTH = 20


@dataclass
class Sequence:
    correlation_id: int | str
    steps: list[Any]
    length: int
    position: int = 0


class SequencePlayer:
    """Hands out the next request of a sequence that has none in flight, starting new sequences as needed.
    Each new sequence plays the next stream of data; its length is ``length`` (± ``variation_pct``), or
    the stream's own length when no length is given. Correlation ids count up from ``first_id``; with
    ``end_id`` they cycle through [first_id, end_id), skipping the ids of live sequences."""

    def __init__(self, streams: list[list[Any]], length: int | None, variation_pct: float, first_id: int,
                 string_ids: bool = False, seed: int = 0, end_id: int | None = None):
        self._streams = streams
        self._length = length
        self._variation = variation_pct / 100
        self._first_id, self._end_id = first_id, end_id
        self._next_id = first_id
        self._live: set[int] = set()
        self._string_ids = string_ids
        self._next_stream = 0
        self._idle: list[Sequence] = []
        self._rng = random.Random(seed)

    def take(self) -> tuple[Sequence, Any, dict[str, Any]]:
        """A sequence, its next request, and the sequence parameters of that request."""
        sequence = self._idle.pop(0) if self._idle else self._start()
        return self._next_request(sequence)

    def take_endings(self) -> list[tuple[Sequence, Any, dict[str, Any]]]:
        """The closing request of every live sequence (called once none has a request in flight):
        its next step, flagged end; ``give_back`` then retires the sequence."""
        endings = []
        for sequence in self._idle:
            sequence.length = sequence.position + 1
            endings.append(self._next_request(sequence))
        self._idle = []
        return endings

    @staticmethod
    def _next_request(sequence: Sequence) -> tuple[Sequence, Any, dict[str, Any]]:
        step = sequence.position
        sequence.position += 1
        parameters = {"sequence_id": sequence.correlation_id, "sequence_start": step == 0,
                      "sequence_end": sequence.position == sequence.length}
        return sequence, sequence.steps[step % len(sequence.steps)], parameters

    def give_back(self, sequence: Sequence) -> None:
        """The request of ``sequence`` has completed: it may send its next one, unless it has ended."""
        if sequence.position < sequence.length:
            self._idle.append(sequence)
        else:
            self._live.discard(int(sequence.correlation_id))

    def _start(self) -> Sequence:
        steps = self._streams[self._next_stream % len(self._streams)]
        self._next_stream += 1
        number = self._take_id()
        correlation_id: int | str = str(number) if self._string_ids else number
        return Sequence(correlation_id, steps, self._pick_length(len(steps)))

    def _take_id(self) -> int:
        if self._end_id is None:
            number = self._next_id
            self._next_id += 1
            return number
        span = self._end_id - self._first_id
        for _ in range(span):
            number = self._next_id
            self._next_id = self._first_id + (self._next_id + 1 - self._first_id) % span
            if number not in self._live:
                self._live.add(number)
                return number
        raise RuntimeError(f"--sequence-id-range {self._first_id}:{self._end_id}: all {span} ids belong to live "
                           "sequences; give a wider range")

    def _pick_length(self, stream_length: int) -> int:
        if self._length is None:
            return stream_length
        spread = self._length * self._variation
        return max(1, round(self._rng.uniform(self._length - spread, self._length + spread)))
