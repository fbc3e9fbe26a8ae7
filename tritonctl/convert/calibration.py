"""--calibration-data: real input samples, for INT8 calibration and for the accuracy check.

Accepted forms: one ``.npz`` file whose arrays are named after the model's inputs (first
dimension = samples), or a directory of such ``.npz`` files, read in name order.
Samples are cut into batches of at most ``max_batch`` rows (whole files when the model
does not batch).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tritonctl.convert.errors import BuildError


def calibration_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("*.npz"))
        if not files:
            raise BuildError(f"--calibration-data {path} holds no .npz files")
        return files
    if not path.is_file():
        raise BuildError(f"--calibration-data {path} does not exist")
    if path.suffix != ".npz":
        raise BuildError(f"--calibration-data {path} must be a .npz file (numpy.savez) or a directory of them")
    return [path]


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    for file in calibration_files(path):
        sha.update(file.name.encode())
        sha.update(file.read_bytes())
    return sha.hexdigest()


def load_batches(path: Path, input_names: list[str], max_batch: int, dtypes: dict[str, str]) -> list[dict]:
    """Batches of {input name: array}, cast to each input's dtype."""
    import numpy as np

    batches = []
    for file in calibration_files(path):
        try:
            with np.load(file) as data:
                arrays = {name: data[name] for name in data.files}
        except Exception as exc:
            raise BuildError(f"cannot read {file}: {exc}") from None
        missing = [n for n in input_names if n not in arrays]
        if missing:
            raise BuildError(f"{file.name} has no array for input(s) {', '.join(missing)} "
                             f"(it holds {', '.join(sorted(arrays)) or 'nothing'})")
        arrays = {n: arrays[n].astype(dtypes.get(n, arrays[n].dtype)) for n in input_names}
        rows = {len(a) if a.ndim else 0 for a in arrays.values()}
        if max_batch <= 0:
            batches.append(arrays)
            continue
        if len(rows) != 1 or 0 in rows:
            raise BuildError(f"{file.name}: every input needs the same number of samples along the first dimension")
        count = rows.pop()
        for start in range(0, count, max_batch):
            batches.append({n: a[start:start + max_batch] for n, a in arrays.items()})
    return batches
