"""core/restrictions.py: how --grpc-restricted-protocol / --http-restricted-api values are split
(as tritonserver's ParseGenericConfigOption: the first ':', then the first '=' after it) and which
headers pass a restriction."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonctl.serve.core.restrictions import (CATEGORIES, RestrictionError, grpc_restrictions, http_restrictions,
                                               parse_restrictions)

keys = st.text(min_size=1).filter(lambda s: "=" not in s)
values = st.text(min_size=1)


@given(st.lists(st.sampled_from(CATEGORIES), min_size=1, unique=True), keys, values)
def test_a_well_formed_value_restricts_each_category_to_its_header(categories, key, value):
    parsed = http_restrictions([f"{','.join(categories)}:{key}={value}"])
    assert parsed.groups == {category: (key, value) for category in categories}
    assert grpc_restrictions([f"{','.join(categories)}:{key}={value}"]).groups[categories[0]] == \
        ("triton-grpc-protocol-" + key, value)


@given(st.text())
def test_any_value_parses_or_is_refused_with_the_flag_named(text):
    try:
        parse_restrictions([text], "--http-restricted-api", "api")
    except RestrictionError as exc:
        assert str(exc).startswith("--http-restricted-api")


def test_refusals_name_the_header_and_only_the_exact_value_passes():
    http = http_restrictions(["inference:Infer-Key=v:1=2"])  # the value keeps its ':' and '='
    assert http.refusal("inference", [(b"infer-key", b"v:1=2")]) is None
    assert http.refusal("inference", [(b"infer-key", b"v:1=2 ")]) == \
        "This API is restricted, expecting header 'Infer-Key'"
    assert http.refusal("inference", []) is not None
    assert http.refusal("metadata", []) is None  # not restricted
    grpc = grpc_restrictions(["health:k=v"])
    assert grpc.refusal("health", [("triton-grpc-protocol-k", "v")]) is None
    assert grpc.refusal("health", [("k", "v")]) == \
        "This protocol is restricted, expecting header 'triton-grpc-protocol-k'"
    # the first header of the name counts, as tritonserver's lookup finds the first
    assert grpc.refusal("health", [("triton-grpc-protocol-k", "x"), ("triton-grpc-protocol-k", "v")]) is not None
    assert not grpc_restrictions([])


@pytest.mark.parametrize("value", ["health", "health:k", "health:=v", "health:k=", ":k=v", "health=k:v"])
def test_malformed_values_are_refused_with_tritonservers_text(value):
    with pytest.raises(RestrictionError, match=rf"--grpc-restricted-protocol option format is "
                                               rf"'<config name>:<setting>=<value>'\. Got {value}:"):
        grpc_restrictions([value])
