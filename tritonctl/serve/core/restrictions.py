"""Endpoint access limited by a header: Triton's ``--grpc-restricted-protocol`` and
``--http-restricted-api`` (docs/customization_guide/inference_protocols.md, "Limit Endpoint
Access").

As tritonserver 2.51 does it (src/command_line_parser.cc, grpc/grpc_server.cc,
http_server.cc): each flag is ``<category>[,<category>...]:<key>=<value>`` and may be given
again for other categories; a category may be in one group only. A call to a restricted category
must carry the header ``key`` with exactly ``value``, else it is refused: gRPC answers UNAVAILABLE
"This protocol is restricted, expecting header 'triton-grpc-protocol-<key>'" (the metadata key is
the key with that prefix), HTTP answers 403 ``{"error":"This API is restricted, expecting header
'<key>'"}``. The check runs before anything else of the call (its method, its body). Categories
not named stay open.
"""

from __future__ import annotations

from typing import Iterable

HEALTH = "health"
METADATA = "metadata"
INFERENCE = "inference"
SHARED_MEMORY = "shared-memory"
MODEL_CONFIG = "model-config"
MODEL_REPOSITORY = "model-repository"
STATISTICS = "statistics"
TRACE = "trace"
LOGGING = "logging"
CATEGORIES = (HEALTH, METADATA, INFERENCE, SHARED_MEMORY, MODEL_CONFIG, MODEL_REPOSITORY, STATISTICS, TRACE,
              LOGGING)

GRPC_KEY_PREFIX = "triton-grpc-protocol-"  # tritonserver's kRestrictedProtocolHeaderTemplate


class RestrictionError(ValueError):
    """A restriction flag that tritonserver refuses at startup."""


class Restrictions:
    """The header each restricted category requires: ``refusal(category, headers)``."""

    __slots__ = ("groups", "_kind")

    def __init__(self, groups: dict[str, tuple[str, str]], kind: str):
        self.groups = groups  # category -> (header key, value), the key as the client must send it
        self._kind = kind  # "protocol" (gRPC) or "API" (HTTP), as in the refusal's text

    def __bool__(self) -> bool:
        return bool(self.groups)

    def refusal(self, category: str, headers: Iterable[tuple]) -> str | None:
        """The refusal's message when ``headers`` ((name, value) pairs, str or bytes) lack the
        header ``category`` requires, else None. The first header of that name counts; a gRPC
        key is matched as it is (names are lower case on the wire), an HTTP name
        case-insensitively."""
        group = self.groups.get(category)
        if group is None:
            return None
        key, value = group
        exact = self._kind == "protocol"  # gRPC: tritonserver looks the key up as it is
        wanted = key if exact else key.lower()
        for name, sent in headers:
            if isinstance(name, bytes):
                name = name.decode("latin-1")
            if (name if exact else name.lower()) != wanted:
                continue
            if isinstance(sent, bytes):
                sent = sent.decode("latin-1")
            if sent == value:
                return None
            break
        return f"This {self._kind} is restricted, expecting header '{key}'"


def parse_restrictions(values: Iterable[str], flag: str, kind: str, key_prefix: str = "") -> Restrictions:
    """The restrictions ``flag`` (each of ``values``) asks for; ``kind``: "protocol" or "api", the
    word tritonserver's messages use. Raises RestrictionError for what tritonserver refuses."""
    groups: dict[str, tuple[str, str]] = {}
    for value in values:
        categories, key, expected = _split(value, flag)
        for category in categories.split(","):
            if category not in CATEGORIES:
                raise RestrictionError(
                    f"{flag}: unknown restricted {kind} '{category}' in {value!r}; the categories are "
                    f"{', '.join(CATEGORIES)}")
            if category in groups:
                raise RestrictionError(
                    f"{flag}: restricted {kind} '{category}' can not be specified in multiple config groups; "
                    f"name it in one {flag} only")
            groups[category] = (key_prefix + key, expected)
    return Restrictions(groups, "protocol" if kind == "protocol" else "API")


def _split(value: str, flag: str) -> tuple[str, str, str]:
    """``<categories>:<key>=<value>`` as tritonserver splits it: at the first ':' and the first
    '=' after it; none of the three may be empty."""
    colon = value.find(":")
    equals = value.find("=", colon + 1) if colon >= 0 else -1
    if colon >= 0 and equals >= 0:
        categories, key, expected = value[:colon], value[colon + 1:equals], value[equals + 1:]
        if categories and key and expected:
            return categories, key, expected
    raise RestrictionError(
        f"{flag} option format is '<config name>:<setting>=<value>'. Got {value}: give the categories "
        f"(comma-separated, of {', '.join(CATEGORIES)}), a ':', the header's name, '=' and the value it must "
        f"have, e.g. {flag}=model-repository,statistics:admin-key=secret")


def grpc_restrictions(values: Iterable[str]) -> Restrictions:
    return parse_restrictions(values, "--grpc-restricted-protocol", "protocol", GRPC_KEY_PREFIX)


def http_restrictions(values: Iterable[str]) -> Restrictions:
    return parse_restrictions(values, "--http-restricted-api", "api")
