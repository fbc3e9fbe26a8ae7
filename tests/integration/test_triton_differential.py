"""``validate`` against the real Triton 2.51: every python-backend config of the corpus is
loaded into real tritonservers, and validate must agree with what the server did.

- the server refuses a config  -> validate reports at least one error;
- the server loads a config    -> validate reports no error, unless the case is listed in
  STRICTER_THAN_TRITON with the reason validate is right to refuse it anyway.

Refusals that only come from this machine (no GPU, no onnxruntime/TensorRT backend, no
repository agents), or from fields this 2.51 server predates, are skipped. A python model
without ``model.py`` never finishes loading: a load whose python stub fails to start, or
that does not answer within LOAD_TIMEOUT_S, counts as not loaded. Triton 2.51 then blocks
every later load, so the server is replaced after such a hang. Triton answers one load
request at a time, so the cases are shared out among SERVERS servers that load side by side.
"""

from __future__ import annotations

import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers.corpus_harness import CorpusCase, backend_and_platform, cases, load_case, materialize
from helpers.triton_anchor import LoadResult, TritonServer, unavailable_reason
from tritonctl.repo_schema.diagnostics import Severity
from tritonctl.repo_schema.repository import SPECIAL_SUBDIRS
from tritonctl.repo_schema.schema import model_config_pb2
from tritonctl.repo_schema.validate import validate_paths

UNAVAILABLE = unavailable_reason()
pytestmark = [
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
]

LOAD_TIMEOUT_S = 30.0
# A case whose model lacks its model file never finishes loading on Triton 2.51 (_may_hang): a
# shorter wait, once, tells that apart as well.
EXPECTED_HANG_TIMEOUT_S = 10.0
LOAD_WORKERS = 4
# Triton serializes model loads, and a load mostly waits (for its python stub): servers side by
# side finish sooner, until the two cores are busy.
SERVERS = 3

# Cases Triton 2.51 loads where validate reports an error on purpose: case id -> why.
STRICTER_THAN_TRITON: dict[str, str] = {}

ModelFiles = tuple[str, tuple[str, ...] | None]  # config text, layout


def _files(case: CorpusCase) -> ModelFiles:
    return case.text, tuple(case.layout) if case.layout is not None else None


def _models(case: CorpusCase) -> dict[str, ModelFiles]:
    """Every model directory the case writes: its own and its siblings'."""
    return {case.model: _files(case), **{name: _files(load_case(path)) for name, path in case.siblings}}


def _servable(case: CorpusCase) -> bool:
    """The case (and its siblings) needs only what this server has: python backend, ensembles."""
    for text, _ in _models(case).values():
        backend, platform = backend_and_platform(text)
        if backend not in ("", "python") or platform not in ("", "ensemble"):
            return False
    return True


CASES = [case for case in cases("valid") + cases("invalid") if _servable(case)]


def _rounds(all_cases: list[CorpusCase]) -> list[list[CorpusCase]]:
    """Group cases so that no two in a round write the same model directory differently
    (or load the same model); a later round rewrites the directories it needs."""
    rounds: list[tuple[dict[str, ModelFiles], set[str], list[CorpusCase]]] = []
    for case in all_cases:
        models = _models(case)
        for defined, loaded, members in rounds:
            clash = case.model in loaded or any(defined.get(n, files) != files for n, files in models.items())
            if not clash:
                break
        else:
            defined, loaded, members = {}, set(), []
            rounds.append((defined, loaded, members))
        defined.update(models)
        loaded.add(case.model)
        members.append(case)
    return [members for _, _, members in rounds]


def _may_hang(case: CorpusCase, repository: Path) -> bool:
    """Whether a non-ensemble model of the materialized case lacks its python model file in
    a version directory: that load never ends, and Triton blocks every later load behind it."""
    for name, (text, _) in _models(case).items():
        if backend_and_platform(text)[1] == "ensemble" or not (repository / name).is_dir():
            continue
        custom = re.search(r'^\s*default_model_filename:\s*"([^"]*)"', text, re.M)
        filename = custom.group(1) if custom else "model.py"
        for version in (repository / name).iterdir():
            if version.is_dir() and version.name not in SPECIAL_SUBDIRS and not (version / filename).is_file():
                return True
    return False


def _load_and_unload(server: TritonServer, case: CorpusCase, timeout_s: float = LOAD_TIMEOUT_S) -> LoadResult:
    result = server.load(case.model, timeout_s)
    if result.loaded:
        server.unload(case.model, dependents=bool(case.siblings))
    return result


