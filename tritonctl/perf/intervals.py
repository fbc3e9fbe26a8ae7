"""perf_analyzer's custom-interval load (``--request-intervals FILE``): a text file with one gap
between successive sends per line, in microseconds, replayed from the top once it runs out.

perf_analyzer reads each line with ``std::stol`` and stops with an exception on a line that is not
a number; here a bad line is reported with its line number instead. Blank lines and spaces around
a number are allowed; anything else (signs, decimals, units, comments) is refused, so that a trace
in another unit or format is not replayed silently at the wrong pace.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Iterator

from tritonctl.perf.options import PerfError

MAX_INTERVAL_US = 3_600_000_000  # one hour: a longer gap cannot be part of a measurable trace
FLAG = "--request-intervals"
_WHOLE = re.compile(r"[0-9]+")


def parse_intervals(text: str, source: str = FLAG) -> tuple[int, ...]:
    """The intervals of a ``--request-intervals`` file's text, in microseconds."""
    intervals: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        value = line.strip()
        if not value:
            continue
        if not _WHOLE.fullmatch(value):
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise PerfError(f"{source}:{number}: {shown!r} is not a whole number of microseconds; the file has "
                            "one interval between sends per line, in microseconds (perf_analyzer's "
                            "--request-intervals format), e.g. 10000 for 10 ms")
        interval = int(value)
        if interval > MAX_INTERVAL_US:
            raise PerfError(f"{source}:{number}: {interval} µs is over an hour between two sends; the intervals "
                            "are in microseconds (10000 is 10 ms)")
        intervals.append(interval)
    if not intervals:
        raise PerfError(f"{source}: the file has no intervals; write one interval between sends per line, in "
                        "microseconds")
    if not sum(intervals):
        raise PerfError(f"{source}: every interval is 0, which asks for an infinite request rate; give the gaps "
                        "between sends in microseconds")
    return tuple(intervals)


def read_intervals(path: str | Path) -> tuple[int, ...]:
    """The intervals of a ``--request-intervals`` file, with a clear error for a file that cannot be read."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PerfError(f"{FLAG} {path}: no such file") from None
    except IsADirectoryError:
        raise PerfError(f"{FLAG} {path}: is a directory; give a text file with one interval per line") from None
    except UnicodeDecodeError:
        raise PerfError(f"{FLAG} {path}: not a text file; give one interval in microseconds per line") from None
    except OSError as exc:
        raise PerfError(f"{FLAG} {path}: cannot be read ({exc.strerror or exc})") from None
    return parse_intervals(text, str(path))


def gaps_s(intervals_us: tuple[int, ...]) -> Iterator[float]:
    """The gaps between sends in seconds, the intervals over and over (perf_analyzer loops the file)."""
    return (interval / 1e6 for interval in itertools.cycle(intervals_us))


def mean_rate(intervals_us: tuple[int, ...]) -> float:
    """The request rate the intervals ask for on average, in requests per second."""
    return len(intervals_us) * 1e6 / sum(intervals_us)


def describe(intervals_us: tuple[int, ...]) -> str:
    """``trace of 3 intervals, mean 37.5/s``."""
    count = len(intervals_us)
    return f"trace of {count} interval{'s' * (count != 1)}, mean {mean_rate(intervals_us):.4g}/s"
