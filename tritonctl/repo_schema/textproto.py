"""Parse protobuf text format into a message while recording where each field is.

protobuf's own ``text_format`` accepts the same language but keeps no positions
and stops at the first problem with a terse message. This parser walks the same
descriptors (Triton's ``ModelConfig``), so it accepts exactly what the schema
allows, and reports every problem it can with line:col, a "did you mean" and a
fix. ``tests/unit/test_textproto.py`` checks it against ``text_format``.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import descriptor as _d
from google.protobuf import message_factory

from tritonctl.repo_schema.diagnostics import Diagnostic, Severity, register
from tritonctl.repo_schema.examples import IO, Example
from tritonctl.repo_schema.sourcemap import SourceMap

SYNTAX = register(
    "TXT01", "config.pbtxt is not valid protobuf text format", "error",
    """
    Triton parses config.pbtxt with protobuf's text-format parser. When parsing fails,
    Triton only says "failed to read text proto from <path>" in the load API; the
    real reason is on a separate libprotobuf log line. Typical causes: a missing or
    extra brace, a missing colon after a scalar field, an unterminated string.
    """, "TXT-01",
    example=Example(
        'backend: "python"\nmax_batch_size: 8\ninput [\n  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }\n'
    ))
UNREADABLE = register(
    "TXT08", "config file cannot be read", "error",
    """
    The config file (or its model directory) exists but cannot be read, most often
    for lack of permission. Triton fails to load the model. Make the file readable by
    the user the server runs as (for example chmod a+r), and its directories
    searchable (chmod a+x).
    """)
NOT_UTF8 = register(
    "TXT54", "config file is not UTF-8", "warning",
    """
    The config file has bytes that are not UTF-8, usually a comment or name saved in a
    legacy encoding such as Latin-1. Protobuf text format is UTF-8: such bytes in a name
    or string value make it an invalid protobuf string (tritonctl shows them as U+FFFD),
    and the names Triton reports in JSON are garbled. Save the file as UTF-8.
    """)
UNKNOWN_FIELD = register(
    "TXT02", "unknown field", "error",
    """
    The field name does not exist in Triton's ModelConfig schema at this place, so
    Triton refuses the whole file. Configs use `input`/`output`/`data_type`/`dims`
    and `TYPE_FP32`; the metadata and HTTP APIs use `inputs`/`datatype`/`shape` and
    `FP32` - mixing the two vocabularies is the most common cause.
    """, "TXT-02",
    example=Example(
        'backend: "python"\nmax_batch_size: 8\ninputs [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    ))
WRONG_TYPE = register(
    "TXT03", "value of the wrong type", "error",
    """
    Each field has a type: integers must be integers in range (unsigned fields take
    no minus sign), strings must be quoted, booleans are true/false, messages are
    written in braces. Triton fails with "Expected integer, got: ..." and similar.
    """, "TXT-03",
    example=Example('backend: "python"\nmax_batch_size: "8"\n' + IO))
UNKNOWN_ENUM = register(
    "TXT04", "unknown enum value", "error",
    """
    Enum values must be written exactly as declared (case-sensitive), or as their
    number: data types are TYPE_BOOL, TYPE_UINT8 ... TYPE_FP16, TYPE_FP32, TYPE_FP64,
    TYPE_STRING, TYPE_BF16; instance kinds are KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL.
    """, "TXT-04",
    example=Example(
        'backend: "python"\nmax_batch_size: 8\ninput [ { name: "INPUT0" data_type: FP32 dims: [ 4 ] } ]\n'
    ))
ONEOF_CONFLICT = register(
    "TXT05", "two members of a oneof are set", "error",
    """
    Some fields exclude each other: dynamic_batching, sequence_batching and
    ensemble_scheduling (scheduling_choice); latest/all/specific in version_policy;
    direct/oldest in sequence_batching; zero_data/data_file in initial_state;
    zero_data/random_data/input_data_file in warmup inputs. Keep exactly one.
    """, "TXT-05",
    example=Example('backend: "python"\nmax_batch_size: 8\ndynamic_batching { }\nsequence_batching { }\n' + IO))
DUPLICATE_FIELD = register(
    "TXT06", "non-repeated field written twice", "error",
    """
    A field that holds one value was written twice in the same message. protobuf's
    parser refuses this, so Triton does not load the model. Remove one of them.
    """, "TXT-06",
    example=Example('backend: "python"\nmax_batch_size: 8\nmax_batch_size: 16\n' + IO))
KEYLESS_MAP_ENTRY = register(
    "TXT07", "map entry without a key", "warning",
    """
    Map fields (parameters, input_map, output_map, cc_model_filenames, metric_tags,
    warmup inputs, accelerator parameters, priority_queue_policy) are written as
    entries `{ key: ... value: ... }`. An entry without `key` is not an error: protobuf
    gives it the default key ("" or 0), so `parameters: {}`, written for "no parameters"
    by tools that dump configs, adds a parameter named "". Write the key, or remove
    the entry.
    """, "TXT-07",
    example=Example('backend: "python"\nmax_batch_size: 8\nparameters { value { string_value: "on" } }\n' + IO))
PLACEHOLDER = register(
    "TXT11", "unfilled template placeholder", "error",
    """
    The file still contains a `${...}` template variable where a value belongs.
    Templates such as TensorRT-LLM's are filled with tools/fill_template.py before
    Triton can read them; Triton itself only says "Expected integer, got: $". Each
    placeholder is one error and the rest of the file is still checked, with the field
    left unset (a placeholder max_batch_size counts as batching).
    `tritonctl validate --set NAME=VALUE` fills placeholders before checking.
    """, "TXT-03",
    example=Example('backend: "python"\nmax_batch_size: ${max_batch_size}\n' + IO))
PLACEHOLDER_IN_STRING = register(
    "TXT51", "template placeholder inside a string", "warning",
    """
    A quoted string contains `${...}`. Triton accepts it as literal text, which is
    almost never what was meant: the template was probably not filled in.
    """, "NC-15",
    example=Example(
        'backend: "python"\nmax_batch_size: 8\nparameters { key: "engine" value { '
        'string_value: "${engine_dir}/rank0.engine" } }\n' + IO
    ))
PARAMETER_PLACEHOLDERS = register(
    "TXT53", "parameters left as template placeholders", "info",
    """
    TensorRT-LLM's templates leave optional parameters as `string_value: "${name}"`
    after tools/fill_template.py has filled the required ones, and its models read such
    a value as unset. Triton passes the text on as it is. This note lists them once;
    fill any you meant to set with --set NAME=VALUE (or fill_template.py).
    """, "NC-15",
    example=Example(
        'backend: "python"\nmax_batch_size: 8\nparameters { key: "engine_dir" value { '
        'string_value: "${engine_dir}" } }\n' + IO
    ))
DUPLICATE_MAP_KEY = register(
    "TXT52", "map key written twice", "warning",
    """
    In protobuf text format the last entry with a key silently wins, so the earlier
    value is ignored without any message from Triton.
    """, "TXT-07",
    example=Example(
        'backend: "python"\nmax_batch_size: 8\nparameters { key: "mode" value { string_value: "a" } }\n'
        'parameters { key: "mode" value { string_value: "b" } }\n' + IO
    ))

_TOKEN = re.compile(
    r"""
     (?P<ws>[ \t\r\n\f\v]+|\#[^\n]*)
    |(?P<placeholder>\$\{[^}\n]*\}?|\$[A-Za-z_]\w*)
    |(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<badstring>["'][^\n]*)
    |(?P<number>-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?))
    |(?P<ident>-?[A-Za-z_][A-Za-z0-9_]*)
    |(?P<sym>[{}\[\]<>:,;])
    |(?P<other>.)
    """,
    re.VERBOSE,
)

_INT_RANGES = {
    _d.FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    _d.FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    _d.FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    _d.FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    _d.FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    _d.FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    _d.FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    _d.FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    _d.FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    _d.FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_FLOATS = (_d.FieldDescriptor.TYPE_FLOAT, _d.FieldDescriptor.TYPE_DOUBLE)
_SIGNED_VALUE_TYPES = frozenset(_INT_RANGES) | set(_FLOATS) | {_d.FieldDescriptor.TYPE_ENUM}
_BOOLS = {"true": True, "True": True, "t": True, "1": True, "false": False, "False": False, "f": False, "0": False}
_OPENERS = {"{": "}", "<": ">", "[": "]"}


def is_repeated(fd) -> bool:
    """protobuf >= 6 has ``is_repeated`` and deprecates ``label``; older releases only have ``label``."""
    flag = getattr(fd, "is_repeated", None)
    return flag if isinstance(flag, bool) else fd.label == _d.FieldDescriptor.LABEL_REPEATED

# Names people write for a field, from other tools' vocabularies or memory.
FIELD_ALIASES = {
    "inputs": "input", "outputs": "output", "datatype": "data_type", "dtype": "data_type",
    "type": "data_type", "shape": "dims", "dim": "dims", "dimensions": "dims",
    "max_batch": "max_batch_size", "batch_size": "max_batch_size", "maxbatchsize": "max_batch_size",
    "instance_groups": "instance_group", "instances": "instance_group", "instance": "instance_group",
    "dynamic_batcher": "dynamic_batching", "dynamic_batch": "dynamic_batching", "batching": "dynamic_batching",
    "preferred_batch_sizes": "preferred_batch_size", "max_queue_delay_us": "max_queue_delay_microseconds",
    "max_queue_delay": "max_queue_delay_microseconds", "queue_delay_microseconds": "max_queue_delay_microseconds",
    "parameter": "parameters", "params": "parameters", "num_instances": "count", "gpu": "gpus",
    "devices": "gpus", "warmup": "model_warmup", "versions_policy": "version_policy",
    "sequence_batcher": "sequence_batching", "ensemble": "ensemble_scheduling", "steps": "step",
    "labels": "label_filename", "label_file": "label_filename", "cache": "response_cache",
}
ENUM_ALIASES = {
    "TYPE_FLOAT32": "TYPE_FP32", "TYPE_FLOAT": "TYPE_FP32", "FLOAT": "TYPE_FP32", "FLOAT32": "TYPE_FP32",
    "TYPE_FLOAT16": "TYPE_FP16", "TYPE_HALF": "TYPE_FP16", "FLOAT16": "TYPE_FP16", "HALF": "TYPE_FP16",
    "TYPE_FLOAT64": "TYPE_FP64", "TYPE_DOUBLE": "TYPE_FP64", "DOUBLE": "TYPE_FP64", "FLOAT64": "TYPE_FP64",
    "TYPE_BYTES": "TYPE_STRING", "BYTES": "TYPE_STRING", "STRING": "TYPE_STRING", "TYPE_STR": "TYPE_STRING",
    "TYPE_INT": "TYPE_INT32", "TYPE_LONG": "TYPE_INT64", "TYPE_BFLOAT16": "TYPE_BF16", "BFLOAT16": "TYPE_BF16",
    "KIND_CUDA": "KIND_GPU", "GPU": "KIND_GPU", "CUDA": "KIND_GPU", "CPU": "KIND_CPU", "AUTO": "KIND_AUTO",
}


@dataclass
class Token:
    kind: str
    text: str
    start: int
    end: int


@dataclass
class ParseResult:
    message: object | None  # the parsed message; None when the text has errors
    sourcemap: SourceMap
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Template variables filled from ``values`` (names), and the unfilled placeholders
    # left in typed fields, whose fields stay unset in ``message``.
    filled: set[str] = field(default_factory=set)
    placeholders: list[Diagnostic] = field(default_factory=list)
    placeholder_paths: list[tuple] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.message is not None


_SIMPLE_ESCAPES = {"a": b"\a", "b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t", "v": b"\v",
                   "\\": b"\\", "?": b"?", "'": b"'", '"': b'"'}
_ESCAPE = re.compile(r"""\\(?:[0-7]{1,3}|[xX][0-9a-fA-F]{1,2}
                            |u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}
                            |U00(?:0[0-9a-fA-F]|10)[0-9a-fA-F]{4}|.?)""", re.VERBOSE)
_ESCAPE_HINT = ("write a backslash as \\\\; the escapes are \\n \\t \\r \\\" \\' \\\\ \\a \\b \\f \\v \\?, "
                "\\ooo (octal), \\xhh, \\uhhhh and \\U00hhhhhh")


class BadEscape(ValueError):
    """An escape sequence protobuf's text-format tokenizer refuses."""

    def __init__(self, escape: str, offset: int, reason: str):
        super().__init__(reason)
        self.escape = escape
        self.offset = offset
        self.reason = reason


