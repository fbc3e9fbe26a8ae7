"""What Python models written for Triton's stub (numpy 1.x) still find under numpy 2.

Triton's Python-backend stub is built against numpy 1.x, and models written for it use names that
NumPy 2.0 removed (``np.NINF``, ``np.float_``, ``np.product`` ...), which then fail with "`np.NINF`
was removed in the NumPy 2.0 release". Before a Python model's code is loaded, these names are put
back as the aliases NumPy's own migration guide gives, and only where numpy lacks them: code written
for numpy 2 sees nothing new it could depend on by mistake, and numpy 1.x is left as it is. A model
that needs numpy 1.x itself brings its own environment (``EXECUTION_ENV_PATH``).
"""

from __future__ import annotations

import numpy as np


def _asfarray(a, dtype=np.float64):
    if not np.issubdtype(np.dtype(dtype), np.inexact):
        dtype = np.float64
    return np.asarray(a, dtype=dtype)


def _in1d(ar1, ar2, assume_unique=False, invert=False, *, kind=None):
    return np.isin(np.ravel(ar1), ar2, assume_unique=assume_unique, invert=invert, kind=kind)


def _msort(a):
    return np.sort(a, axis=0)


# name -> its NumPy 2 spelling (NumPy 2.0 migration guide, "Main namespace").
NUMPY1_NAMES = {
    "Inf": np.inf, "Infinity": np.inf, "infty": np.inf, "PINF": np.inf, "NINF": -np.inf,
    "NaN": np.nan, "PZERO": 0.0, "NZERO": -0.0,
    "float_": np.float64, "complex_": np.complex128, "cfloat": np.complex128, "singlecomplex": np.complex64,
    "longfloat": np.longdouble, "longcomplex": np.clongdouble, "clongfloat": np.clongdouble,
    "string_": np.bytes_, "unicode_": np.str_,
    "bool8": np.bool_, "int0": np.intp, "uint0": np.uintp, "object0": np.object_, "str0": np.str_,
    "bytes0": np.bytes_, "void0": np.void,
    "alltrue": np.all, "sometrue": np.any, "product": np.prod, "cumproduct": np.cumprod, "round_": np.round,
    "asfarray": _asfarray, "in1d": _in1d, "msort": _msort, "issubclass_": issubclass,
    "trapz": getattr(np, "trapezoid", None), "mat": np.asmatrix,
}


def restore_numpy1_names() -> list[str]:
    """Put back each removed name numpy lacks; the names restored (none the second time)."""
    restored = []
    for name, value in NUMPY1_NAMES.items():
        if value is None or name in np.__dict__:
            continue
        try:
            getattr(np, name)
            continue  # numpy still has it (1.x, or a deprecation shim)
        except AttributeError:
            pass
        setattr(np, name, value)
        restored.append(name)
    return restored
