"""JSON read as Triton's HTTP front end reads it (RapidJSON, with NaN and Infinity): the same
values (integers up to 64 bits, larger ones and decimals as RapidJSON's doubles, duplicate keys
kept in order, the document ending at a NUL byte, a UTF-8 BOM skipped, any bytes in strings) and
the same refusals, "Invalid value. at 1" with RapidJSON's byte offset.

``read`` parses with Python's C scanner where the document allows it and falls back to the
iterative reader here (no recursion: nesting of any depth is read, never a crash); ``syntax_error``
runs the reader only to name what is wrong with a document another parser refused."""

from __future__ import annotations

import json
import math
import re

EMPTY = "The document is empty."
NOT_SINGULAR = "The document root must not be followed by other values."
INVALID_VALUE = "Invalid value."
MISS_NAME = "Missing a name for object member."
MISS_COLON = "Missing a colon after a name of object member."
MISS_COMMA_OBJECT = "Missing a comma or '}' after an object member."
MISS_COMMA_ARRAY = "Missing a comma or ']' after an array element."
BAD_HEX = "Incorrect hex digit after \\u escape in string."
BAD_SURROGATE = "The surrogate pair in string is invalid."
BAD_ESCAPE = "Invalid escape character in string."
MISS_QUOTE = "Missing a closing quotation mark in string."
TOO_BIG = "Number too big to be stored in double."
MISS_FRACTION = "Miss fraction part in number."
MISS_EXPONENT = "Miss exponent in number."

# Where the description of a refused document stops being worth its time: past this, the other
# parser's own words are kept.
DESCRIBE_LIMIT = 16 << 20