def _escape_reason(escape: str) -> str:
    kind = escape[1:2]
    if kind in ("x", "X"):
        return "\\x needs hex digits"
    if kind == "u":
        return "\\u needs exactly four hex digits"
    if kind == "U":
        return "\\U needs eight hex digits, at most 0010ffff"
    return "protobuf knows no such escape"


def c_unescape(body: str) -> bytes:
    """The bytes of a string literal's body, unescaped as protobuf's C++ tokenizer does
    (the parser Triton uses); raises BadEscape where that tokenizer reports an error."""
    out = bytearray()
    last = 0
    for match in _ESCAPE.finditer(body):
        out += body[last:match.start()].encode("utf-8", "surrogatepass")
        escape = match.group()
        out += _unescape_one(escape, match.start())
        last = match.end()
    out += body[last:].encode("utf-8", "surrogatepass")
    return bytes(out)


def _unescape_one(escape: str, offset: int) -> bytes:
    kind = escape[1:2]
    if kind in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[kind]
    if kind.isdigit() and kind < "8":
        return bytes([int(escape[1:], 8) & 0xFF])
    if kind in ("x", "X") and len(escape) > 2:
        return bytes([int(escape[2:], 16)])
    if kind == "u" and len(escape) == 12:
        high, low = int(escape[2:6], 16), int(escape[8:12], 16)
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)).encode("utf-8")
    if kind in ("u", "U") and len(escape) > 2:
        return chr(int(escape[2:], 16)).encode("utf-8", "surrogatepass")
    raise BadEscape(escape, offset, _escape_reason(escape))


