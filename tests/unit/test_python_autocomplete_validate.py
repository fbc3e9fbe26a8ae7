"""validate evaluates a Python model's auto_complete_config as Triton does: in a separate process,
with a time limit and Triton's pb_utils.ModelConfig API, then checks the completed config.

The 17 failing and 11 loading cases of Triton's QA (server qa/L0_model_config,
autofill_noplatform[_success]/python) are rebuilt here with model.py files written for this test;
the failure texts are the `expected` lines Triton's QA greps its log for.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.cli_runner import cli
from tritonctl.repo_schema.context import CheckOptions
from tritonctl.repo_schema.python_autocomplete import ModelCodePolicy, parse_completed
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.repo_schema.validate import validate_paths, validate_repository

AUTOFILL_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "realworld_configs" / "corpus_autofill_python"


def tensor(name: str, dtype: str | None = "TYPE_FP32", dims: list | None = None, **extra) -> dict:
    entry = {"name": name} if name else {}
    if dtype:
        entry["data_type"] = dtype
    if dims is not None:
        entry["dims"] = dims
    return {**entry, **extra}


def model_py(*calls: str, returns: bool = True, header: str = "") -> str:
    """A model whose auto_complete_config makes ``calls`` on the config it gets."""
    body = "".join(f"        config.{call}\n" for call in calls)
    if returns:
        body += "        return config\n"
    return (f"{header}import triton_python_backend_utils as pb_utils\n\n\n"
            "class TritonPythonModel:\n"
            "    @staticmethod\n"
            "    def auto_complete_config(config):\n"
            f"{body}\n"
            "    def execute(self, requests):\n"
            "        return [pb_utils.InferenceResponse([]) for _ in requests]\n")


def adds(mbs: int = 0, inputs=None, outputs=None, extra=()) -> list[str]:
    """set_max_batch_size(mbs), ``extra`` calls, then add_input / add_output of each tensor."""
    four = [4]
    inputs = inputs if inputs is not None else [tensor("INPUT0", dims=four), tensor("INPUT1", dims=four)]
    outputs = outputs if outputs is not None else [tensor("OUTPUT0", dims=four), tensor("OUTPUT1", dims=four)]
    return ([f"set_max_batch_size({mbs})", *extra] + [f"add_input({t!r})" for t in inputs]
            + [f"add_output({t!r})" for t in outputs])


def io_config(name: str | None, in_types=("TYPE_FP32", "TYPE_FP32"), in_dims=(4, 4),
              out_types=("TYPE_FP32", "TYPE_FP32"), out_dims=(4, 4), top: str = "") -> str:
    head = f'name: "{name}"\n' if name else ""
    inputs = ", ".join(f'{{ name: "INPUT{i}" data_type: {t} dims: [ {d} ] }}' for i, (t, d) in
                       enumerate(zip(in_types, in_dims)))
    outputs = ", ".join(f'{{ name: "OUTPUT{i}" data_type: {t} dims: [ {d} ] }}' for i, (t, d) in
                        enumerate(zip(out_types, out_dims)))
    return f"{head}{top}input [ {inputs} ]\noutput [ {outputs} ]\n"


SHAPE_TENSOR_INPUT = [tensor("INPUT0", dims=[4]), {**tensor("INPUT1", dims=[4]), "is_shape_tensor:": True}]
SHAPE_TENSOR_OUTPUT = [tensor("OUTPUT0", dims=[4]), {**tensor("OUTPUT1", dims=[4]), "is_shape_tensor:": True}]

# name -> (config.pbtxt, model.py, Triton's error text)
FAILURES = {
    "conflicting_max_batch_size": (
        io_config("conflicting_max_batch_size", top="max_batch_size: 6\n"), model_py(*adds(4)),
        "configuration specified max_batch_size 6, but in auto-complete-config function for model "
        "'conflicting_max_batch_size' specified max_batch_size 4"),
    "conflicting_scheduler_sequence": (
        io_config("conflicting_scheduler_sequence") + "sequence_batching: { }\n",
        model_py(*adds(4, extra=["set_dynamic_batching()"])),
        "Configuration specified scheduling_choice as 'sequence_batching', but auto-complete-config function for "
        "model 'conflicting_scheduler_sequence' tries to set scheduling_choice as 'dynamic_batching'"),
    "input_mismatch_datatype": (
        io_config("input_mismatch_datatype", in_types=("TYPE_FP32", "TYPE_INT32")), model_py(*adds(0)),
        "unable to load model 'input_mismatch_datatype', configuration expects datatype TYPE_INT32 for input "
        "'INPUT1', model provides TYPE_FP32"),
    "input_mismatch_dims": (
        io_config("input_mismatch_dims", in_dims=(4, 16)), model_py(*adds(0)),
        "model 'input_mismatch_dims', tensor 'INPUT1': the model expects dims [4] but the model configuration "
        "specifies dims [16]"),
    "input_missing_datatype": (
        io_config("input_missing_datatype"),
        model_py(*adds(0, inputs=[tensor("INPUT0", dtype=None, dims=[4]), tensor("INPUT1", dims=[4])])),
        "input 'INPUT0' in auto-complete-config function for model 'input_missing_datatype' is missing "
        "'data_type' property."),
    "input_missing_dims": (
        io_config("input_missing_dims"), model_py(*adds(0, inputs=[tensor("INPUT0", dims=[4]), tensor("INPUT1")])),
        "input 'INPUT1' in auto-complete-config function for model 'input_missing_dims' is missing 'dims' "
        "property."),
    "input_missing_name": (
        io_config("input_missing_name"), model_py(*adds(0, inputs=[tensor("INPUT0", dims=[4]), tensor("", dims=[4])])),
        "input in auto-complete-config function for model 'input_missing_name' is missing 'name' property."),
    "input_wrong_property": (
        io_config("input_wrong_property"), model_py(*adds(0, inputs=SHAPE_TENSOR_INPUT)),
        "input 'INPUT1' in auto-complete-config function for model 'input_wrong_property' contains property other "
        "than 'name', 'data_type', 'dims' and 'optional'."),
    "model_transaction_policy_invalid_args": (
        io_config(None), model_py(*adds(4, extra=['set_model_transaction_policy({"invalid": "argument"})'])),
        "model transaction property in auto-complete-config function for model "
        "'model_transaction_policy_invalid_args' contains property other than 'decoupled'"),
    "model_transaction_policy_mismatch": (
        io_config(None, top="model_transaction_policy { decoupled: false }\n"),
        model_py(*adds(4, extra=['set_model_transaction_policy({"decoupled": True})'])),
        "trying to change decoupled property in auto-complete-config for model "
        "'model_transaction_policy_mismatch', which is already set to 'False'"),
    "no_return": (
        io_config("no_return"), model_py(*adds(0), returns=False),
        "auto_complete_config function in model 'no_return' must return a valid pb.ModelConfig object."),
    "output_mismatch_datatype": (
        io_config("output_mismatch_datatype", out_types=("TYPE_INT32", "TYPE_FP32")), model_py(*adds(0)),
        "unable to load model 'output_mismatch_datatype', configuration expects datatype TYPE_INT32 for output "
        "'OUTPUT0', model provides TYPE_FP32"),
    "output_mismatch_dims": (
        io_config("output_mismatch_dims", out_dims=(4, 16)), model_py(*adds(0)),
        "model 'output_mismatch_dims', tensor 'OUTPUT1': the model expects dims [4] but the model configuration "
        "specifies dims [16]"),
    "output_missing_datatype": (
        io_config("output_missing_datatype"),
        model_py(*adds(0, outputs=[tensor("OUTPUT0", dtype=None, dims=[4]), tensor("OUTPUT1", dims=[4])])),
        "output 'OUTPUT0' in auto-complete-config function for model 'output_missing_datatype' is missing "
        "'data_type' property."),
    "output_missing_dims": (
        io_config("output_missing_dims"),
        model_py(*adds(0, outputs=[tensor("OUTPUT0", dims=[4]), tensor("OUTPUT1")])),
        "output 'OUTPUT1' in auto-complete-config function for model 'output_missing_dims' is missing 'dims' "
        "property."),
    "output_missing_name": (
        io_config("output_missing_name"),
        model_py(*adds(0, outputs=[tensor("OUTPUT0", dims=[4]), tensor("", dims=[4])])),
        "output in auto-complete-config function for model 'output_missing_name' is missing 'name' property."),
    "output_wrong_property": (
        io_config("output_wrong_property"), model_py(*adds(0, outputs=SHAPE_TENSOR_OUTPUT)),
        "output 'OUTPUT1' in auto-complete-config function for model 'output_wrong_property' contains property "
        "other than 'name', 'data_type' and 'dims'."),
}

STANDARD = model_py(*adds(0))
BATCHING = model_py(*adds(4, extra=["set_dynamic_batching()"]))
# Model code of the 11 loading cases, by case name.
SUCCESS_MODELS = {
    "dynamic_batching": BATCHING,
    "dynamic_batching_no_op": BATCHING,
    "empty_config": STANDARD,
    "incomplete_input": model_py(*adds(0, inputs=[tensor("INPUT0", dims=[4])])),
    "incomplete_output": STANDARD,
    "model_transaction_policy": model_py(*adds(4, extra=['set_model_transaction_policy({"decoupled": True})'])),
    "model_transaction_policy_decoupled_false": model_py(
        *adds(4, extra=['set_model_transaction_policy({"decoupled": False})'])),
    "model_transaction_policy_no_op": model_py(*adds(4, extra=['set_model_transaction_policy({"decoupled": True})'])),
    "optional_input": model_py(*adds(0, inputs=[tensor("INPUT0", dims=[4], optional=True)])),
    "unknown_input": STANDARD,
    "unknown_output": STANDARD,
}


def write(repo: Path, name: str, config: str | None, model: str, filename: str = "model.py") -> Path:
    (repo / name / "1").mkdir(parents=True)
    if config is not None:
        (repo / name / "config.pbtxt").write_text(config)
    (repo / name / "1" / filename).write_text(model)
    return repo / name


def test_the_17_failing_qa_cases_are_refused_with_tritons_words(tmp_path):
    assert len(FAILURES) == 17
    repo = tmp_path / "repo"
    for name, (config, model, _) in FAILURES.items():
        write(repo, name, config, model)
    report = validate_paths([repo])
    for name, (_, _, expected) in FAILURES.items():
        errors = [d for d in report.diagnostics if d.model == name and d.severity.value == "error"]
        assert [d.code for d in errors] == ["AC04"], (name, [(d.code, d.message) for d in errors])
        assert expected in errors[0].message, (name, errors[0].message)
        assert errors[0].path == repo / name / "1" / "model.py" or errors[0].path == repo / name / "config.pbtxt"


def test_a_failure_points_at_the_model_py_line_that_raised(tmp_path, capsys):
    repo = tmp_path / "repo"
    config, model, expected = FAILURES["input_mismatch_dims"]
    write(repo, "input_mismatch_dims", config, model)
    status, out, _ = cli(capsys, "validate", str(repo), "--color", "never")
    assert status == 1
    line = next(i for i, text in enumerate(model.splitlines(), 1) if "'INPUT1'" in text)
    assert f"error[AC04]: model 'input_mismatch_dims' does not load: auto_complete_config raises ValueError: " \
           f"{expected} (at model.py:{line} in auto_complete_config)" in out
    assert f"input_mismatch_dims/1/model.py:{line}:9" in out


@pytest.fixture(scope="module")
def success_repo(tmp_path_factory):
    if not AUTOFILL_CORPUS.is_dir():
        pytest.skip(f"Triton's Python auto-complete QA configs are not here ({AUTOFILL_CORPUS})")
    repo = tmp_path_factory.mktemp("autofill") / "repo"
    for file in sorted(AUTOFILL_CORPUS.glob("*.pbtxt")):
        name = file.name.split("__python__")[1].removesuffix("__config.pbtxt")
        write(repo, name, file.read_text(), SUCCESS_MODELS[name])
    return repo


def test_the_11_loading_qa_cases_are_clean(success_repo, capsys):
    assert sorted(p.name for p in success_repo.iterdir()) == sorted(SUCCESS_MODELS)
    status, out, err = cli(capsys, "validate", str(success_repo), "--strict", "--color", "never")
    assert status == 0, out + err
    assert "error[" not in out and "warning[" not in out


def _io(entries) -> list[tuple]:
    data_type = model_config_pb2().DataType.Name
    return [(e.name, data_type(e.data_type), list(e.dims), getattr(e, "optional", False)) for e in entries]


def test_the_completed_configs_are_the_ones_triton_loads(success_repo):
    """Compared with the configs Triton's QA expects the server to report (its `expected` files)."""
    models = validate_repository(success_repo).models
    four = ("TYPE_FP32", [4], False)
    both_in = [("INPUT0", *four), ("INPUT1", *four)]
    both_out = [("OUTPUT0", *four), ("OUTPUT1", *four)]
    expected_inputs = {
        "incomplete_output": both_in, "empty_config": both_in, "dynamic_batching": both_in,
        "unknown_input": [("INPUT0", *four), ("INPUT_UNKNOWN", *four), ("INPUT1", *four)],
        "incomplete_input": [("INPUT1", *four), ("INPUT0", *four)],
        "optional_input": [("INPUT1", *four), ("INPUT0", "TYPE_FP32", [4], True)],
    }
    for name, inputs in expected_inputs.items():
        assert _io(models[name].effective.input) == inputs, name
    assert _io(models["incomplete_output"].effective.output) == both_out
    assert _io(models["unknown_output"].effective.output) == [("OUTPUT_UNKNOWN", *four), ("OUTPUT1", *four),
                                                              ("OUTPUT0", *four)]
    batching = models["dynamic_batching"].effective
    assert batching.max_batch_size == 4 and list(batching.dynamic_batching.preferred_batch_size) == [4]
    assert models["empty_config"].effective.backend == "python"
    assert models["model_transaction_policy"].effective.model_transaction_policy.decoupled
    assert not models["model_transaction_policy_decoupled_false"].effective.model_transaction_policy.decoupled


