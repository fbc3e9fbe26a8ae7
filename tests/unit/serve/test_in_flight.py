"""The server's record of requests taken and not yet answered, which a stop waits for and cuts."""

from __future__ import annotations

import asyncio
import threading

import numpy as np

from tritonctl.serve.core.errors import Status, unavailable
from tritonctl.serve.core.in_flight import InFlight
from tritonctl.serve.core.types import InferRequest, InferTensor


def request(model: str, answers: list, stream: bool = False) -> InferRequest:
    tensor = InferTensor("IN", "FP32", np.ones((1, 1), np.float32))
    made = InferRequest(model, {"IN": tensor}, complete=lambda response, error: answers.append((response, error)))
    if stream:
        made.stream = lambda response, error, final: answers.append((response, error, final))
    return made


def test_a_request_leaves_when_answered_once():
    in_flight, answers = InFlight(), []
    first, second = request("a", answers), request("b", answers)
    in_flight.add(first)
    in_flight.add(second)
    assert in_flight.by_model() == {"a": 1, "b": 1}
    first.finish(None, unavailable("x"))
    first.finish(None, unavailable("again"))  # ignored
    assert in_flight.by_model() == {"b": 1} and len(answers) == 1


def test_a_streamed_request_leaves_with_its_final_response_only():
    in_flight, answers = InFlight(), []
    streamed = request("d", answers, stream=True)
    in_flight.add(streamed)
    streamed.send(None, None, final=False)
    assert len(in_flight) == 1
    streamed.send(None, None, final=True)
    assert len(in_flight) == 0


def test_drained_waits_for_an_answer_from_another_thread():
    in_flight, answers = InFlight(), []
    pending = request("a", answers)
    in_flight.add(pending)

    async def main() -> bool:
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, lambda: threading.Thread(target=pending.finish, args=(None, None)).start())
        return await in_flight.drained(30)

    assert asyncio.run(main()) is True and len(in_flight) == 0


def test_drained_gives_up_at_its_timeout_and_cut_answers_what_is_left():
    in_flight, answers = InFlight(), []
    plain, streamed = request("stuck", answers), request("stuck", answers, stream=True)
    in_flight.add(plain)
    in_flight.add(streamed)
    assert asyncio.run(in_flight.drained(0.01)) is False
    cut = in_flight.cut(lambda model: unavailable(f"cut {model}"))
    assert cut == {"stuck": 2} and len(in_flight) == 0
    (response, error), (stream_response, stream_error, final) = answers
    assert response is None and error.status is Status.UNAVAILABLE and error.message == "cut stuck"
    assert stream_response is None and stream_error.message == "cut stuck" and final
    assert plain.cancelled and streamed.cancelled
    plain.finish(None, None)  # what the model sends later goes nowhere
    assert len(answers) == 2