def _is_bad_octal(digits: str) -> bool:
    return len(digits) > 1 and digits.startswith("0") and digits.isdigit() and any(c in "89" for c in digits)


def _integer(digits: str) -> int:
    if digits.lower().startswith("0x"):
        return int(digits, 16)
    if len(digits) > 1 and digits.startswith("0"):
        return int(digits, 8)
    return int(digits)


class _Fatal(Exception):
    """A syntax error after which the rest of the text cannot be trusted."""


def tokenize(text: str) -> list[Token]:
    return [
        Token(m.lastgroup, m.group(), m.start(), m.end())
        for m in _TOKEN.finditer(text)
        if m.lastgroup != "ws"
    ]


# A template variable as TensorRT-LLM's tools/fill_template.py (string.Template) reads it.
_TEMPLATE_VARIABLE = re.compile(r"\$(?:\{([_A-Za-z][_A-Za-z0-9]*)\}|([_A-Za-z][_A-Za-z0-9]*))")


@dataclass(frozen=True)
class _Fill:
    """One filled placeholder: where it was in the original text and where its value is."""

    start: int
    end: int
    new_start: int
    new_end: int


def fill_template(text: str, values: dict[str, str]) -> tuple[str, list[_Fill], set[str]]:
    """``text`` with the ``${NAME}`` / ``$NAME`` placeholders named in ``values`` replaced,
    the replacements made, and the names used. Other placeholders stay as they are."""
    out: list[str] = []
    fills: list[_Fill] = []
    used: set[str] = set()
    last = shift = 0
    for match in _TEMPLATE_VARIABLE.finditer(text):
        name = match.group(1) or match.group(2)
        if name not in values:
            continue
        value = values[name]
        out.append(text[last:match.start()])
        new_start = match.start() + shift
        out.append(value)
        fills.append(_Fill(match.start(), match.end(), new_start, new_start + len(value)))
        shift += len(value) - (match.end() - match.start())
        last = match.end()
        used.add(name)
    out.append(text[last:])
    return "".join(out), fills, used