def _load_round(server: TritonServer, members: list[CorpusCase]) -> dict[str, LoadResult]:
    repository = server.repository
    for entry in repository.iterdir():
        shutil.rmtree(entry)
    for case in members:
        materialize(case, repository)
    # Models on their own load in parallel; ensembles (they share composing models) and the
    # cases that may hang go one by one afterwards, with a new server after each hang.
    parallel = [case for case in members if not case.siblings and not _may_hang(case, repository)]
    with ThreadPoolExecutor(LOAD_WORKERS) as pool:
        results = dict(zip((c.id for c in parallel), pool.map(lambda c: _load_and_unload(server, c), parallel)))
    if any(result.hung for result in results.values()):
        server.restart()  # the other loads running beside the hung one may have timed out for nothing
    later = [case for case in members if case.id not in results or results[case.id].hung]
    for case in sorted(later, key=lambda c: _may_hang(c, repository)):
        expected = _may_hang(case, repository)
        # a hang may be the server's, not the config's: once more on a fresh one, unless it is expected
        for _attempt in range(1 if expected else 2):
            results[case.id] = _load_and_unload(server, case, EXPECTED_HANG_TIMEOUT_S if expected else LOAD_TIMEOUT_S)
            if not results[case.id].hung:
                break
            server.restart()
    return results


def _load_share(workdir: Path, share: list[CorpusCase]) -> dict[str, LoadResult]:
    """Load ``share`` into one real server (a new one only after a load hangs)."""
    repository = workdir / "repository"
    repository.mkdir(parents=True)
    verdicts: dict[str, LoadResult] = {}
    with TritonServer(repository, workdir) as server:
        for members in _rounds(share):
            verdicts.update(_load_round(server, members))
    return verdicts


@pytest.fixture(scope="module")
def triton_verdicts(tmp_path_factory) -> dict[str, LoadResult]:
    workdir = tmp_path_factory.mktemp("triton")
    shares = [CASES[i::SERVERS] for i in range(SERVERS)]
    with ThreadPoolExecutor(SERVERS) as pool:
        results = pool.map(lambda i: _load_share(workdir / f"server-{i}", shares[i]), range(SERVERS))
        return {case_id: verdict for verdicts in results for case_id, verdict in verdicts.items()}


def _refusal_not_about_config(verdict: LoadResult) -> str | None:
    """Why a refusal says nothing about the config: this machine lacks something, or the
    server predates a field that validate's schema (a newer tritonclient) has."""
    if verdict.refused_by_environment:
        return f"refused by this machine, not by the config: {verdict.describe()}"
    pool = model_config_pb2().DESCRIPTOR.pool
    for line in verdict.log:
        match = re.search(r'Message type "([\w.]+)" has no field named "(\w+)"', line)
        if match:
            try:
                fields = pool.FindMessageTypeByName(match.group(1)).fields_by_name
            except KeyError:
                continue
            if match.group(2) in fields:
                return f"this Triton 2.51 predates the field {match.group(1)}.{match.group(2)}"
    return None


def _validate_errors(case: CorpusCase, workdir: Path) -> list[str]:
    repository = workdir / "repository"
    materialize(case, repository)
    report = validate_paths([repository])
    return [f"{d.location}: error[{d.code}]: {d.message}"
            for d in report.diagnostics if d.severity is Severity.ERROR]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_validate_agrees_with_triton(case: CorpusCase, triton_verdicts: dict[str, LoadResult],
                                     tmp_path: Path):
    verdict = triton_verdicts[case.id]
    errors = _validate_errors(case, tmp_path)
    if not verdict.loaded:
        not_about_config = None if errors else _refusal_not_about_config(verdict)
        if not_about_config:
            pytest.skip(not_about_config)
        server_said = "\n  ".join([verdict.describe(), *verdict.log])
        assert errors, (f"validate MISSES A REAL ERROR in {case.path}: Triton refused it but validate "
                        f"reports no error.\nTriton:\n  {server_said}")
    elif case.id in STRICTER_THAN_TRITON:
        assert errors, (f"{case.id} is in STRICTER_THAN_TRITON but validate no longer reports an "
                        "error: remove it from the list")
    else:
        listing = "\n  ".join(errors)
        assert not errors, (f"POSSIBLE FALSE POSITIVE in {case.path}: Triton loads it, validate "
                            f"reports:\n  {listing}\nFix the rule, or add '{case.id}' to "
                            "STRICTER_THAN_TRITON with the reason validate is right to be stricter.")


def test_allow_list_names_corpus_cases():
    known = {case.id for case in CASES}
    assert not set(STRICTER_THAN_TRITON) - known, set(STRICTER_THAN_TRITON) - known
