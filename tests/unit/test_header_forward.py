"""core/header_forward.py: which headers a forward pattern turns into request parameters, for any
header a client can send (names and values are outside input)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonctl.serve.core.header_forward import HeaderForwarding, HeaderPatternError, header_forwarding

TOKEN = st.text(st.sampled_from("abcXYZ_-019"), min_size=1, max_size=12)
NAMES = st.one_of(TOKEN, st.binary(max_size=20))
VALUES = st.one_of(st.text(max_size=30), st.binary(max_size=30))


@settings(deadline=None)  # the first example compiles the pattern after importing RE2
@given(literal=TOKEN, headers=st.lists(st.tuples(NAMES, VALUES), max_size=8))
def test_a_literal_pattern_forwards_the_names_that_contain_it_in_any_case(literal, headers):
    forwarded = HeaderForwarding(literal, "--http-header-forward-pattern").parameters(headers)
    names = [name.decode("latin-1") if isinstance(name, bytes) else name for name, _ in headers]
    assert set(forwarded) == {name for name in names if literal.lower() in name.lower()}
    assert all(isinstance(value, str) and "\0" not in value for value in forwarded.values())


def test_values_are_c_strings_and_the_last_of_a_repeated_name_wins():
    forwarding = HeaderForwarding("^x", "--grpc-header-forward-pattern")
    assert forwarding.parameters([(b"x-bin", b"ab\x00cd"), ("x", "1"), ("x", "2"), ("y", "3")]) == \
        {"x-bin": "ab", "x": "2"}
    assert forwarding.parameters([(b"x", b"\xff")]) == {"x": "\ufffd"}  # not UTF-8: replaced, never an error


def test_case_insensitive_unless_the_pattern_turns_it_off():
    assert HeaderForwarding("MY_.*", "f").parameters([("my_a", "1")]) == {"my_a": "1"}
    assert HeaderForwarding("(?-i)MY_.*", "f").parameters([("my_a", "1"), ("MY_b", "2")]) == {"MY_b": "2"}
    assert HeaderForwarding("", "f").parameters([("any", "1")]) == {"any": "1"}  # "(?i)" alone matches all


def test_no_flag_forwards_nothing_and_a_bad_pattern_says_why():
    assert header_forwarding(None, "--http-header-forward-pattern") is None
    with pytest.raises(HeaderPatternError) as caught:
        header_forwarding("a(", "--http-header-forward-pattern")
    message = str(caught.value)
    assert message.startswith("--http-header-forward-pattern 'a(' is not a regular expression tritonserver accepts "
                              "(missing ): a()")
    assert "RE2 syntax" in message and "(?-i)" in message


def test_a_transport_built_before_it_could_keep_headers_is_refused_only_when_asked_to():
    from tritonctl.serve.native_front_end import make_transport

    def old_build(address):  # a transport's constructor without the keep_* argument, as older builds have
        return address

    assert make_transport(lambda **keep: old_build("a", **keep), {}, "gRPC", "aio") == "a"
    with pytest.raises(RuntimeError, match="this build of the C\\+\\+ gRPC transport cannot forward headers as "
                                           "request parameters; reinstall tritonctl from source .*, or use the aio"):
        make_transport(lambda **keep: old_build("a", **keep), {"keep_metadata": True}, "gRPC", "aio")