def _original_offset(fills: list[_Fill], offset: int, is_end: bool) -> int:
    """The offset in the original text for ``offset`` in the filled text: a position
    inside a filled value maps to its placeholder's start (or end, for an end offset)."""
    before = 0
    for fill in fills:
        if offset < fill.new_start or (is_end and offset == fill.new_start):
            break
        if offset < fill.new_end or (is_end and offset == fill.new_end):
            return fill.end if is_end else fill.start
        before = fill.end - fill.new_end
    return offset + before


def parse(text: str, message_class, path: Path | None = None,
          values: dict[str, str] | None = None) -> ParseResult:
    """Parse ``text`` into a new ``message_class``; never raises on bad input.

    ``values`` fill template placeholders first (``--set NAME=VALUE``); every position
    still refers to ``text``. Unfilled placeholders in typed fields are one TXT11 each and
    leave their field unset; the message is still returned so the rest can be checked.
    """
    filled, fills, used = fill_template(text, values) if values else (text, [], set())
    parser = _Parser(filled, path, text, fills)
    message = message_class()
    try:
        parser.parse_fields(message, (), closer=None, opener=None)
    except _Fatal:
        pass
    if parser.unset_parameters:
        names = ", ".join(dict.fromkeys(name for name, _, _ in parser.unset_parameters))
        _, start, end = parser.unset_parameters[0]
        parser.report(PARAMETER_PLACEHOLDERS, f"{len(parser.unset_parameters)} parameter value(s) are unfilled "
                      f"template placeholders, read as unset by TensorRT-LLM's models: {names}", start, end,
                      "fill the ones you mean to set with --set NAME=VALUE", severity=Severity.INFO)
    if fills:
        parser.sourcemap.entries = {
            key: (parser.original(a), parser.original(b, True), parser.original(c), parser.original(d, True))
            for key, (a, b, c, d) in parser.sourcemap.entries.items()}
    placeholders = [d for d in parser.diagnostics if d.code == PLACEHOLDER]
    ok = not any(d.severity is Severity.ERROR and d.code != PLACEHOLDER for d in parser.diagnostics)
    return ParseResult(message if ok else None, parser.sourcemap, parser.diagnostics, used, placeholders,
                       parser.placeholder_paths)


def did_you_mean(word: str, choices, aliases: dict[str, str] | None = None) -> str | None:
    choices = list(choices)
    if aliases and aliases.get(word) in choices:
        return aliases[word]
    for choice in choices:  # case and prefix slips: fp32 -> TYPE_FP32, kind_gpu -> KIND_GPU
        if word.lower() == choice.lower() or any(
            word.upper() == choice[len(prefix):] for prefix in ("TYPE_", "KIND_") if choice.startswith(prefix)
        ):
            return choice
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.75)
    return close[0] if close else None


