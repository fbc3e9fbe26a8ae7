"""`tritonctl validate` end to end: real repositories in tmp dirs, the real entry point."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli_runner import cli
from tritonctl.repo_schema.render.code_examples import working_directory, write_model

CLEAN = '''backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''
WARNING_ONLY = CLEAN + '''parameters { key: "mode" value { string_value: "a" } }
parameters { key: "mode" value { string_value: "b" } }
'''
BROKEN = CLEAN.replace("max_batch_size: 8", "max_batch_size: -1")


@pytest.fixture
def repos(tmp_path: Path):
    for name, config in (("clean", CLEAN), ("warned", WARNING_ONLY), ("broken", BROKEN)):
        write_model(tmp_path / name / "m", config)
    with working_directory(tmp_path):
        yield tmp_path


def test_clean_repository_exits_0(repos, capsys):
    code, out, _ = cli(capsys, "validate", "clean")
    assert code == 0
    assert out == "no problems in 1 model\n"


def test_errors_exit_1_with_a_code_frame(repos, capsys):
    code, out, _ = cli(capsys, "validate", "broken", "--color", "never")
    assert code == 1
    assert out.splitlines()[:5] == [
        "error[TOP03]: max_batch_size is -1; it must be 0 or more",
        " --> broken/m/config.pbtxt:2:17",
        "  |",
        "2 | max_batch_size: -1",
        "  |                 ^^ max_batch_size is negative",
    ]
    assert out.endswith("1 error in 1 model\n")


def test_warnings_exit_0_unless_strict(repos, capsys):
    assert cli(capsys, "validate", "warned")[0] == 0
    code, out, _ = cli(capsys, "validate", "warned", "--strict")
    assert code == 1 and "warning[TXT52]" in out


def test_ignore_drops_codes_and_accepts_spellings_and_commas(repos, capsys):
    code, out, _ = cli(capsys, "validate", "warned", "broken", "--strict", "--ignore", "txt-52,TOP3")
    assert (code, out) == (0, "no problems in 2 models\n")
    code, out, _ = cli(capsys, "validate", "broken", "--ignore", "TXT52")
    assert code == 1 and "TOP03" in out


def test_unknown_ignore_code_is_a_usage_error_with_a_suggestion(repos, capsys):
    code, out, err = cli(capsys, "validate", "broken", "--ignore", "TOP30")
    assert code == 2 and out == ""
    assert err == ("error: unknown diagnostic code 'TOP30'; did you mean TOP03? "
                   "(tritonctl validate --list-codes shows them all)\n")


def test_bad_path_is_a_usage_error(repos, capsys):
    code, _, err = cli(capsys, "validate", "no_such_dir")
    assert code == 2 and "no_such_dir does not exist" in err
    code, _, err = cli(capsys, "validate")
    assert code == 2 and "Usage" in err + _
    code, _, err = cli(capsys, "validate", "clean", "--format", "xml")
    assert code == 2 and "xml" in err


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_machine_formats_on_stdout(repos, capsys, fmt):
    code, out, _ = cli(capsys, "validate", "broken", "warned", "--format", fmt)
    assert code == 1
    if fmt == "json":
        assert json.loads(out)["summary"] == {"errors": 1, "warnings": 1, "notes": 0, "models_checked": 2}
    elif fmt == "sarif":
        results = json.loads(out)["runs"][0]["results"]
        assert [r["ruleId"] for r in results] == ["TOP03", "TXT52"]
    else:
        assert out.splitlines()[0].startswith("::error file=broken/m/config.pbtxt,line=2,endLine=2,col=17,")


def test_output_file_gets_the_report_and_stderr_the_summary(repos, capsys):
    code, out, err = cli(capsys, "validate", "broken", "--format", "sarif", "--output", "report.sarif")
    assert code == 1 and out == ""
    assert err == "wrote report.sarif: 1 error in 1 model\n"
    assert json.loads((repos / "report.sarif").read_text())["version"] == "2.1.0"


def test_color_always_and_never(repos, capsys):
    _, coloured, _ = cli(capsys, "validate", "broken", "--color", "always")
    assert "\x1b[" in coloured
    _, plain, _ = cli(capsys, "validate", "broken", "--color", "never")
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain


def test_explain_needs_no_path_and_shows_a_real_example(capsys):
    code, out, _ = cli(capsys, "validate", "--explain", "top-3")
    assert code == 0
    assert out.startswith("TOP03: max_batch_size is negative\n\nseverity: error\nmirrors:  Triton rule TOP-03")
    assert "'max_batch_size' must be non-negative value" in out
    assert "Example: a repository holding" in out and "    error[TOP03]: max_batch_size is -1" in out


def test_explain_unknown_code_suggests(capsys):
    code, out, err = cli(capsys, "validate", "--explain", "TXY02")
    assert code == 2 and out == "" and "did you mean TXT02?" in err


def test_list_codes(capsys):
    code, out, _ = cli(capsys, "validate", "--list-codes")
    assert code == 0
    assert out.splitlines()[0].split() == ["CODE", "SEVERITY", "FIX", "TITLE", "TRITON", "RULE"]
    assert re.search(r"^TXT02\s+error\s+yes\s+unknown field\s+TXT-02$", out, re.M)
    assert re.search(r"^TXT05\s+error\s+-\s+two members of a oneof are set\s+TXT-05$", out, re.M)


def test_help_has_examples(capsys):
    code, out, _ = cli(capsys, "validate", "--help")
    assert code == 0 and "tritonctl validate --explain IO03" in out and "--list-codes" in out


def test_installed_entry_point_and_no_color_environment(repos):
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": ""}
    run = subprocess.run([sys.executable, "-m", "tritonctl", "validate", "broken", "--color", "auto"],
                         capture_output=True, text=True, env=env, cwd=repos, timeout=60)
    assert run.returncode == 1
    assert "\x1b[" not in run.stdout and "error[TOP03]" in run.stdout


def test_validate_does_not_import_heavy_libraries(repos):
    probe = ("import sys; from tritonctl.cli.app import main\n"
             "try:\n    main(['validate', 'clean'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('onnxruntime', 'torch', 'tensorrt', 'grpc', 'pandas') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=repos, timeout=60)
    assert run.stdout.strip().splitlines()[-1] == "[]", run.stderr


def test_pre_commit_hook_runs_validate_on_config_files(repos, capsys):
    manifest = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    fields = dict(re.findall(r"^\s*-?\s*(\w+): (.+)$", manifest, re.M))
    assert fields["id"] == "tritonctl-validate" and fields["pass_filenames"] == "true"
    pattern = re.compile(fields["files"])
    assert pattern.search("models/resnet/config.pbtxt") and pattern.search("config.pbtxt")
    assert pattern.search("models/resnet/configs/prod.pbtxt")
    assert not pattern.search("models/resnet/1/model.py") and not pattern.search("models/x/myconfig.pbtxt")
    # pre-commit appends the changed files to the entry: each config is checked on its own.
    entry = fields["entry"].split()
    assert entry[:2] == ["tritonctl", "validate"]
    code, out, _ = cli(capsys, *entry[1:], "clean/m/config.pbtxt", "broken/m/config.pbtxt")
    assert code == 1 and "broken/m/config.pbtxt:2:17" in out and out.endswith("1 error, 1 note in 2 models\n")
    assert "not checked without the repository" in out


def test_output_dash_means_stdout(repos, capsys):
    code, out, err = cli(capsys, "validate", "broken", "--format", "json", "--output", "-")
    assert code == 1 and json.loads(out)["summary"]["errors"] == 1 and err == ""


def test_a_custom_config_file_is_checked_as_its_model(tmp_path):
    from tritonctl.repo_schema.validate import validate_paths

    model = tmp_path / "repo" / "m"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("class TritonPythonModel:\n    def execute(self, requests):\n        return []\n")
    (model / "configs").mkdir()
    custom = model / "configs" / "prod.pbtxt"
    custom.write_text('name: "m"\nbackend: "python"\nmax_batch_size: -1\n')
    report = validate_paths([custom])
    found = [(d.code, d.path, d.model) for d in report.diagnostics]
    assert found == [("REPO54", custom, None), ("TOP03", custom, "m")]
    assert report.diagnostics[0].message == "not checked without the repository: version directories, model files"


def _without_read_override(args: list[str]) -> list[str]:
    """``args`` run so that file permissions apply (root reads unreadable files otherwise)."""
    if os.geteuid() != 0:
        return args
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv, so file permissions cannot be made to apply")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", *args]


def test_unreadable_config_is_one_error_and_the_other_models_are_still_checked(repos):
    write_model(repos / "perm" / "open", CLEAN)
    write_model(repos / "perm" / "locked", CLEAN)
    write_model(repos / "perm" / "hidden", CLEAN)
    (repos / "perm" / "locked" / "config.pbtxt").chmod(0)
    (repos / "perm" / "hidden").chmod(0o600)  # the directory cannot be searched
    try:
        run = subprocess.run(_without_read_override([sys.executable, "-m", "tritonctl", "validate", "perm",
                                                     "--format", "json"]),
                             capture_output=True, text=True, cwd=repos, timeout=60)
    finally:
        (repos / "perm" / "hidden").chmod(0o755)
        (repos / "perm" / "locked" / "config.pbtxt").chmod(0o644)
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    found = sorted((Path(d["path"]).parent.name, d["code"], d["message"]) for d in report["diagnostics"])
    assert found == [("hidden", "TXT08", "cannot read config.pbtxt: Permission denied"),
                     ("locked", "TXT08", "cannot read config.pbtxt: Permission denied")]
    assert report["summary"]["models_checked"] == 3


def test_a_config_that_is_not_utf8_is_a_warning_at_the_first_bad_byte(tmp_path, capsys):
    config = tmp_path / "m" / "config.pbtxt"
    config.parent.mkdir()
    config.write_bytes(CLEAN.encode().replace(b"max_batch_size: 8", b"# r\xe9sum\xe9\nmax_batch_size: 8"))
    code, out, _ = cli(capsys, "validate", str(config), "--format", "json")
    found = [d for d in json.loads(out)["diagnostics"] if d["code"] != "REPO54"]
    assert code == 0 and [(d["code"], d["line"], d["column"]) for d in found] == [("TXT54", 2, 4)]
    assert found[0]["message"] == "config.pbtxt is not UTF-8: byte 0xe9 at line 2, column 4"
    assert cli(capsys, "validate", str(config), "--strict")[0] == 1
    config.write_text(CLEAN.replace("max_batch_size: 8", "# résumé\nmax_batch_size: 8"), encoding="utf-8")
    assert cli(capsys, "validate", str(config), "--strict")[0] == 0


def test_a_config_nested_too_deep_is_reported_and_left_alone(tmp_path, capsys):
    config = tmp_path / "m" / "config.pbtxt"
    config.parent.mkdir()
    text = 'backend: "python"\n' + "x { " * 20000 + "}" * 20000 + "\n"
    config.write_text(text)
    code, out, err = cli(capsys, "validate", str(config))
    assert code == 1 and "error[TXT02]: unknown field 'x' in ModelConfig" in out and "Recursion" not in out + err
    code, out, err = cli(capsys, "validate", str(config), "--fix")
    assert code == 1 and "Recursion" not in out + err and config.read_text() == text


def test_a_byte_order_mark_is_named(tmp_path, capsys):
    config = tmp_path / "m" / "config.pbtxt"
    config.parent.mkdir()
    config.write_bytes(b"\xef\xbb\xbf" + CLEAN.encode())
    code, out, _ = cli(capsys, "validate", str(config), "--format", "json")
    found = [d for d in json.loads(out)["diagnostics"] if d["severity"] == "error"]
    assert code == 1 and [(d["code"], d["line"], d["column"]) for d in found] == [("TXT01", 1, 1)]
    assert "byte order mark" in found[0]["message"] and "without a BOM" in found[0]["hint"]
