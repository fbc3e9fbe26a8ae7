"""The load API's model files (``file:<path>`` parameters) from any client: whatever the paths and
contents, a load either writes every file inside a directory of its own and loads from there, or
is refused with Triton's words; nothing is written anywhere else and nothing is left behind."""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritonctl.serve.backends import registry
from tritonctl.serve.core import override_files
from tritonctl.serve.core.errors import ServeError
from tritonctl.serve.core.manager import ModelManager

segment = st.sampled_from(["1", "2", "..", ".", "", "model.py", "sub", "a b", "/", "\\", "~", "ü", "\0", "x" * 300])
paths = st.lists(segment, min_size=1, max_size=5).map("/".join)


def override_dirs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "tritonctl-override-*")))


@pytest.fixture(scope="module")
def manager(tmp_path_factory):
    repository = tmp_path_factory.mktemp("repo")
    manager = ModelManager(repository, registry(), control_mode="explicit")
    yield manager
    manager.stop(5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(paths, st.binary(max_size=64), min_size=1, max_size=3))
def test_any_file_paths_load_inside_their_own_directory_or_are_refused(manager, tmp_path, files):
    before, outside = override_dirs(), set(os.listdir(tempfile.gettempdir()))
    parameters = {"config": '{"backend": "python", "max_batch_size": 0}',
                  **{f"file:{path}": content for path, content in files.items()}}
    try:
        manager.load_from_api("from_files", parameters)
    except ServeError as exc:
        assert exc.message.startswith(("failed to load 'from_files'", "load failed for model 'from_files'"))
    entry = manager.models.get("from_files")
    kept = {str(entry.model_dir.parent)} if entry is not None and entry.owns_dir else set()
    assert override_dirs() - before <= kept  # at most the directory of the model now loaded
    new_entries = set(os.listdir(tempfile.gettempdir())) - outside
    # nothing but override directories, and the private socket directory of a stub that is starting or stopping
    assert all(name.startswith(("tritonctl-override-", "tritonctl-stub-", "tmp")) for name in new_entries)
    if kept:
        root = Path(next(iter(kept))).resolve()
        assert all(Path(p).resolve().is_relative_to(root) for p in glob.glob(f"{root}/**", recursive=True))
    manager.unload("from_files")
    assert override_dirs() <= before  # the model's files went with it


@pytest.mark.parametrize("parameters, reason", [
    ({"file:1/model.py": b"x"}, "Load parameter 'config' must be specified for model file override"),
    ({"config": "{}", "file:1/model.py": "text"}, "File parameter 'file:1/model.py' must have bytes type"),
    ({"config": "{}", "file:../x": b"x"}, "'file:' override"),
])
def test_refusals_name_the_parameter(manager, parameters, reason):
    with pytest.raises(ServeError) as refused:
        manager.load_from_api("from_files", parameters)
    assert refused.value.message.startswith("failed to load 'from_files', failed to poll from model repository: ")
    assert reason in refused.value.message


def test_base64_decoding_refuses_what_is_not_base64():
    assert override_files.decode_base64_files("m", {"file:1/a": "aGk=", "config": "{}"}) == \
        {"file:1/a": b"hi", "config": "{}"}
    with pytest.raises(ServeError, match="must hold the file's bytes in base64"):
        override_files.decode_base64_files("m", {"file:1/a": "***"})
