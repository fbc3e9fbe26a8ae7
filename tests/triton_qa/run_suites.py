"""Run Triton's own QA suites (``qa/`` of triton-inference-server/server, copied under
``upstream/``) against ``tritonctl serve`` and, where it is set up, against the real Triton 2.51
of ``../shared/anchors``, and tabulate the outcome of every case.

Per suite, as its ``test.sh`` does: the model repository is built in a temporary directory
(Python models stand in for Triton's C++ identity backend and its ONNX identity models), one
fresh server is started on free ports (the staged copies of the tests get them in place of the
8000/8001/8002 they hardcode), the suite's unittest cases run with unittest (as test.sh runs them) with the environment variables they read, and the
server is stopped. Cases that need a GPU, CUDA shared memory, a C++ backend or Triton's
internals are not run and are counted as not applicable, with the reason.

    python tests/triton_qa/run_suites.py                       # every suite, both servers
    python tests/triton_qa/run_suites.py L0_nan_inf --engine tritonctl
    python tests/triton_qa/run_suites.py --markdown docs/qa_table.md --json results.json

Exit status 0 when every case the real Triton passes (or, without it, every applicable case)
passes on ``tritonctl serve`` too.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(HERE))

from suites import FETCHED, SUITES, Phase, Suite  # noqa: E402

UPSTREAM_PORTS = (8000, 8001, 8002)  # what the tests hardcode: localhost:8000 / :8001 / :8002
PORT_PATTERN = re.compile(r"(?<=:)(8000|8001|8002)\b")
ENGINES = ("tritonctl", "triton")
# Triton's QA clients run with numpy 1.x (some tests use np.NINF, np.object); a virtualenv with
# numpy<2, tritonclient[all], pytest, pytest-timeout and requests, made once (see README.md).
CLIENT_VENV = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tritonctl-qa-client"


def default_client_python() -> str:
    if os.environ.get("QA_CLIENT_PYTHON"):
        return os.environ["QA_CLIENT_PYTHON"]
    candidate = CLIENT_VENV / "bin" / "python"
    return str(candidate) if candidate.is_file() else sys.executable


@dataclass
class CaseResult:
    outcome: str  # passed | failed | error | skipped | not_applicable
    message: str = ""
    seconds: float = 0.0


@dataclass
class SuiteRun:
    suite: str
    engine: str
    cases: dict[str, CaseResult] = field(default_factory=dict)
    problem: str = ""  # why nothing ran (server did not start, engine absent)
    seconds: float = 0.0


def _free_ports() -> tuple[int, int, int]:
    from tritonctl.analyzer.engine import free_ports
    return tuple(free_ports(3))


def _ready(port: int, timeout_s: float, process: subprocess.Popen) -> bool:
    """Wait until the server answers /v2/health/live (ready may stay false on purpose in
    suites whose repository holds a model that must fail to load)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        for path in ("/v2/health/ready", "/v2/health/live"):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
                    if answer.status == 200 and path.endswith("ready"):
                        return True
                    if answer.status == 200 and time.monotonic() > deadline - timeout_s / 2:
                        return True  # live but not ready after half the wait: the repository has a broken model
            except OSError:
                pass
        time.sleep(0.5)
    return False


class Server:
    """One server process on PORTS, stopped (SIGTERM, then SIGKILL) on exit."""

    def __init__(self, engine: str, repository: Path, suite: Suite, phase: Phase, log: Path,
                 ports: tuple[int, int, int], serve_args: tuple[str, ...] = (), env: dict[str, str] | None = None):
        self.engine, self.repository, self.suite, self.phase, self.log, self.ports = (
            engine, repository, suite, phase, log, ports)
        self.serve_args = serve_args
        self.env = env or {}
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        http, grpc, metrics = self.ports
        if self.engine == "tritonctl":
            return [sys.executable, "-m", "tritonctl", "serve", str(self.repository), "--http-port", str(http),
                    "--grpc-port", str(grpc), "--metrics-port", str(metrics), *self.phase.tritonctl_args,
                    *self.serve_args]
        from helpers.triton_anchor import tritonserver_wrapper
        wrapper = tritonserver_wrapper(self.log.parent)
        return [str(wrapper), f"--model-repository={self.repository}", f"--http-port={http}",
                f"--grpc-port={grpc}", f"--metrics-port={metrics}", *self.phase.triton_args]

    def __enter__(self) -> "Server":
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **self.env}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, env=env,
                                            cwd=self.repository.parent, start_new_session=True)
        if not _ready(self.ports[0], self.suite.start_timeout_s, self.process):
            self.__exit__()
            tail = self.log.read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError(f"{self.engine} did not come up on {self.ports}:\n" + "\n".join(tail))
        return self

    def __exit__(self, *exc_info) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        for region in Path("/dev/shm").glob(f"tritonctl_{self.process.pid}_*"):
            region.unlink(missing_ok=True)


