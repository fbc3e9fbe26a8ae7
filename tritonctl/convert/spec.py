"""Command-line tensor specs: ``--shape NAME:MIN,OPT,MAX`` and ``--input NAME:DTYPE:DIMS``.

Dims are written the way config.pbtxt writes them, joined with ``x``: ``3x224x224``.
When the model batches (max_batch_size > 0) they leave out the batch dimension, as
config.pbtxt dims do; ``tritonctl build`` adds the batch range itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# --input dtype names -> numpy dtype names (and the torch dtype of the same name)
DTYPES = {
    "fp32": "float32", "float32": "float32", "float": "float32",
    "fp16": "float16", "float16": "float16", "half": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp64": "float64", "float64": "float64", "double": "float64",
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32",
    "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}
_NAME = re.compile(r"^(?P<name>[^:]+):(?P<rest>.+)$")


class SpecError(ValueError):
    """A --shape or --input value that cannot be read; the message shows the expected form."""


def parse_dims(text: str, *, allow_dynamic: bool) -> tuple[int, ...]:
    """``3x224x224`` -> (3, 224, 224); ``-1`` or a name marks a dynamic dim when allowed.
    An empty string or ``scalar`` is a tensor with no dims beyond the batch."""
    text = text.strip()
    if text in ("", "scalar"):
        return ()
    dims = []
    for part in text.split("x"):
        part = part.strip()
        if re.fullmatch(r"\d+", part) and int(part) > 0:
            dims.append(int(part))
        elif allow_dynamic and (part == "-1" or re.fullmatch(r"[A-Za-z_]\w*", part)):
            dims.append(-1)
        else:
            kind = "a positive integer or -1" if allow_dynamic else "a positive integer"
            raise SpecError(f"dimension '{part}' in '{text}' must be {kind}")
    return tuple(dims)


@dataclass(frozen=True)
class ShapeSpec:
    """Shapes of one input for an optimization profile, without the batch dimension."""

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


def parse_shape(text: str) -> ShapeSpec:
    """``NAME:MIN,OPT,MAX`` (each ``AxBxC``), or ``NAME:DIMS`` for one fixed shape."""
    match = _NAME.match(text)
    if not match:
        raise SpecError(f"--shape '{text}' should look like NAME:MIN,OPT,MAX, e.g. input_ids:1,128,512 "
                        "or image:3x224x224,3x512x512,3x1024x1024")
    parts = match["rest"].split(",")
    if len(parts) not in (1, 3):
        raise SpecError(f"--shape '{text}' needs one shape or three (MIN,OPT,MAX), got {len(parts)}")
    shapes = [parse_dims(p, allow_dynamic=False) for p in parts]
    low, opt, high = (shapes * 3)[:3] if len(shapes) == 1 else shapes
    if not len(low) == len(opt) == len(high):
        raise SpecError(f"--shape '{text}': MIN, OPT and MAX must have the same number of dimensions")
    if any(not a <= b <= c for a, b, c in zip(low, opt, high)):
        raise SpecError(f"--shape '{text}': every dimension must satisfy MIN <= OPT <= MAX")
    return ShapeSpec(match["name"], low, opt, high)


@dataclass(frozen=True)
class InputSpec:
    """One input of a PyTorch model: name, numpy dtype name, dims without the batch (-1: dynamic)."""

    name: str
    dtype: str
    dims: tuple[int, ...]


def parse_input(text: str) -> InputSpec:
    """``NAME:DTYPE:DIMS``, e.g. ``input_ids:int64:seq`` or ``image:fp32:3x224x224``."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[0]:
        raise SpecError(f"--input '{text}' should look like NAME:DTYPE:DIMS, e.g. image:fp32:3x224x224 "
                        "(dims without the batch dimension; -1 or a name for a dynamic one)")
    name, dtype, dims = parts
    if dtype.lower() not in DTYPES:
        raise SpecError(f"--input '{text}': unknown dtype '{dtype}'; use one of {', '.join(sorted(set(DTYPES)))}")
    return InputSpec(name, DTYPES[dtype.lower()], parse_dims(dims, allow_dynamic=True))
