"""Packed EXECUTION_ENV_PATH environments are unpacked once, in the place they are used from, and
an unpacking cut short is done again."""

from __future__ import annotations

import tarfile
import threading
from pathlib import Path

import pytest

from tritonctl.serve.backends.python_env import UNPACKED_MARKER, cache_root, unpacked
from tritonctl.serve.core.backend_api import BackendLoadError


@pytest.fixture
def archive(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "tool").write_text("made by the archive\n")
    path = tmp_path / "env.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(env, arcname=".")
    return path


def test_servers_loading_at_once_share_one_unpacking(archive):
    roots: list[Path] = []
    threads = [threading.Thread(target=lambda: roots.append(unpacked(archive, "m"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(roots)) == 1 and (roots[0] / UNPACKED_MARKER).is_file()
    assert [p for p in cache_root().iterdir() if p.is_dir()] == roots[:1]
    assert (roots[0] / "bin" / "tool").read_text() == "made by the archive\n"


def test_an_unpacking_cut_short_is_done_again(archive):
    root = unpacked(archive, "m")
    (root / UNPACKED_MARKER).unlink()
    (root / "bin" / "tool").unlink()
    (root / "left-over").write_text("from a crash")
    assert unpacked(archive, "m") == root
    assert (root / "bin" / "tool").is_file() and not (root / "left-over").exists()


def test_an_archive_that_is_not_one_fails_the_load_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bogus = tmp_path / "env.tar.gz"
    bogus.write_bytes(b"not an archive")
    with pytest.raises(BackendLoadError, match="unable to unpack the environment .* of model 'm'"):
        unpacked(bogus, "m")
    assert not [p for p in cache_root().iterdir() if p.is_dir()]