def _engine_absent(engine: str) -> str | None:
    if engine == "tritonctl":
        return None
    from helpers.triton_anchor import unavailable_reason
    return unavailable_reason()


def _upstream_absent(suite: Suite) -> str | None:
    test_file = suite.tests[0].split("::")[0]
    if any((root / suite.name / test_file).is_file() for root in (HERE / "upstream", FETCHED)):
        return None
    return (f"the upstream files of {suite.name} are neither in tests/triton_qa/upstream nor in {FETCHED} "
            "(tests/triton_qa/README.md says how to fetch them)")


def _read_cases(report: Path) -> dict[str, CaseResult]:
    if not report.is_file():
        return {}
    try:
        found = json.loads(report.read_text() or "{}")
    except ValueError:
        return {}
    return {name: CaseResult(case["outcome"], _first_line(case["message"]), case["seconds"])
            for name, case in found.items()}


def _first_line(text: str) -> str:
    """The line of an assertion message that says what differed, short."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines)[:400]


# What a suite's client_shims put into a sitecustomize.py beside the staged ../common (on the
# client's PYTHONPATH): numpy < 1.24's aliases of the builtin types; ShmLeakDetector.Probe taking
# the debug_str argument of older test files (the probe itself is off: TEST_JETSON=1).
CLIENT_SHIMS = {
    "numpy_aliases": """import numpy
for _name, _type in (("object", object), ("bool", bool), ("int", int), ("float", float), ("str", str)):
    if _name not in numpy.__dict__:
        setattr(numpy, _name, _type)
""",
    "shm_probe_debug_str": """import shm_util