def test_the_completed_config_is_checked(tmp_path):
    """What auto_complete_config leaves incomplete, or adds wrongly, is reported like a written config."""
    repo = tmp_path / "repo"
    config = 'backend: "python"\noutput [ { name: "OUTPUT0" }, { name: "OUTPUT1" } ]\n'
    write(repo, "half", config, model_py(*adds(0, inputs=[tensor("INPUT0", dims=[4])],
                                              outputs=[tensor("OUTPUT0", dims=[4])])))
    write(repo, "zero_dim", None, model_py(*adds(0, inputs=[tensor("INPUT0", dims=[0])],
                                                   outputs=[tensor("OUTPUT0", dims=[4])])))
    found = {(d.model, d.code, d.message) for d in validate_paths([repo]).diagnostics if d.severity.value == "error"}
    assert found == {("half", "IO02", "output 'OUTPUT1' has no data_type"),
                     ("half", "IO03", "output 'OUTPUT1' has no dims"),
                     ("zero_dim", "IO04", "input 'INPUT0' has dimension 0; dimensions must be >= 1 or -1")}


def test_without_auto_complete_config_nothing_runs_and_a_partial_config_is_an_error(tmp_path):
    repo = tmp_path / "repo"
    plain = "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    write(repo, "plain", 'backend: "python"\noutput [ { name: "OUT" data_type: TYPE_FP32 } ]\n', plain)
    codes = [d.code for d in validate_paths([repo]).diagnostics]
    assert codes == ["IO03"]