_WHITESPACE = re.compile(rb"[ \t\n\r]*")
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')
_HIGH_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB]")
_ESCAPES = {ord('"'): b'"', ord("\\"): b"\\", ord("/"): b"/", ord("b"): b"\b", ord("f"): b"\f",
            ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t"}
_HEX = {c: int(chr(c), 16) for c in b"0123456789abcdefABCDEF"}
_DIGITS = frozenset(b"0123456789")
_POW10 = [float(f"1e{n}") for n in range(309)]
_DOUBLE_MAX = 1.7976931348623157e308


class Pairs(list):
    """A JSON object: its (key, value) members in document order, duplicates kept."""

    def first(self, key: str, default=None):
        """The value of the first member named ``key`` (what Triton's lookups find)."""
        for name, value in self:
            if name == key:
                return value
        return default

    def keys(self) -> list[str]:
        return [name for name, _ in self]


class _OpenObject:
    """An object being read: its members so far and the name of the one whose value comes next."""

    __slots__ = ("members", "name")

    def __init__(self, name: str):
        self.members = Pairs()
        self.name = name


class JsonSyntaxError(ValueError):
    """A document RapidJSON refuses: its message and the byte offset it names."""

    def __init__(self, message: str, offset: int):
        super().__init__(f"{message} at {offset}")
        self.message = message
        self.offset = offset


def read(buffer) -> object:
    """The document's value (objects as Pairs); JsonSyntaxError where RapidJSON refuses it."""
    data, start = _document(buffer)
    if not _HIGH_SURROGATE_ESCAPE.search(data):  # Python takes a lone high surrogate, RapidJSON does not
        try:
            text = data[start:].decode("utf-8")
            return json.loads(text, object_pairs_hook=Pairs, parse_int=_literal, parse_float=_literal)
        except (ValueError, RecursionError):
            pass
    return _Reader(data).document(start)


def syntax_error(buffer) -> str | None:
    """RapidJSON's "MESSAGE at OFFSET" for a document it refuses; None where it reads the
    document, or where the document is too large to be worth describing."""
    if len(buffer) > DESCRIBE_LIMIT:
        return None
    data, start = _document(buffer)
    try:
        _Reader(data).document(start)
    except JsonSyntaxError as exc:
        return str(exc)
    return None


def _document(buffer) -> tuple[bytes, int]:
    """The bytes RapidJSON reads (up to a NUL, which ends its input) and where it starts: after
    the bytes of a UTF-8 BOM, each skipped where it comes in its place."""
    data = bytes(buffer)
    nul = data.find(b"\0")
    if nul >= 0:
        data = data[:nul]
    start = 0
    for byte in (0xEF, 0xBB, 0xBF):
        if start < len(data) and data[start] == byte:
            start += 1
    return data, start


def _literal(text: str):
    """A number literal as RapidJSON's value: an int within 64 bits, else its double."""
    if "." not in text and "e" not in text and "E" not in text and len(text) < 20:
        return int(text)
    value, end = _number(text.encode(), 0)
    if end != len(text):  # cannot happen for Python's literals; kept strict
        raise ValueError(text)
    return value


def _number(data: bytes, pos: int):
    """(value, end) of the number at ``pos``, computed as RapidJSON computes it without its
    full-precision flag (NaN and Infinity included)."""
    start = pos
    end = len(data)

    def peek(at: int) -> int:
        return data[at] if at < end else 0

    minus = peek(pos) == 0x2D
    pos += minus
    i = 0
    i64 = 0
    use64 = False
    digits = 0  # RapidJSON's significandDigit
    nan_or_inf = None
    c = peek(pos)
    if c == 0x30:
        pos += 1
    elif 0x31 <= c <= 0x39:
        i = c - 0x30
        pos += 1
        limit, last = (214748364, 0x38) if minus else (429496729, 0x35)
        while peek(pos) in _DIGITS:
            if i >= limit and (i != limit or peek(pos) > last):
                i64, use64 = i, True
                break
            i = i * 10 + peek(pos) - 0x30
            pos += 1
            digits += 1
    elif c in (0x49, 0x4E):  # 'I', 'N'
        if c == 0x4E:
            pos += 1
            if peek(pos) == 0x61:
                pos += 1
                if peek(pos) == 0x4E:
                    pos += 1
                    nan_or_inf = math.nan
        else:
            pos += 1
            if peek(pos) == 0x6E:
                pos += 1
                if peek(pos) == 0x66:
                    pos += 1
                    nan_or_inf = -math.inf if minus else math.inf
                    if peek(pos) == 0x69:
                        for expected in b"inity":
                            if peek(pos) != expected:
                                raise JsonSyntaxError(INVALID_VALUE, pos)
                            pos += 1
        if nan_or_inf is None:
            raise JsonSyntaxError(INVALID_VALUE, pos)
    else:
        raise JsonSyntaxError(INVALID_VALUE, pos)
    use_double = False
    d = 0.0
    if use64:
        limit, last = (0x0CCCCCCCCCCCCCCC, 0x38) if minus else (0x1999999999999999, 0x35)
        while peek(pos) in _DIGITS:
            if i64 >= limit and (i64 != limit or peek(pos) > last):
                d, use_double = float(i64), True
                break
            i64 = i64 * 10 + peek(pos) - 0x30
            pos += 1
            digits += 1
    if use_double:
        while peek(pos) in _DIGITS:
            d = d * 10 + (peek(pos) - 0x30)
            pos += 1
    exp_frac = 0
    if peek(pos) == 0x2E:
        pos += 1
        if peek(pos) not in _DIGITS:
            raise JsonSyntaxError(MISS_FRACTION, pos)
        if not use_double:
            if not use64:
                i64 = i
            while peek(pos) in _DIGITS:
                if i64 > 0x1FFFFFFFFFFFFF:
                    break
                i64 = i64 * 10 + peek(pos) - 0x30
                pos += 1
                exp_frac -= 1
                if i64 != 0:
                    digits += 1
            d = float(i64)
            use_double = True
        while peek(pos) in _DIGITS:
            if digits < 17:
                d = d * 10.0 + (peek(pos) - 0x30)
                exp_frac -= 1
                if d > 0.0:
                    digits += 1
            pos += 1
    exp = 0
    if peek(pos) in (0x65, 0x45):  # 'e', 'E'
        pos += 1
        if not use_double:
            d = float(i64 if use64 else i)
            use_double = True
        exp_minus = False
        if peek(pos) == 0x2B:
            pos += 1
        elif peek(pos) == 0x2D:
            pos += 1
            exp_minus = True
        if peek(pos) not in _DIGITS:
            raise JsonSyntaxError(MISS_EXPONENT, pos)
        exp = peek(pos) - 0x30
        pos += 1
        if exp_minus:
            max_exp = (exp_frac + 2147483639) // 10
            while peek(pos) in _DIGITS:
                exp = exp * 10 + peek(pos) - 0x30
                pos += 1
                if exp > max_exp:
                    while peek(pos) in _DIGITS:
                        pos += 1
            exp = -exp
        else:
            max_exp = 308 - exp_frac
            while peek(pos) in _DIGITS:
                exp = exp * 10 + peek(pos) - 0x30
                pos += 1
                if exp > max_exp:
                    raise JsonSyntaxError(TOO_BIG, start)
    if use_double:
        d = _normal_precision(d, exp + exp_frac)
        if d > _DOUBLE_MAX:
            raise JsonSyntaxError(TOO_BIG, start)
        return (-d if minus else d), pos
    if nan_or_inf is not None:
        return nan_or_inf, pos
    magnitude = i64 if use64 else i
    return (-magnitude if minus else magnitude), pos


def _normal_precision(d: float, p: int) -> float:
    if p < -308:
        return _fast_path(_fast_path(d, -308), p + 308)
    return _fast_path(d, p)


def _fast_path(significand: float, exp: int) -> float:
    if exp < -308:
        return 0.0
    if exp >= 0:
        return significand * _POW10[exp]
    return significand / _POW10[-exp]


class _Reader:
    """RapidJSON's reader over bytes, iterative: containers on a stack of their own."""

    def __init__(self, data: bytes):
        self.data = data
        self.end = len(data)

    def peek(self, pos: int) -> int:
        return self.data[pos] if pos < self.end else 0

    def skip(self, pos: int) -> int:
        return _WHITESPACE.match(self.data, pos).end()

    def document(self, pos: int):
        pos = self.skip(pos)
        if pos >= self.end:
            raise JsonSyntaxError(EMPTY, pos)
        value, pos = self.value(pos)
        pos = self.skip(pos)
        if pos < self.end:
            raise JsonSyntaxError(NOT_SINGULAR, pos)
        return value

    def value(self, pos: int):
        stack: list = []  # open containers: a list, or an _OpenObject
        while True:
            c = self.peek(pos)
            if c == 0x7B:  # '{'
                pos = self.skip(pos + 1)
                if self.peek(pos) == 0x7D:
                    value, pos = Pairs(), pos + 1
                else:
                    key, pos = self.member_name(pos)
                    stack.append(_OpenObject(key))
                    continue
            elif c == 0x5B:  # '['
                pos = self.skip(pos + 1)
                if self.peek(pos) == 0x5D:
                    value, pos = [], pos + 1
                else:
                    stack.append([])
                    continue
            elif c == 0x22:
                value, pos = self.string(pos)
            elif c in (0x6E, 0x74, 0x66):  # null, true, false
                value, pos = self.literal(pos, c)
            else:
                value, pos = _number(self.data, pos)
            while True:  # the value goes into its container; a closed container goes up in turn
                if not stack:
                    return value, pos
                top = stack[-1]
                pos = self.skip(pos)
                c = self.peek(pos)
                if type(top) is list:
                    top.append(value)
                    if c == 0x2C:
                        pos = self.skip(pos + 1)
                        break
                    if c != 0x5D:
                        raise JsonSyntaxError(MISS_COMMA_ARRAY, pos)
                else:
                    top.members.append((top.name, value))
                    if c == 0x2C:
                        top.name, pos = self.member_name(self.skip(pos + 1))
                        break
                    if c != 0x7D:
                        raise JsonSyntaxError(MISS_COMMA_OBJECT, pos)
                    top = top.members
                stack.pop()
                value, pos = top, pos + 1

    def member_name(self, pos: int) -> tuple[str, int]:
        """The name at ``pos`` and where its value starts (after the colon)."""
        if self.peek(pos) != 0x22:
            raise JsonSyntaxError(MISS_NAME, pos)
        key, pos = self.string(pos)
        pos = self.skip(pos)
        if self.peek(pos) != 0x3A:
            raise JsonSyntaxError(MISS_COLON, pos)
        return key, self.skip(pos + 1)

    def literal(self, pos: int, first: int):
        word, value = {0x6E: (b"null", None), 0x74: (b"true", True), 0x66: (b"false", False)}[first]
        for at, expected in enumerate(word):
            if self.peek(pos + at) != expected:
                raise JsonSyntaxError(INVALID_VALUE, pos + at)
        return value, pos + len(word)

    def string(self, pos: int) -> tuple[str, int]:
        """The string whose quote is at ``pos``: bytes that are not UTF-8 kept (surrogateescape),
        a lone low surrogate escape kept as RapidJSON encodes it."""
        data = self.data
        pos += 1
        parts = []
        while True:
            match = _PLAIN.match(data, pos)
            parts.append(match.group())
            pos = match.end()
            c = self.peek(pos)
            if c == 0x22:
                return b"".join(parts).decode("utf-8", "surrogateescape"), pos + 1
            if c == 0x5C:
                escape = pos
                e = self.peek(pos + 1)
                if e in _ESCAPES:
                    parts.append(_ESCAPES[e])
                    pos += 2
                    continue
                if e != 0x75:  # 'u'
                    raise JsonSyntaxError(BAD_ESCAPE, escape)
                code, pos = self.hex4(pos + 2, escape)
                if 0xD800 <= code <= 0xDBFF:
                    if self.peek(pos) != 0x5C or self.peek(pos + 1) != 0x75:
                        raise JsonSyntaxError(BAD_SURROGATE, escape)
                    low, pos = self.hex4(pos + 2, escape)
                    if not 0xDC00 <= low <= 0xDFFF:
                        raise JsonSyntaxError(BAD_SURROGATE, escape)
                    code = ((code - 0xD800) << 10 | (low - 0xDC00)) + 0x10000
                parts.append(chr(code).encode("utf-8", "surrogatepass"))
                continue
            raise JsonSyntaxError(MISS_QUOTE if pos >= self.end else BAD_ESCAPE, pos)  # a control character

    def hex4(self, pos: int, escape: int) -> tuple[int, int]:
        code = 0
        for at in range(pos, pos + 4):
            digit = _HEX.get(self.peek(at))
            if digit is None:
                raise JsonSyntaxError(BAD_HEX, escape)
            code = code * 16 + digit
        return code, pos + 4
