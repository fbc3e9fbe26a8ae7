"""Where each field of a parsed config.pbtxt was written.

A field is addressed by a path of names, repeated-field indices and map keys:
``("input", 0, "dims", 1)`` or ``("parameters", "execution_mode", "value")``.
Offsets are kept raw and turned into line:col only when a diagnostic needs them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path

from tritonctl.repo_schema.diagnostics import Span

FieldPath = tuple


@dataclass
class SourceMap:
    text: str
    path: Path | None = None
    # path -> (key_start, key_end, value_start, value_end) byte offsets into text
    entries: dict[FieldPath, tuple[int, int, int, int]] = field(default_factory=dict)
    _line_starts: list[int] | None = None

    def span_of(self, start: int, end: int) -> Span:
        if self._line_starts is None:
            starts = [0]
            find = self.text.find
            pos = find("\n")
            while pos != -1:
                starts.append(pos + 1)
                pos = find("\n", pos + 1)
            self._line_starts = starts
        starts = self._line_starts
        line = bisect.bisect_right(starts, start) - 1
        end_line = bisect.bisect_right(starts, max(start, end - 1)) - 1
        end_col = end - starts[end_line] + 1 if end > start else start - starts[line] + 2
        return Span(line + 1, start - starts[line] + 1, end_line + 1, end_col)

    def locate(self, path: FieldPath, part: str = "value") -> Span | None:
        """Span of ``path``'s value (or its field name with ``part="key"``).

        Falls back to the closest enclosing field that was written, so a rule
        about a defaulted field points at the message that omitted it.
        """
        probe = tuple(path)
        while probe:
            entry = self.entries.get(probe)
            if entry is not None:
                if part == "key" or probe != tuple(path):
                    return self.span_of(entry[0], entry[1])
                return self.span_of(entry[2], entry[3])
            probe = probe[:-1]
        return None

    def has(self, path: FieldPath) -> bool:
        return tuple(path) in self.entries