SENTINEL_MODEL = """
from pathlib import Path
Path(__file__).with_name("ran").write_text("model code ran")

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]})
        return config

    def execute(self, requests):
        return []
"""


def test_no_exec_never_runs_model_code(tmp_path, capsys):
    repo = tmp_path / "repo"
    model_dir = write(repo, "m", 'backend: "python"\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                      'output [ { name: "OUT" } ]\n', SENTINEL_MODEL)
    status, out, _ = cli(capsys, "validate", str(repo), "--no-exec", "--color", "never")
    assert not (model_dir / "1" / "ran").exists()
    assert status == 0, out
    assert "note[AC52]: auto_complete_config of model 'm' not evaluated: model code is not run (--no-exec)" in out
    assert "IO02" not in out and "IO03" not in out  # what the function may fill in is not judged
    status, out, _ = cli(capsys, "validate", str(repo), "--color", "never")
    assert (model_dir / "1" / "ran").read_text() == "model code ran"
    assert status == 0 and "AC52" not in out, out


HANGING = """
import time

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        time.sleep(3600)
        return config

    def execute(self, requests):
        return []
"""
CRASHING = """
import os

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        os._exit(3)

    def execute(self, requests):
        return []
"""
SEGFAULTING = """
import os, signal

print("loading the native extension")

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        os.kill(os.getpid(), signal.SIGSEGV)

    def execute(self, requests):
        return []
"""


def test_a_hanging_or_crashing_auto_complete_config_gets_a_clear_diagnostic(tmp_path):
    repo = tmp_path / "repo"
    config = 'backend: "python"\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' \
             'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    for name, model in (("hangs", HANGING), ("exits", CRASHING), ("segfaults", SEGFAULTING)):
        write(repo, name, config, model)
    report = validate_paths([repo], options=CheckOptions(model_code=ModelCodePolicy(timeout_s=3)))
    found = {d.model: (d.code, d.severity.value, d.message) for d in report.diagnostics}
    assert found["hangs"] == ("AC05", "error", "model 'hangs' does not load: importing model.py and running "
                                               "auto_complete_config took longer than 3 s")
    assert found["exits"] == ("AC05", "error", "model 'exits' does not load: the process running "
                                               "auto_complete_config exited with status 3 before it returned")
    assert found["segfaults"] == ("AC05", "error", "model 'segfaults' does not load: the process running "
                                                   "auto_complete_config was killed by SIGSEGV before it returned; "
                                                   "its last output: loading the native extension")


DETACHING = """
import subprocess, sys, time
from pathlib import Path

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True)
        Path(__file__).with_name("helper.pid").write_text(str(helper.pid))
        time.sleep(3600)

    def execute(self, requests):
        return []
"""


def test_a_process_the_model_detaches_does_not_keep_validate_waiting(tmp_path):
    """The helper leaves the stub's session, so killing the stub's group spares it, and it holds
    the stub's output pipe: validate stops reading after a grace period."""
    repo = tmp_path / "repo"
    model_dir = write(repo, "detaches", 'backend: "python"\n', DETACHING)
    try:
        report = validate_paths([repo], options=CheckOptions(model_code=ModelCodePolicy(timeout_s=3)))
        assert [(d.code, d.message) for d in report.diagnostics if d.severity.value == "error"] == [
            ("AC05", "model 'detaches' does not load: importing model.py and running auto_complete_config took "
                     "longer than 3 s")]
    finally:
        pid_file = model_dir / "1" / "helper.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_package_missing_here_is_a_note_not_an_error(tmp_path, capsys):
    repo = tmp_path / "repo"
    write(repo, "m", 'backend: "python"\noutput [ { name: "OUT" } ]\n',
          model_py('add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]})',
                   header="import package_that_is_not_installed_anywhere\n"))
    status, out, _ = cli(capsys, "validate", str(repo), "--color", "never")
    assert status == 0, out
    assert ("note[AC52]: auto_complete_config of model 'm' not evaluated: it imports "
            "'package_that_is_not_installed_anywhere', which is not installed here (at model.py:1 in <module>)") in out


def test_server_only_pb_utils_parts_are_a_note(tmp_path):
    repo = tmp_path / "repo"
    write(repo, "m", 'backend: "python"\n', model_py("add_output(pb_utils.Tensor)"))
    found = [(d.code, d.message) for d in validate_paths([repo]).diagnostics]
    assert [code for code, _ in found] == ["AC52"]
    assert "it uses pb_utils.Tensor, which exists only in a running server" in found[0][1]


def test_a_returned_config_that_is_not_a_model_config_is_refused(tmp_path):
    repo = tmp_path / "repo"
    write(repo, "m", 'backend: "python"\n', model_py('as_dict()["input"].append({"name": "X", "data_type": '
                                                      '"TYPE_FLOAT32", "dims": [1]})'))
    found = [(d.code, d.message) for d in validate_paths([repo]).diagnostics]
    assert [code for code, _ in found] == ["AC04"]
    assert "auto_complete_config returned a config Triton cannot parse" in found[0][1]
    assert "TYPE_FLOAT32" in found[0][1]


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner,
                                                                                max_size=4), max_leaves=12)
