"""Run QA test files with unittest, as Triton's test.sh does (``python3 test.py``; their
TestResultCollector base class only works under unittest), and write every case's outcome to a
JSON file after each case, so that a run cut short keeps what it had.

    python unittest_driver.py OUT.json TIMEOUT_S FILE.py[::Class[::test]] ... [--skip Class.test ...]

Run in the suite's directory (the tests append ../common to sys.path themselves). A case that
runs past TIMEOUT_S is interrupted (SIGALRM) and counted as an error.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import sys
import time
import traceback
import unittest
from pathlib import Path


class CaseTimeout(Exception):
    pass


class RecordingResult(unittest.TestResult):
    def __init__(self, out: Path, timeout_s: int):
        super().__init__()
        self.out, self.timeout_s = out, timeout_s
        self.cases: dict[str, dict] = {}
        self._started = 0.0

    @staticmethod
    def _name(test) -> str:
        return f"{type(test).__name__}.{getattr(test, '_testMethodName', str(test))}"

    def _record(self, test, outcome: str, message: str = "") -> None:
        name = self._name(test)
        previous = self.cases.get(name)
        if previous and previous["outcome"] in ("failed", "error") and outcome == "passed":
            return  # addSuccess never follows a failure; a teardown error keeps the first outcome
        self.cases[name] = {"outcome": outcome, "message": message,
                            "seconds": round(time.monotonic() - self._started, 2)}
        self.out.write_text(json.dumps(self.cases, indent=1))

    def startTest(self, test) -> None:
        super().startTest(test)
        self._started = time.monotonic()
        signal.alarm(self.timeout_s)
        print(f"--- {self._name(test)}", flush=True)

    def stopTest(self, test) -> None:
        signal.alarm(0)
        super().stopTest(test)

    def addSuccess(self, test) -> None:
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err) -> None:
        super().addFailure(test, err)
        self._record(test, "failed", _message(err))
        traceback.print_exception(*err)

    def addError(self, test, err) -> None:
        super().addError(test, err)
        if isinstance(test, unittest.suite._ErrorHolder):  # setUpClass / tearDownClass / import
            self.cases[str(test)] = {"outcome": "error", "message": _message(err), "seconds": 0}
            self.out.write_text(json.dumps(self.cases, indent=1))
        else:
            self._record(test, "error", _message(err))
        traceback.print_exception(*err)

    def addSkip(self, test, reason) -> None:
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err) -> None:
        super().addExpectedFailure(test, err)
        self._record(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test) -> None:
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")

    def addSubTest(self, test, subtest, err) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._record(test, "failed" if issubclass(err[0], test.failureException) else "error", _message(err))


def _message(err) -> str:
    kind, value, _ = err
    if kind is CaseTimeout:
        return str(value)
    text = "".join(traceback.format_exception_only(kind, value)).strip()
    return text


def _load(spec: str, loader: unittest.TestLoader) -> unittest.TestSuite:
    file, _, rest = spec.partition("::")
    name = Path(file).stem
    module_spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    if not rest:
        return loader.loadTestsFromModule(module)
    return loader.loadTestsFromName(rest.replace("::", "."), module)


def _without(suite: unittest.TestSuite, skip: set[str]) -> unittest.TestSuite:
    kept = unittest.TestSuite()
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            kept.addTest(_without(test, skip))
        elif RecordingResult._name(test) not in skip:
            kept.addTest(test)
    return kept


def main(argv: list[str]) -> int:
    out, timeout_s, *rest = argv
    skip: set[str] = set()
    if "--skip" in rest:
        index = rest.index("--skip")
        rest, skip = rest[:index], set(rest[index + 1:])
    sys.path.insert(0, str(Path.cwd()))
    sys.argv = [rest[0].split("::")[0]]

    def on_alarm(signum, frame):
        raise CaseTimeout(f"case ran past {timeout_s} s (interrupted)")

    signal.signal(signal.SIGALRM, on_alarm)
    result = RecordingResult(Path(out), int(timeout_s))
    Path(out).write_text("{}")
    loader = unittest.TestLoader()
    for spec in rest:
        try:
            suite = _without(_load(spec, loader), skip)
        except Exception:  # noqa: BLE001 - an import error is that file's outcome
            result.cases[f"{spec} (import)"] = {"outcome": "error", "message": traceback.format_exc(limit=0).strip(),
                                                "seconds": 0}
            Path(out).write_text(json.dumps(result.cases, indent=1))
            traceback.print_exc()
            continue
        suite.run(result)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
