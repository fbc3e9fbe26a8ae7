"""The run's checkpoint: a JSON-lines file in the output directory, one line per measured point.

Every point is written, flushed and fsync'd as soon as it is measured, so a killed run loses at
most the measurement in progress. ``--resume`` reads the points back; the strategy then replays
its decisions on them and measures only what is missing. A point is reused only for the same
config (by a hash of its full config JSON) measured with the same settings; re-measurements of a
point (the search's tie-breaks and final round) are told apart by their ``repeat`` number, and
points measured on other hardware (another fingerprint, ``analyzer.hardware``) are never reused:
they stay in the file, and a run on that hardware finds them again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import AnalyzeError

CHECKPOINT_NAME = "measurements.jsonl"
FORMAT_VERSION = 1


class Checkpoint:
    """Open with ``Checkpoint.open``; ``record`` appends a point, ``lookup`` finds a recorded one."""

    def __init__(self, path: Path, settings: dict, points: list[Point], dropped_line: bool):
        self.path = path
        self.settings = settings
        self.recorded = points  # from the file, in the order they were measured
        self.dropped_line = dropped_line  # the last line was cut off by a kill and was ignored
        self.new: list[Point] = []
        self._index = {p.key: p for p in points}
        self._file = None

    @classmethod
    def open(cls, output_dir: Path, settings: dict, resume: bool, overwrite: bool) -> "Checkpoint":
        path = output_dir / CHECKPOINT_NAME
        settings = json.loads(json.dumps(settings))  # compared with what a file gives back
        points: list[Point] = []
        dropped = False
        if path.is_file() and path.stat().st_size:
            if resume:
                recorded_settings, points, dropped = read(path)
                _check_settings(path, recorded_settings, settings)
            elif not overwrite:
                raise AnalyzeError(f"{output_dir} already holds measurements ({CHECKPOINT_NAME}): pass --resume "
                                   "to continue that run, --overwrite to start again, or another --output-dir")
            else:
                path.unlink()
        checkpoint = cls(path, settings, points, dropped)
        checkpoint._start(fresh=not points)
        return checkpoint

    def _start(self, fresh: bool) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.dropped_line:  # rewrite without the cut-off line, so the file stays valid JSON lines
            lines = [json.dumps({"kind": "run", "version": FORMAT_VERSION, "settings": self.settings})]
            lines += [json.dumps({"kind": "point", **p.to_record()}) for p in self.recorded]
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("\n".join(lines) + "\n")
            os.replace(tmp, self.path)
        self._file = open(self.path, "a", encoding="utf-8")
        if fresh:
            self._write({"kind": "run", "version": FORMAT_VERSION, "settings": self.settings})

    def _write(self, record: dict) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def lookup(self, config_id: str, config_hash: str, level: float, repeat: int = 0,
               hardware: str = "") -> Point | None:
        """The point recorded on ``hardware``; a point from a file written before fingerprints were
        recorded was measured on the machine that wrote it, which is taken to be this one."""
        found = self._index.get((config_id, config_hash, level, repeat, hardware))
        return found or self._index.get((config_id, config_hash, level, repeat, ""))

    def record(self, point: Point) -> None:
        self._write({"kind": "point", **point.to_record()})
        self.new.append(point)
        self._index[point.key] = point

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read(path: Path) -> tuple[dict, list[Point], bool]:
    """The settings and points of a checkpoint file; a cut-off last line is ignored (and reported)."""
    settings: dict | None = None
    points: list[Point] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    dropped = False
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if number == len(lines):
                dropped = True
                break
            raise AnalyzeError(f"{path}:{number} is not valid JSON; the checkpoint is damaged "
                               "(start again with --overwrite)") from None
        if record.get("kind") == "run":
            settings = record.get("settings", {})
        elif record.get("kind") == "point":
            record.pop("kind")
            points.append(Point.from_record(record))
    if settings is None:
        raise AnalyzeError(f"{path} has no run header; it was not written by tritonctl analyze")
    return settings, points, dropped


def _check_settings(path: Path, recorded: dict, current: dict) -> None:
    differ = sorted(k for k in set(recorded) | set(current) if recorded.get(k) != current.get(k))
    if differ:
        detail = "; ".join(f"{k}: {recorded.get(k)!r} then, {current.get(k)!r} now" for k in differ)
        raise AnalyzeError(f"cannot resume from {path}: it was measured with other settings ({detail}). "
                           "Use the same options, or --overwrite / another --output-dir to start again")
