"""perf_analyzer input-data files from outside: several files read together, and hostile or broken
files, each refused with an error that names the file and what is wrong (never another exception)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tritonctl.perf.client import ModelInfo, TensorSpec
from tritonctl.perf.input_data import read_data
from tritonctl.perf.options import PerfError

PAIR = ModelInfo("pair", 8, (TensorSpec("INPUT0", "FP32", (-1, 4)), TensorSpec("INPUT1", "INT32", (-1, 4))),
                 (TensorSpec("OUTPUT0", "FP32", (-1, 4)),))
SEQ = ModelInfo("seq", 4, (TensorSpec("INPUT", "INT32", (-1, 1)),), (), sequence=True)
TEXT = ModelInfo("text", 0, (TensorSpec("TEXT", "BYTES", (2,)),), ())
SHAPES = {"INPUT0": (4,), "INPUT1": (4,), "INPUT": (1,), "TEXT": (2,)}
ENTRY = {"INPUT0": [1, 2, 3, 4], "INPUT1": [5, 6, 7, 8]}


def write(path: Path, document) -> Path:
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_several_files_append_entries_or_streams_as_perf_analyzer_does(tmp_path):
    one = write(tmp_path / "one.json", {"data": [ENTRY]})
    two = write(tmp_path / "two.json", {"data": [ENTRY, ENTRY]})
    assert [len(s) for s in read_data([one, two], PAIR, SHAPES).streams] == [3]
    first = write(tmp_path / "s1.json", {"data": [[{"INPUT": [1]}, {"INPUT": [2]}]]})
    second = write(tmp_path / "s2.json", {"data": [[{"INPUT": [3]}], [{"INPUT": [4]}]]})
    assert [len(s) for s in read_data([first, second], SEQ, SHAPES).streams] == [2, 1, 1]
    flat = write(tmp_path / "flat.json", {"data": [{"INPUT": [5]}]})
    with pytest.raises(PerfError, match=f"{flat}: its \"data\" is entries but that of {first} is streams"):
        read_data([first, flat], SEQ, SHAPES)
    with pytest.raises(PerfError, match="several --input-data take JSON files only"):
        read_data([one, tmp_path], PAIR, SHAPES)


@pytest.mark.parametrize("content, fragment", [
    ("[" * 5000 + "]" * 5000, "nested too deeply to read"),
    (b"\xff\xfe{\"data\": []}", "cannot read it as UTF-8 text"),
    ("{\"data\": [", "not valid JSON"),
    ("", "not valid JSON"),
    ("[]", "no \"data\" list"),
    ({"data": [{"INPUT0": [[[[[[1, 2, 3, 4]]]]]], "INPUT1": [1, 2, 3, 4]}]}, None),  # nested lists are flattened
    ({"data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 2, 3, 2**40]}]}, "'INPUT1' is INT32: a value is out"),
    ({"data": [{"INPUT0": [1, 2, 3, 1e300], "INPUT1": [1, 2, 3, 4]}]}, "'INPUT0' is FP32: a value is out"),
    ({"data": [{"INPUT0": [1, 2, 3, "NaN"], "INPUT1": [1, 2, 3, 4]}]}, "is not a number"),
    ({"data": [{"INPUT0": [1, 2, 3, True], "INPUT1": [1, 2, 3, 4]}]}, "true is not a number"),
    ({"data": [{"INPUT0": {"content": {"b64": 7}}, "INPUT1": [1, 2, 3, 4]}]}, "must be a base64 string"),
    ({"data": [{"INPUT0": {"content": [1] * 4, "shape": [2**62, 2**62]}, "INPUT1": [1, 2, 3, 4]}]},
     "does not fit the model's dims"),
    ({"data": [{"INPUT0": {"content": [1] * 4, "shape": [-4]}, "INPUT1": [1, 2, 3, 4]}]}, "whole numbers >= 0"),
    ({"data": [[]]}, "not a mix or other values"),
    ({"data": [ENTRY], "validation_data": [[{"OUTPUT0": [1, 2, 3, 4]}]]}, "one entry per entry of \"data\""),
    ({"data": [dict(ENTRY, timestamp=5)]}, "'timestamp' is not an input"),
])
def test_hostile_json_files_are_refused_naming_the_file(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        write(path, content)
    if fragment is None:
        assert read_data([path], PAIR, SHAPES).samples[0].inputs["INPUT0"].tolist() == [1, 2, 3, 4]
        return
    with pytest.raises(PerfError) as error:
        read_data([path], PAIR, SHAPES)
    assert str(error.value).startswith(f"--input-data {path}") and fragment in str(error.value)


def test_directory_files_that_are_binary_empty_or_unreadable(tmp_path):
    (tmp_path / "TEXT").write_bytes(b"\xff\x00\n\x01")  # BYTES elements need not be UTF-8
    assert read_data([tmp_path], TEXT, SHAPES).samples[0].inputs["TEXT"].tolist() == [b"\xff\x00", b"\x01"]
    (tmp_path / "TEXT").write_bytes(b"")
    with pytest.raises(PerfError, match="TEXT: the file is empty"):
        read_data([tmp_path], TEXT, SHAPES)
    (tmp_path / "TEXT").unlink()
    (tmp_path / "TEXT").mkdir()
    with pytest.raises(PerfError, match="no file 'TEXT'"):
        read_data([tmp_path], TEXT, SHAPES)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(
                        st.sampled_from(["data", "validation_data", "INPUT0", "INPUT1", "OUTPUT0", "content",
                                         "shape", "b64", "x"]), inner, max_size=4), max_leaves=30)
TENSOR = st.one_of(st.lists(st.integers(-5, 5) | st.floats(allow_nan=True), max_size=6), JSON,
                   st.fixed_dictionaries({"content": JSON}, optional={"shape": JSON, "b64": JSON}))


@given(document=JSON | st.fixed_dictionaries({"data": st.lists(st.dictionaries(
    st.sampled_from(["INPUT0", "INPUT1", "model", "other"]), TENSOR, max_size=3), max_size=3)},
    optional={"validation_data": JSON}))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_json_document_reads_or_gives_a_perf_error(tmp_path, document):
    path = write(tmp_path / "fuzz.json", json.dumps(document))
    try:
        data = read_data([path], PAIR, SHAPES)
    except PerfError as error:
        assert str(error).startswith(f"--input-data {path}")
    else:
        assert all(sample.inputs["INPUT0"].shape == (4,) for sample in data.samples)
