"""The measurement tables analyze writes: CSV always, Parquet where pyarrow imports."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from tritonctl.analyzer.results import write_tables
from tritonctl.optional import unavailable


@pytest.mark.skipif(unavailable("pyarrow") is not None, reason=f"pyarrow does not import: {unavailable('pyarrow')}")
def test_tables_are_written_as_csv_and_parquet(tmp_path):
    frame = pd.DataFrame({"config_id": ["b8-d0-i1-cpu"], "throughput": [123.5]})
    notes: list[str] = []
    files = write_tables(frame, tmp_path, notes)
    assert files == [tmp_path / "measurements.csv", tmp_path / "measurements.parquet"] and notes == []
    assert pd.read_parquet(files[1]).equals(frame) and pd.read_csv(files[0]).equals(frame)


def test_without_a_usable_pyarrow_the_csv_is_kept_and_the_parquet_file_named_as_missing(tmp_path, monkeypatch):
    """A pyarrow that does not import (absent, or built for NumPy 2 beside NumPy 1.x) costs the
    Parquet copy only; an earlier run's Parquet file is removed, not left to pass for this run's."""
    frame = pd.DataFrame({"config_id": ["b8-d0-i1-cpu"], "throughput": [123.5]})
    (tmp_path / "measurements.parquet").write_bytes(b"an earlier run's")
    notes: list[str] = []
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "pyarrow", None)  # importing it now fails as an absent one's does
        files = write_tables(frame, tmp_path, notes)
    assert files == [tmp_path / "measurements.csv"] and pd.read_csv(files[0]).equals(frame)
    assert not (tmp_path / "measurements.parquet").exists()
    assert notes == ["measurements.parquet not written: the 'pyarrow' Python package is not installed (pip install "
                     "pyarrow); measurements.csv holds the same table"]