_probe = shm_util.ShmLeakDetector.Probe
shm_util.ShmLeakDetector.Probe = lambda self, debug_str="": _probe(self)
""",
}


def _stage(suite: Suite, workdir: Path, ports: tuple[int, int, int]) -> Path:
    """A copy of the suite's test files beside ../common, as in Triton's qa/ tree; returns the
    suite's directory (the tests' working directory). The copies' hardcoded ports 8000/8001/8002
    become the free ports of this run, so that runs never collide with another server."""
    shutil.copytree(HERE / "upstream" / "common", workdir / "common")
    if (FETCHED / "common").is_dir():  # fetched helpers the kept common/ lacks (infer_util.py)
        shutil.copytree(FETCHED / "common", workdir / "common", dirs_exist_ok=True,
                        ignore=lambda _, names: [n for n in names if (HERE / "upstream" / "common" / n).exists()])
    suite_dir = workdir / suite.name
    # May be nested (L0_backend_python/io) or in both places (L0_backend_python: the kept files
    # of its subsuites, the fetched python_test.py); the kept copy of a file wins.
    for root in (FETCHED, HERE / "upstream"):
        if (root / suite.name).is_dir():
            shutil.copytree(root / suite.name, suite_dir, dirs_exist_ok=True)
    beside = _copy_parent_files(suite.name, suite_dir.parent)
    if suite.client_shims:
        (workdir / "common" / "sitecustomize.py").write_text(
            "\n".join(CLIENT_SHIMS[name] for name in suite.client_shims))
    _move_ports([*suite_dir.rglob("*.py"), *(workdir / "common").rglob("*.py"), *beside], ports)
    return suite_dir


def _copy_parent_files(name: str, target: Path) -> list[Path]:
    """The Python files beside a nested suite's directory, which its test.sh runs (the
    ``../python_unittest.py`` of L0_backend_python's subsuites), copied into ``target``; the
    kept copy of a file wins over the fetched one."""
    parent = Path(name).parent
    copies: dict[str, Path] = {}
    for root in (FETCHED, HERE / "upstream") if parent != Path(".") else ():
        for source in sorted((root / parent).glob("*.py")):
            copies[source.name] = Path(shutil.copy(source, target / source.name))
    return list(copies.values())


def _move_ports(files, ports: tuple[int, int, int]) -> None:
    """The 8000/8001/8002 that ``files`` hardcode become ``ports``, in place."""
    mapping = dict(zip(map(str, UPSTREAM_PORTS), map(str, ports)))
    for source in files:
        text = source.read_text()
        moved = PORT_PATTERN.sub(lambda match: mapping[match.group(1)], text)
        if moved != text:
            source.write_text(moved)


def run_suite(suite: Suite, engine: str, keep: Path | None = None, client_python: str | None = None,
              serve_args: tuple[str, ...] = ()) -> SuiteRun:
    """Every case of ``suite`` on ``engine``; ``serve_args`` go to ``tritonctl serve`` (e.g. the
    Python transports: --grpc-transport aio --http-transport uvicorn)."""
    run = SuiteRun(suite.name, engine)
    absent = _engine_absent(engine) or (suite.phases and _upstream_absent(suite))  # no phase: nothing runs
    if absent:
        run.problem = absent
        return run
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix=f"qa-{suite.name.replace('/', '_')}-{engine}-"))
    try:
        for index, phase in enumerate(suite.phases):
            phase_dir = workdir / f"phase{index}"
            ports = _free_ports()
            suite_dir = _stage(suite, phase_dir, ports)
            repository = suite_dir / "qa_models"
            (phase.build or suite.build)(suite_dir, repository)
            _move_ports(repository.rglob("*.py"), ports)  # models that call the server (custom_metrics)
            cases, problem = _run_phase(suite, phase, engine, phase_dir, suite_dir, repository, ports,
                                        client_python or default_client_python(), serve_args)
            prefix = f"[{phase.label}] " if phase.label else ""
            run.cases.update({prefix + name: result for name, result in cases.items()})
            if problem:
                run.problem = "; ".join(filter(None, [run.problem, prefix + problem]))
        for case, reason in suite.not_applicable.items():
            run.cases[case] = CaseResult("not_applicable", reason)
    finally:
        run.seconds = time.monotonic() - started
        if keep is not None:
            shutil.copytree(workdir, keep / f"{suite.name.replace('/', '_')}-{engine}", dirs_exist_ok=True)
        shutil.rmtree(workdir, ignore_errors=True)
    return run


def _run_phase(suite: Suite, phase: Phase, engine: str, phase_dir: Path, suite_dir: Path, repository: Path,
               ports: tuple[int, int, int], client_python: str,
               serve_args: tuple[str, ...] = ()) -> tuple[dict[str, CaseResult], str]:
    """One server, one unittest run of the phase's test files (one per step where test.sh acts
    on the server between its runs: ``phase.before``); the cases' outcomes and what went wrong
    around them (the server did not start, the run timed out)."""
    prefix = f"[{phase.label}] " if phase.label else ""
    steps = _steps(phase, phase.tests or suite.tests)
    reports = [phase_dir / ("cases.json" if index == 0 else f"cases{index}.json") for index in range(len(steps))]
    skip = [case.removeprefix(prefix) for case in suite.not_applicable
            if case.startswith(prefix) or not case.startswith("[")]
    shared = {name: value.format(suite_dir=suite_dir) for name, value in suite.server_env.items()}
    env = {**os.environ, "TRITONSERVER_IPADDR": "localhost", "PYTHONPATH": str(phase_dir / "common"),
           **suite.env, **phase.env, **shared}
    env.pop("PYTHONHOME", None)
    problem, output = "", ""
    try:
        server_log = phase.server_log or suite.server_log
        log = suite_dir / server_log if server_log else phase_dir / f"{engine}.log"
        with Server(engine, repository, suite, phase, log, ports, serve_args, shared) as server:
            refused = _post(phase.posts, ports[0])
            for step, report in zip(steps, reports):
                if step[0] in phase.before:
                    phase.before[step[0]](server.process.pid)
                command = [client_python, str(HERE / "unittest_driver.py"), str(report), str(suite.case_timeout_s),
                           *step, "--skip", *skip]
                done = subprocess.run(command, cwd=suite_dir, env=env, capture_output=True, text=True,
                                      timeout=suite.suite_timeout_s)
                output += (done.stdout or "") + (done.stderr or "")
    except RuntimeError as exc:
        return {}, str(exc)
    except subprocess.TimeoutExpired as exc:
        problem = f"the suite ran past {suite.suite_timeout_s} s"
        for part in (exc.stdout, exc.stderr):
            output += part.decode(errors="replace") if isinstance(part, bytes) else part or ""
    (phase_dir / "pytest.out").write_text(output)
    cases = {name: case for report in reports for name, case in _read_cases(report).items()}
    if phase.posts or phase.log_counts:
        cases["test.sh.checks"] = _test_sh_checks(refused, phase.log_counts, log)
    if not cases and not problem:
        problem = "no case ran: " + _first_line(output[-3000:])
    return cases, problem


def _post(posts: tuple[tuple[str, str], ...], http_port: int) -> list[str]:
    """test.sh's ``curl -d BODY localhost:8000/PATH``; the ones not answered 200, with the answer."""
    refused = []
    for path, body in posts:
        request = urllib.request.Request(f"http://127.0.0.1:{http_port}{path}", data=body.encode(), method="POST")
        try:
            urllib.request.urlopen(request, timeout=10).close()
        except urllib.error.HTTPError as exc:
            refused.append(f"POST {path} {body}: {exc.code} {exc.read().decode(errors='replace')}")
        except OSError as exc:
            refused.append(f"POST {path} {body}: {exc}")
    return refused


