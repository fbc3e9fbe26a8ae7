"""Request headers as request parameters: Triton's ``--http-header-forward-pattern`` and
``--grpc-header-forward-pattern`` (docs/protocol/extension_parameters.md, "Forwarding HTTP/GRPC
Headers as Parameters").

As tritonserver does it (2.51, measured against it): the pattern is an RE2 regular expression,
matched case-insensitively (tritonserver puts ``(?i)`` before it; ``(?-i)`` at its start turns
that off) against anywhere in each header's name (RE2's PartialMatch, not a full match). Every
header that matches becomes a string parameter named as the header was sent (HTTP keeps the
client's spelling; gRPC metadata names are lower case on the wire), after the request's own
parameters: a header named like one of them replaces its value. Reserved names (``triton_*``,
``sequence_id``, ``priority``, ...) are forwarded like any other name: they only become
parameters the model sees, never request options. Without the flag nothing is forwarded. A value
is a C string there: it ends at its first NUL byte (possible only in a binary ``-bin`` gRPC
value).
"""

from __future__ import annotations

from typing import Iterable


class HeaderPatternError(ValueError):
    """A forward pattern that is not a regular expression RE2 accepts."""


class HeaderForwarding:
    """The headers ``pattern`` (the value of ``flag``) forwards: ``parameters(headers)``."""

    __slots__ = ("pattern", "_regex")

    def __init__(self, pattern: str, flag: str):
        import re2

        self.pattern = pattern
        options = re2.Options()
        options.log_errors = False  # the error is raised, with the flag's name, not logged by RE2
        try:
            re2.compile(pattern, options)  # its error names the pattern as the user wrote it
            self._regex = re2.compile("(?i)" + pattern, options)
        except re2.error as exc:
            reason = exc.args[0] if exc.args else exc
            if isinstance(reason, bytes):
                reason = reason.decode("utf-8", "replace")
            raise HeaderPatternError(
                f"{flag} {pattern!r} is not a regular expression tritonserver accepts ({reason}). It is RE2 syntax "
                "(no backreferences or lookarounds), matched case-insensitively anywhere in a header's name; "
                "'(?-i)' at its start makes it case-sensitive") from None

    def parameters(self, headers: Iterable[tuple]) -> dict[str, str]:
        """The parameters forwarded from ``headers``, (name, value) pairs of str or bytes; a name
        sent twice keeps its last value, as a repeated parameter does."""
        search = self._regex.search
        forwarded: dict[str, str] = {}
        for name, value in headers:
            if isinstance(name, bytes):
                name = name.decode("latin-1")
            if search(name) is None:
                continue
            if isinstance(value, bytes):
                value = value.split(b"\0", 1)[0].decode("utf-8", "replace")
            else:
                value = value.split("\0", 1)[0]
            forwarded[name] = value
        return forwarded


def header_forwarding(pattern: str | None, flag: str) -> HeaderForwarding | None:
    """The forwarding ``flag`` asks for; None when it was not given (nothing is forwarded)."""
    return None if pattern is None else HeaderForwarding(pattern, flag)
