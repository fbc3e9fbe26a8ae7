"""Errors of the data plane, carrying Triton's status codes and their HTTP / gRPC mapping."""

from __future__ import annotations

import enum


class Status(enum.Enum):
    """Triton's error codes with (HTTP status, gRPC status name) as Triton maps them."""

    INTERNAL = (500, "INTERNAL")
    NOT_FOUND = (404, "NOT_FOUND")
    UNAVAILABLE = (503, "UNAVAILABLE")
    UNSUPPORTED = (501, "UNIMPLEMENTED")
    INVALID_ARG = (400, "INVALID_ARGUMENT")
    ALREADY_EXISTS = (400, "ALREADY_EXISTS")
    CANCELLED = (400, "CANCELLED")
    UNKNOWN = (400, "UNKNOWN")

    @property
    def http_status(self) -> int:
        return self.value[0]

    @property
    def grpc_code_name(self) -> str:
        return self.value[1]


class ServeError(Exception):
    """An error answered to a client: a Triton status and a message naming what is at fault."""

    def __init__(self, status: Status, message: str, counted: bool = True):
        super().__init__(message)
        self.status = status
        self.message = message
        # False: a refusal at enqueue that Triton leaves out of the model's failure statistics
        self.counted = counted

    def __repr__(self) -> str:
        return f"ServeError({self.status.name}, {self.message!r})"


def invalid_arg(message: str) -> ServeError:
    return ServeError(Status.INVALID_ARG, message)


def not_found(message: str) -> ServeError:
    return ServeError(Status.NOT_FOUND, message)


def unavailable(message: str) -> ServeError:
    return ServeError(Status.UNAVAILABLE, message)


def internal(message: str) -> ServeError:
    return ServeError(Status.INTERNAL, message)