FIELDS = st.sampled_from(["name", "max_batch_size", "input", "output", "dynamic_batching", "backend", "dims",
                          "data_type", "model_transaction_policy", "instance_group", "parameters"])


@settings(max_examples=200, deadline=None)
@given(st.one_of(JSON, st.dictionaries(FIELDS, JSON, max_size=5)))
def test_any_returned_json_gives_a_config_or_a_reason(value):
    config, problem = parse_completed(json.dumps(value), model_config_pb2().ModelConfig)
    assert (config is None) == bool(problem)
    if config is None:
        assert problem.startswith("auto_complete_config returned a config")


def test_generate_effective_shows_the_completed_config(tmp_path, capsys):
    model_dir = write(tmp_path / "repo", "m", 'backend: "python"\noutput [ { name: "OUTPUT0" } ]\n', BATCHING)
    status, out, err = cli(capsys, "generate", "--effective", str(model_dir), "--format", "json", "--gpus", "0")
    assert status == 0, err
    config = json.loads(out)
    assert config["max_batch_size"] == 4 and config["dynamic_batching"]["preferred_batch_size"] == [4]
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["output"]] == [
        ("OUTPUT0", "TYPE_FP32", [4]), ("OUTPUT1", "TYPE_FP32", [4])]
    refused = write(tmp_path / "repo", "refused", FAILURES["no_return"][0].replace("no_return", "refused"),
                    FAILURES["no_return"][1])
    status, _, err = cli(capsys, "generate", "--effective", str(refused), "--gpus", "0")
    assert status == 1
    assert "error[AC04]: model 'refused' does not load: auto_complete_config function in model 'refused' must " \
           "return a valid pb.ModelConfig object." in err