class _Parser:
    def __init__(self, text: str, path: Path | None, original: str | None = None, fills: list[_Fill] = ()):
        self.text = text
        self.path = path
        self.tokens = tokenize(text)
        self.pos = 0
        self.fills = list(fills)
        self.original_text = text if original is None else original
        self.placeholder_paths: list[tuple] = []
        self.unset_parameters: list[tuple[str, int, int]] = []  # (variable, start, end) of "${name}" values
        # Positions are reported in the original text (before placeholders were filled).
        self.sourcemap = SourceMap(text if original is None else original, path)
        self.diagnostics: list[Diagnostic] = []
        self.open_blocks: list[tuple[object, Token]] = []  # (descriptor, opening token) of enclosing blocks

    # -- tokens ---------------------------------------------------------------
    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def next(self) -> Token | None:
        tok = self.peek()
        if tok is not None:
            self.pos += 1
        return tok

    def accept(self, text: str) -> Token | None:
        tok = self.peek()
        if tok is not None and tok.kind == "sym" and tok.text == text:
            self.pos += 1
            return tok
        return None

    # -- diagnostics ------------------------------------------------------------
    def report(self, code: str, message: str, start: int, end: int, hint: str | None = None,
               severity: Severity = Severity.ERROR, notes: list[str] | None = None) -> None:
        self.diagnostics.append(Diagnostic(
            code, severity, message, self.path, self.sourcemap.span_of(self.original(start), self.original(end, True)),
            hint, notes=notes or []))

    def original(self, offset: int, is_end: bool = False) -> int:
        return _original_offset(self.fills, offset, is_end) if self.fills else offset

    def fatal(self, message: str, tok: Token | None, hint: str | None = None, code: str = SYNTAX) -> None:
        if tok is None:
            end = len(self.text)
            self.report(code, message, max(0, end - 1), end, hint)
        else:
            self.report(code, message, tok.start, tok.end, hint)
        raise _Fatal

    def fill_at(self, tok: Token) -> _Fill | None:
        """The filled placeholder that the value ``tok`` starts in, or one before it that filled in
        no value at all (nothing, space or a comment)."""
        gap = self.tokens[self.pos - 2].end if self.pos >= 2 else 0
        return next((f for f in self.fills if gap <= f.new_start <= tok.start), None)

    def bad_fill(self, fd, fill: _Fill) -> None:
        """Report a value that a --set fill turned into something the field cannot hold, and
        skip the rest of that value so the file is still checked after it."""
        placeholder = self.original_text[fill.start:fill.end]
        value = self.text[fill.new_start:fill.new_end]
        if fd.type in (_d.FieldDescriptor.TYPE_STRING, _d.FieldDescriptor.TYPE_BYTES):
            message = (f"'{fd.name}' needs a quoted string, but the template's {placeholder} is not in quotes and "
                       f"was filled with {value or 'nothing'}")
            hint = (f'quote the placeholder in the template: {fd.name}: "{placeholder}" '
                    "(tools/fill_template.py fills in the value as it is)")
        else:
            message = f"'{fd.name}' cannot hold {value!r}, the value {placeholder} was filled with"
            hint = f"fill {placeholder} with a value of {fd.name}'s type"
        # Reported at the placeholder itself: a filled value (even an empty one) has no place of
        # its own in the file.
        self.diagnostics.append(Diagnostic(WRONG_TYPE, Severity.ERROR, message, self.path,
                                           self.sourcemap.span_of(fill.start, fill.end), hint))
        while self.peek() is not None and self.peek().start < fill.new_end:
            self.pos += 1

    def where(self, offset: int) -> str:
        start = self.original(offset)
        return str(self.sourcemap.span_of(start, start + 1))

    # -- grammar ------------------------------------------------------------------
    def parse_fields(self, message, path: tuple, closer: str | None, opener: Token | None) -> None:
        desc = message.DESCRIPTOR
        seen: dict[str, int] = {}
        oneofs: dict[str, tuple[str, int]] = {}
        self.open_blocks.append((desc, opener))
        try:
            self._parse_fields(message, desc, path, closer, opener, seen, oneofs)
        finally:
            self.open_blocks.pop()

    def _parse_fields(self, message, desc, path, closer, opener, seen, oneofs) -> None:
        while True:
            tok = self.peek()
            if tok is None:
                if closer is None:
                    return
                self.fatal(f"'{opener.text}' opened here is never closed", opener,
                           f"add a matching '{closer}' after the last field of this block")
            if tok.kind == "sym":
                if tok.text == closer:
                    self.pos += 1
                    return
                if tok.text in "}>]":
                    if opener is None:
                        self.fatal(f"unexpected '{tok.text}': there is no open block to close", tok,
                                   "remove it, or look for a missing '{' earlier")
                    self.report(SYNTAX, f"'{opener.text}' opened here is closed by '{tok.text}' at "
                                f"{self.where(tok.start)}, expected '{closer}'", opener.start, opener.end,
                                f"close this block with '{closer}' before the '{tok.text}'")
                    raise _Fatal
            if tok.kind != "ident" and tok.text.startswith("\ufeff") and tok.start == 0:
                self.fatal("the file starts with a byte order mark (U+FEFF), which protobuf's text format "
                           "does not accept", tok, "save the file as UTF-8 without a BOM")
            if tok.kind != "ident":
                what = "a template placeholder" if tok.kind == "placeholder" else repr(tok.text)
                self.fatal(f"expected a field name, found {what}", tok,
                           "fields are written `name: value` or `name { ... }`")
            self.pos += 1
            self.parse_field(message, desc, tok, path, seen, oneofs)
            if not self.accept(","):
                self.accept(";")

    def parse_field(self, message, desc, name_tok: Token, path, seen, oneofs) -> None:
        name = name_tok.text
        fd = desc.fields_by_name.get(name)
        if fd is None:
            suggestion = did_you_mean(name, desc.fields_by_name, FIELD_ALIASES)
            hint = f"did you mean '{suggestion}'?" if suggestion else (
                f"fields of {desc.name}: {', '.join(sorted(desc.fields_by_name))}")
            for outer_desc, _ in reversed(self.open_blocks[:-1]):
                if name in outer_desc.fields_by_name:
                    _, block = self.open_blocks[-1]
                    hint = (f"'{name}' belongs to {outer_desc.name}: is the '{block.text}' opened at "
                            f"{self.where(block.start)} missing its '{_OPENERS[block.text]}'?")
                    break
            self.report(UNKNOWN_FIELD, f"unknown field '{name}' in {desc.name}", name_tok.start, name_tok.end, hint)
            self.skip_value()
            return
        repeated = is_repeated(fd)
        if not repeated:
            if name in seen:
                self.report(DUPLICATE_FIELD, f"'{name}' is set twice (first at {self.where(seen[name])})",
                            name_tok.start, name_tok.end, "keep one of them")
            seen[name] = name_tok.start
        if fd.containing_oneof is not None:
            group = fd.containing_oneof.name
            other = oneofs.get(group)
            if other and other[0] != name:
                self.report(ONEOF_CONFLICT,
                            f"'{name}' and '{other[0]}' (at {self.where(other[1])}) cannot both be set: "
                            f"they are alternatives of '{group}'", name_tok.start, name_tok.end,
                            f"keep either '{name}' or '{other[0]}'")
            oneofs[group] = (name, name_tok.start)
        colon = self.accept(":")
        field_path = path + (name,)
        if fd.message_type is not None:
            self.parse_message_field(message, fd, name_tok, field_path, repeated)
            return
        if colon is None:
            self.fatal(f"expected ':' after '{name}'", self.peek() or name_tok, f"write `{name}: <value>`")
        lst = self.accept("[")
        if lst is not None:
            if not repeated:
                self.report(WRONG_TYPE, f"'{name}' holds a single value, not a list", lst.start, lst.end,
                            f"write `{name}: <value>`")
            target = getattr(message, name) if repeated else None
            index = len(target) if repeated else 0
            if self.accept("]"):
                self.sourcemap.entries[field_path] = (name_tok.start, name_tok.end, lst.start, lst.end + 1)
                return
            while True:
                tok, value = self.parse_scalar(fd)
                if value is not None and repeated:
                    target.append(value)
                if tok.kind == "placeholder":
                    self.placeholder_paths.append(field_path + (index,))
                self.sourcemap.entries[field_path + (index,)] = (tok.start, tok.end, tok.start, tok.end)
                index += 1
                if self.accept("]"):
                    end = self.tokens[self.pos - 1].end
                    self.sourcemap.entries[field_path] = (name_tok.start, name_tok.end, lst.start, end)
                    return
                if not self.accept(","):
                    self.fatal(f"expected ',' or ']' in the list of '{name}'", self.peek(),
                               "separate list items with commas and end the list with ']'")
        tok, value = self.parse_scalar(fd)
        if tok.kind == "placeholder":
            self.placeholder_paths.append(field_path)
        if repeated:
            target = getattr(message, name)
            self.sourcemap.entries[field_path + (len(target),)] = (tok.start, tok.end, tok.start, tok.end)
            self.sourcemap.entries.setdefault(field_path, (name_tok.start, name_tok.end, tok.start, tok.end))
            if value is not None:
                target.append(value)
        else:
            self.sourcemap.entries[field_path] = (name_tok.start, name_tok.end, tok.start, tok.end)
            if value is not None:
                setattr(message, name, value)

    def parse_message_field(self, message, fd, name_tok: Token, field_path, repeated: bool) -> None:
        name = fd.name
        lst = self.accept("[")
        if lst is not None:
            if not repeated:
                self.report(WRONG_TYPE, f"'{name}' holds one message, not a list", lst.start, lst.end,
                            f"write `{name} {{ ... }}`")
            if self.accept("]"):
                self.sourcemap.entries[field_path] = (name_tok.start, name_tok.end, lst.start, lst.end + 1)
                return
            while True:
                self.parse_one_message(message, fd, name_tok, field_path, repeated, in_list=True)
                if self.accept("]"):
                    end = self.tokens[self.pos - 1].end
                    self.sourcemap.entries.setdefault(field_path, (name_tok.start, name_tok.end, lst.start, end))
                    return
                if not self.accept(","):
                    self.fatal(f"expected ',' or ']' in the list of '{name}'", self.peek(),
                               "separate the { ... } blocks with commas and end the list with ']'")
        self.parse_one_message(message, fd, name_tok, field_path, repeated, in_list=False)

    def parse_one_message(self, message, fd, name_tok: Token, field_path, repeated: bool, in_list: bool) -> None:
        opener = self.next()
        if in_list and opener is not None and opener.text == "]" and self.tokens[self.pos - 2].text == ",":
            self.fatal(f"a ',' after the last block of the list of '{fd.name}'", self.tokens[self.pos - 2],
                       "remove the ',' before ']': protobuf's text format allows no trailing comma in a list")
        if opener is None or opener.kind != "sym" or opener.text not in "{<":
            what = "end of file" if opener is None else repr(opener.text)
            self.fatal(f"'{fd.name}' is a message: expected '{{' but found {what}", opener,
                       f"write `{fd.name} {{ ... }}`" if fd.message_type.GetOptions().map_entry is False
                       else f"write `{fd.name} {{ key: ... value: ... }}`", code=WRONG_TYPE)
        closer = _OPENERS[opener.text]
        key_start, key_end = (opener.start, opener.end) if in_list else (name_tok.start, name_tok.end)
        if fd.message_type.GetOptions().map_entry:
            self.parse_map_entry(message, fd, opener, closer, field_path, key_start, key_end)
            return
        if repeated:
            container = getattr(message, fd.name)
            sub_path = field_path + (len(container),)
            sub = container.add()
        else:
            sub_path = field_path
            sub = getattr(message, fd.name)
            sub.SetInParent()
        self.parse_fields(sub, sub_path, closer, opener)
        end = self.tokens[self.pos - 1].end
        self.sourcemap.entries[sub_path] = (key_start, key_end, opener.start, end)
        if repeated:
            self.sourcemap.entries.setdefault(field_path, (name_tok.start, name_tok.end, opener.start, end))

    def parse_map_entry(self, message, fd, opener: Token, closer: str, field_path, key_start, key_end) -> None:
        entry_desc = fd.message_type
        entry = message_factory.GetMessageClass(entry_desc)()
        outer = self.sourcemap.entries
        self.sourcemap.entries = {}
        try:
            self.parse_fields(entry, (), closer, opener)
        finally:
            inner, self.sourcemap.entries = self.sourcemap.entries, outer
        end = self.tokens[self.pos - 1].end
        if ("key",) not in inner:
            self.report(KEYLESS_MAP_ENTRY, f"entry of '{fd.name}' has no key, so protobuf gives it the key "
                        f"{entry.key!r}", opener.start, opener.end,
                        f"write `{fd.name} {{ key: ... value: ... }}`, or remove the entry",
                        severity=Severity.WARNING)
            inner[("key",)] = (opener.start, opener.end, opener.start, opener.end)
        key = entry.key
        mapping = getattr(message, fd.name)
        entry_path = field_path + (key,)
        if entry_path in self.sourcemap.entries:
            self.report(DUPLICATE_MAP_KEY, f"key {key!r} of '{fd.name}' is written twice; the last one wins",
                        key_start, key_end, "remove the earlier entry", severity=Severity.WARNING)
        for sub, span in inner.items():
            if sub and sub[0] == "value":
                self.sourcemap.entries[entry_path + sub] = span
        self.sourcemap.entries[entry_path + ("key",)] = inner[("key",)]
        self.sourcemap.entries[entry_path] = (key_start, key_end, opener.start, end)
        value_fd = entry_desc.fields_by_name["value"]
        if value_fd.message_type is not None:
            mapping[key].CopyFrom(entry.value)
        else:
            mapping[key] = entry.value

    def parse_scalar(self, fd) -> tuple[Token, object]:
        """Returns the value token and the parsed value (None after a reported error)."""
        tok = self.next()
        if tok is None:
            self.fatal(f"expected a value for '{fd.name}', found end of file", None)
        if tok.kind == "placeholder":
            variable = _TEMPLATE_VARIABLE.fullmatch(tok.text)
            fill = f"--set {variable.group(1) or variable.group(2)}=VALUE" if variable else "--set NAME=VALUE"
            hint = f"fill the template (tools/fill_template.py), or check it with {fill}"
            if fd.type in (_d.FieldDescriptor.TYPE_STRING, _d.FieldDescriptor.TYPE_BYTES):
                # fill_template.py puts the value in as it is: unquoted, it is no string.
                hint = f'quote it ({fd.name}: "{tok.text}"), then fill the template or check it with {fill}'
            self.report(PLACEHOLDER, f"'{fd.name}' has the unfilled template placeholder {tok.text}",
                        tok.start, tok.end, hint)
            return tok, None
        if tok.kind == "badstring":
            self.fatal("string is not terminated on this line", tok, "close the string with the same quote")
        if tok.kind == "other" and tok.text == "-" and fd.type in _SIGNED_VALUE_TYPES:
            tok = self.minus_then_value(tok)
        fill = self.fill_at(tok) if self.fills else None
        if fill is not None and (tok.kind in ("sym", "other") or (tok.end < fill.new_end and not is_repeated(fd)) or (
                tok.kind != "string" and fd.type in (_d.FieldDescriptor.TYPE_STRING, _d.FieldDescriptor.TYPE_BYTES))):
            self.pos -= 1
            self.bad_fill(fd, fill)
            return tok, None
        if tok.kind == "sym" or tok.kind == "other":
            if tok.text == "]" and self.tokens[self.pos - 2].text == ",":
                self.fatal(f"a ',' after the last item of the list of '{fd.name}'", self.tokens[self.pos - 2],
                           "remove the ',' before ']': protobuf's text format allows no trailing comma in a list")
            self.fatal(f"expected a value for '{fd.name}', found {tok.text!r}", tok)
        ftype = fd.type
        if fd.enum_type is not None:
            return tok, self.enum_value(fd, tok)
        if ftype == _d.FieldDescriptor.TYPE_STRING or ftype == _d.FieldDescriptor.TYPE_BYTES:
            if tok.kind != "string":
                self.report(WRONG_TYPE, f"'{fd.name}' needs a quoted string but found {tok.text}", tok.start,
                            tok.end, f'write {fd.name}: "{tok.text}"')
                return tok, None
            parts = [tok]
            while self.peek() is not None and self.peek().kind == "string":
                parts.append(self.next())
            last = parts[-1]
            merged = Token("string", self.text[tok.start:last.end], tok.start, last.end)
            raw = self.string_bytes(parts)
            if raw is None:
                return merged, None
            whole = _TEMPLATE_VARIABLE.fullmatch(merged.text[1:-1]) if len(parts) == 1 else None
            if whole and fd.containing_type.name == "ModelParameter":
                self.unset_parameters.append((whole.group(1) or whole.group(2), tok.start, last.end))
            elif "${" in merged.text:
                self.report(PLACEHOLDER_IN_STRING, f"'{fd.name}' contains an unfilled template placeholder",
                            tok.start, last.end, "fill the template before deploying", severity=Severity.WARNING)
            if ftype == _d.FieldDescriptor.TYPE_BYTES:
                return merged, raw
            try:
                return merged, raw.decode("utf-8")
            except UnicodeDecodeError:
                self.report(WRONG_TYPE, f"'{fd.name}' is not valid UTF-8", tok.start, last.end)
                return merged, None
        if ftype == _d.FieldDescriptor.TYPE_BOOL:
            if tok.text in _BOOLS:
                return tok, _BOOLS[tok.text]
            self.report(WRONG_TYPE, f"'{fd.name}' needs true or false but found {tok.text}", tok.start, tok.end,
                        f"write {fd.name}: true")
            return tok, None
        if ftype in _FLOATS:
            return tok, self.float_value(fd, tok)
        return tok, self.int_value(fd, tok)

    def string_bytes(self, parts: list[Token]) -> bytes | None:
        """The bytes of adjacent string literals; None after reporting an escape protobuf refuses."""
        chunks = []
        for part in parts:
            try:
                chunks.append(c_unescape(part.text[1:-1]))
            except BadEscape as exc:
                start = part.start + 1 + exc.offset
                self.report(SYNTAX, f"invalid escape sequence '{exc.escape}' in a string: {exc.reason}",
                            start, start + len(exc.escape), _ESCAPE_HINT)
                return None
        return b"".join(chunks)

    def minus_then_value(self, minus: Token) -> Token:
        """protobuf reads '-' as a token of its own, so space or a comment may follow it."""
        tok = self.peek()
        if tok is None or tok.kind not in ("number", "ident") or tok.text.startswith("-"):
            return minus
        self.pos += 1
        return Token(tok.kind, "-" + tok.text, minus.start, tok.end)

    def int_value(self, fd, tok: Token):
        text = tok.text
        low, high = _INT_RANGES[fd.type]
        if tok.kind != "number" or re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)", text) is None:
            shown = "a string" if tok.kind == "string" else text
            hint = f"write {fd.name}: {tok.text.strip(chr(34) + chr(39))}" if tok.kind == "string" else (
                "write a whole number")
            self.report(WRONG_TYPE, f"'{fd.name}' needs an integer but found {shown}", tok.start, tok.end, hint)
            return None
        negative = text.startswith("-")
        digits = text[1:] if negative else text
        if _is_bad_octal(digits):
            self.report(SYNTAX, f"'{fd.name}' has {digits}: a number with a leading zero is octal, and 8 and 9 "
                        "are not octal digits", tok.start, tok.end, f"write {fd.name}: {int(digits)}")
            return None
        if negative and low == 0:
            self.report(WRONG_TYPE, f"'{fd.name}' is out of range: {text} (it is unsigned and cannot be negative)",
                        tok.start, tok.end)
            return None
        value = _integer(digits)
        value = -value if negative else value
        if not low <= value <= high:
            self.report(WRONG_TYPE, f"'{fd.name}' is out of range: {text} (it must be between {low} and {high})",
                        tok.start, tok.end)
            return None
        return value

    def float_value(self, fd, tok: Token):
        text = tok.text
        lowered = text.lower().lstrip("-")
        if tok.kind == "ident" and lowered in ("inf", "infinity", "nan"):
            value = math.nan if lowered == "nan" else math.inf
            return -value if text.startswith("-") else value
        if tok.kind != "number" or "x" in text.lower():
            self.report(WRONG_TYPE, f"'{fd.name}' needs a number but found {text}", tok.start, tok.end)
            return None
        if re.fullmatch(r"-?0\d+", text):
            self.report(WRONG_TYPE, f"'{fd.name}' needs a decimal number but found {text}, which protobuf reads "
                        "as octal", tok.start, tok.end, f"write {fd.name}: {int(text)}")
            return None
        return float(text.rstrip("fF"))

    def enum_value(self, fd, tok: Token):
        enum = fd.enum_type
        if tok.kind == "ident" and tok.text in enum.values_by_name:
            return enum.values_by_name[tok.text].number
        if tok.kind == "number" and re.fullmatch(r"-?\d+", tok.text) and int(tok.text) in enum.values_by_number:
            return int(tok.text)
        choices = [v.name for v in enum.values]
        word = tok.text.strip("\"'")
        suggestion = did_you_mean(word, choices, ENUM_ALIASES)
        hint = f"did you mean {suggestion}?" if suggestion else f"one of: {', '.join(choices)}"
        if tok.kind == "string" and word in enum.values_by_name:
            hint = f"enum values are written without quotes: {fd.name}: {word}"
        self.report(UNKNOWN_ENUM, f"'{tok.text}' is not a value of {enum.name} (field '{fd.name}')",
                    tok.start, tok.end, hint)
        return None

    def skip_value(self) -> None:
        """Skip the value of an unknown field so parsing can go on after it."""
        self.accept(":")
        tok = self.peek()
        if tok is None:
            return
        if tok.kind == "sym" and tok.text in _OPENERS:
            depth = 0
            while (tok := self.next()) is not None:
                if tok.kind == "sym" and tok.text in _OPENERS:
                    depth += 1
                elif tok.kind == "sym" and tok.text in "}>]":
                    depth -= 1
                    if depth == 0:
                        return
            return
        if tok.kind in ("string", "number", "ident", "placeholder"):
            self.pos += 1
            while tok.kind == "string" and self.peek() is not None and self.peek().kind == "string":
                self.pos += 1