def _test_sh_checks(refused: list[str], log_counts: dict[str, int], log: Path) -> CaseResult:
    """The outcome of test.sh's own checks around its client run: its POSTs all answered 200,
    and ``grep -c TEXT`` of the stopped server's log gives each count it expects."""
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    wrong = [f"grep -c {text!r}: {found} lines, expected {expected}" for text, expected in log_counts.items()
             if (found := sum(text in line for line in lines)) != expected]
    problems = refused + wrong
    return CaseResult("failed" if problems else "passed", "; ".join(problems))


def _steps(phase: Phase, tests: tuple[str, ...]) -> list[list[str]]:
    """The phase's tests in the client runs test.sh makes of them: a new run at each test that
    ``phase.before`` acts on first."""
    steps: list[list[str]] = []
    for test in tests:
        if not steps or test in phase.before:
            steps.append([])
        steps[-1].append(test)
    return steps


# ---------------------------------------------------------------- tables


def summarize(runs: list[SuiteRun]) -> list[dict]:
    by_suite: dict[str, dict[str, SuiteRun]] = {}
    for run in runs:
        by_suite.setdefault(run.suite, {})[run.engine] = run
    rows = []
    for name, engines in by_suite.items():
        ours = engines.get("tritonctl")
        real = engines.get("triton")
        names = sorted(set().union(*(run.cases for run in engines.values())))
        count = lambda run, outcome: sum(1 for c in run.cases.values() if c.outcome == outcome) if run else None
        real_passed = {c for c in names if real and c in real.cases and real.cases[c].outcome == "passed"}
        ours_cases = ours.cases if ours else {}
        goal = real_passed if real and not real.problem and real.cases else {
            c for c in names if ours_cases.get(c, CaseResult("")).outcome != "not_applicable"}
        rows.append({
            "suite": name, "cases": len(names),
            "not_applicable": count(ours, "not_applicable") or 0,
            "passed": count(ours, "passed"), "failed": count(ours, "failed"), "errors": count(ours, "error"),
            "skipped": count(ours, "skipped"),
            "triton_passed": len(real_passed) if real and not real.problem else None,
            "goal": len(goal), "goal_passed": sum(1 for c in goal if ours_cases.get(c, CaseResult("")).outcome == "passed"),
            "problems": {engine: run.problem for engine, run in engines.items() if run.problem},
            "differences": [
                {"case": c, "tritonctl": ours_cases[c].outcome, "message": ours_cases[c].message,
                 "triton": real.cases[c].outcome if real and c in real.cases else None,
                 "triton_message": real.cases[c].message if real and c in real.cases else ""}
                for c in names if c in ours_cases and ours_cases[c].outcome not in ("passed", "not_applicable")],
            "not_applicable_cases": {c: r.message for c, r in ours_cases.items() if r.outcome == "not_applicable"},
        })
    return rows


