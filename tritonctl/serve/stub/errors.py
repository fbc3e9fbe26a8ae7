"""A Python model's exceptions in the texts Triton's Python backend gives them, for the server's
in-process mode and for the stub alike (standard library only: the stub imports it too)."""

from __future__ import annotations

import traceback
from pathlib import Path


def describe(exc: BaseException, model_file: Path) -> str:
    """``Type: message`` and the innermost line of the model's own file, as Triton reports it."""
    text = f"{type(exc).__name__}: {exc}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if Path(f.filename).resolve().parent == model_file.resolve().parent]
    if frames:
        frame = frames[-1]
        text += f" (at {Path(frame.filename).name}:{frame.lineno} in {frame.name})"
    return text


def execute_failure(exc: BaseException, caller_file: str) -> str:
    """``Type: message`` and the model's frames, innermost first, as Triton's Python backend reports
    an exception of execute(): ``ValueError: boom\\n\\nAt:\\n  /path/model.py(6): execute\\n``. The
    frames start below the last one of ``caller_file`` (the code that called execute)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [i for i, frame in enumerate(frames) if Path(frame.filename).resolve() == Path(caller_file).resolve()]
    frames = frames[ours[-1] + 1:] if ours else frames
    text = f"{type(exc).__name__}: {exc}"
    if frames:
        text += "\n\nAt:\n" + "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in reversed(frames))
    return text