def markdown(rows: list[dict], command: str) -> str:
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"Run {date}: `{command}`", "",
           "| suite | cases | n/a | passed | failed | errors | skipped | Triton 2.51 passed | passed, Triton passed |",
           "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "-" if v is None else str(v)
    for row in rows:
        out.append(f"| {row['suite']} | {row['cases']} | {row['not_applicable']} | {fmt(row['passed'])} | "
                   f"{fmt(row['failed'])} | {fmt(row['errors'])} | {fmt(row['skipped'])} | "
                   f"{fmt(row['triton_passed'])} | {row['goal_passed']}/{row['goal']} |")
    total = lambda key: sum(row[key] or 0 for row in rows)
    out.append(f"| **all** | {total('cases')} | {total('not_applicable')} | {total('passed')} | {total('failed')} | "
               f"{total('errors')} | {total('skipped')} | {total('triton_passed')} | "
               f"{total('goal_passed')}/{total('goal')} |")
    out += ["", "Cases that did not pass on tritonctl serve (with the real Triton's outcome):", ""]
    for row in rows:
        for engine, problem in row["problems"].items():
            out.append(f"- {row['suite']} ({engine}): {problem.splitlines()[0] if problem else ''}")
        for diff in row["differences"]:
            out.append(f"- {row['suite']} `{diff['case']}`: {diff['tritonctl']} (Triton: {diff['triton'] or '-'})"
                       f" — {diff['message']}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="*", help="suite names (default: all)")
    parser.add_argument("--engine", choices=[*ENGINES, "both"], default="both")
    parser.add_argument("--json", type=Path, help="write every case's outcome here")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    parser.add_argument("--keep", type=Path, help="keep each run's work directory (logs, report) here")
    parser.add_argument("--serve-arg", action="append", default=[],
                        help="an argument for tritonctl serve (repeatable), e.g. --serve-arg=--grpc-transport=aio")
    parser.add_argument("--client-python", default=default_client_python(),
                        help="the Python that runs the test cases (default: %(default)s)")
    args = parser.parse_args(argv)
    chosen = [SUITES[name] for name in args.suites] if args.suites else list(SUITES.values())
    engines = ENGINES if args.engine == "both" else (args.engine,)
    runs = []
    for suite in chosen:
        for engine in engines:
            run = run_suite(suite, engine, args.keep, args.client_python, tuple(args.serve_arg))
            passed = sum(1 for c in run.cases.values() if c.outcome == "passed")
            print(f"{suite.name:32} {engine:10} {passed}/{len(run.cases)} passed in {run.seconds:.0f} s"
                  + (f"  [{run.problem.splitlines()[0]}]" if run.problem else ""), flush=True)
            runs.append(run)
    rows = summarize(runs)
    command = "python tests/triton_qa/run_suites.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(rows, command.strip())
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"runs": [{"suite": r.suite, "engine": r.engine, "problem": r.problem,
                                                   "seconds": round(r.seconds, 1),
                                                   "cases": {c: vars(v) for c, v in r.cases.items()}} for r in runs],
                                         "rows": rows}, indent=1))
    return 0 if all(row["goal_passed"] == row["goal"] and not row["problems"].get("tritonctl") for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
