"""tritonctl analyze --ray: a local Ray cluster (a head that takes no work and two worker nodes, all
on loopback) tunes a repository of a model and an ensemble over another, one per node (the ensemble
with its step), into the same files a one-machine run writes; a node lost in the middle costs only
its running point, the driver's checkpoint keeps the rest; and without ray installed --ray says how
to install it."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from helpers.analyze_models import FAST, FAST_ARGS, add_sub_ensemble, onnx_model
from helpers.cli_runner import cli
from tritonctl.analyzer.analyze import AnalyzeOptions
from tritonctl.analyzer.checkpoint import CHECKPOINT_NAME, read
from tritonctl.analyzer.hardware import fingerprint
from tritonctl.analyzer.repository import RepositoryReporter, run_repository
from tritonctl.analyzer.search import AnalyzeError, SearchSpace

SPACE = SearchSpace(batch_sizes=(1, 8), queue_delays_us=(0,), instance_counts=(1,), concurrency=(2,))
LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray puts every node and worker on 127.0.0.1


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'tritonctl[ray]')")
    import ray
    from ray.cluster_utils import Cluster

    previous = os.environ.get(LOOPBACK)
    os.environ[LOOPBACK] = "0"
    for attempt in (1, 2):
        # Ray waits 30 s for each node's raylet to register with its GCS; late in the suite, on
        # two loaded cores, a start can miss that (Ray's "timed out during startup"): once more.
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        try:
            workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
            break
        except Exception as exc:
            cluster.shutdown()
            if attempt == 2 or "timed out during startup" not in str(exc):
                raise
    try:
        yield cluster, workers
    finally:
        ray.shutdown()
        cluster.shutdown()
        if previous is None:
            os.environ.pop(LOOPBACK, None)
        else:
            os.environ[LOOPBACK] = previous




@pytest.fixture
def repo(tmp_path) -> Path:
    """alpha, beta, and ``pipeline``: an ensemble whose one step is alpha."""
    repo = tmp_path / "repo"
    onnx_model(repo, "alpha")
    onnx_model(repo, "beta", config="dynamic_batching { max_queue_delay_microseconds: 100 }")
    add_sub_ensemble(repo, "pipeline", "alpha")
    return repo


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != "server.log"}


@pytest.mark.slow
def test_two_workers_write_the_files_a_local_run_writes(cluster, repo, tmp_path):
    from tritonctl.analyzer.ray_cluster import run_on_ray

    head, _workers = cluster
    options = AnalyzeOptions(repository=repo, model="", output_dir=tmp_path / "ray", space=SPACE,
                             strategy="exhaustive", **FAST)
    models = ["alpha", "beta", "pipeline"]
    run = run_on_ray(options, models, head.address)
    local = run_repository(AnalyzeOptions(repository=repo, model="", output_dir=tmp_path / "local", space=SPACE,
                                          strategy="exhaustive", engine="inprocess", **FAST), models)
    assert files(tmp_path / "ray") == files(tmp_path / "local")
    # alpha is tuned as the ensemble's step, at the ensemble's endpoint, not on its own as well.
    assert {"beta/config.pbtxt", "pipeline/alpha/config.pbtxt", "repository.json", "repository.md"} <= \
        files(tmp_path / "ray")
    assert not (tmp_path / "ray" / "alpha").exists()
    ours, theirs = (json.loads((tmp_path / d / "repository.json").read_text()) for d in ("ray", "local"))
    assert [sorted(e) for e in ours["models"]] == [sorted(e) for e in theirs["models"]]
    assert [(e["model"], e.get("skipped")) for e in ours["models"]] == \
        [(e["model"], e.get("skipped")) for e in theirs["models"]]
    here = fingerprint()
    assert ours["hardware"] == theirs["hardware"] and list(ours["hardware"]) == [here["id"]]
    # One model per node: both ran at once, on different worker nodes (the head takes no work).
    assert len(run.nodes) == 2 and not run.lost
    engines = [o.result.meta["engine"] for o in run.result.outcomes if o.result is not None]
    assert all("on Ray node" in e for e in engines) and len({e.split("Ray node ")[1] for e in engines}) == 2
    pipeline = json.loads((tmp_path / "ray" / "pipeline" / "summary.json").read_text())
    assert pipeline["pipeline"]["steps"] == ["alpha"]
    assert pipeline["pipeline"]["latency_share"]["chosen"]["alpha"]  # from the statistics, read on the node
    for model in ("pipeline", "beta"):
        summary = json.loads((tmp_path / "ray" / model / "summary.json").read_text())
        assert summary["hardware"]["id"] == here["id"] and summary["best"]["hardware"] == here["id"]
        assert set(summary) == set(json.loads((tmp_path / "local" / model / "summary.json").read_text()))
        settings, points, _ = read(tmp_path / "ray" / model / CHECKPOINT_NAME)
        assert points and all(p.hardware == here["id"] for p in points)
        # The checkpoint is a one-machine run's: the same command resumes it here, measuring nothing.
        assert settings == read(tmp_path / "local" / model / CHECKPOINT_NAME)[0] | {"engine": settings["engine"]}
    for column in ("hardware", "config_id", "throughput"):
        assert column in (tmp_path / "ray" / "beta" / "measurements.csv").read_text().splitlines()[0].split(",")


@pytest.mark.slow
def test_the_command_tunes_one_model_on_a_node(cluster, repo, tmp_path, capsys):
    head, _workers = cluster
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "analyze", str(repo), "-m", "beta", "--ray", head.address, "-o", str(out),
                            "--engine", "inprocess", "--strategy", "exhaustive", *FAST_ARGS,
                            "--batch-sizes", "1,8", "--queue-delays", "0", "--instance-counts", "1",
                            "--concurrency", "2")
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert "bundled server in-process on Ray node" in summary["engine"]
    assert (out / "config.pbtxt").is_file() and summary["hardware"]["id"] == fingerprint()["id"]
    assert "Best configs" in stdout


class LoseTheNode(RepositoryReporter):
    """Removes the worker node that tunes ``model`` once it has measured its first point."""

    def __init__(self, cluster, workers, model: str):
        self.cluster, self.workers, self.model = cluster, workers, model
        self.local = threading.local()
        self.removed: list[str] = []

    def model_start(self, index, total, model, budget_s, eta_s) -> None:
        self.local.model, _, node = model.partition(" on node ")
        self.local.node = node.split(" ")[0]

    def point(self, point, reused: bool) -> None:
        if getattr(self.local, "model", None) == self.model and not self.removed:
            victim = next(w for w in self.workers if str(w.node_id).startswith(self.local.node))
            self.removed.append(str(victim.node_id))
            self.cluster.remove_node(victim, allow_graceful=False)


@pytest.mark.slow
def test_a_lost_node_costs_only_its_running_point(cluster, repo, tmp_path):
    """Runs last: it takes a worker node away from the module's cluster."""
    from tritonctl.analyzer.ray_cluster import run_on_ray

    head, workers = cluster
    reporter = LoseTheNode(head, workers, "alpha")
    options = AnalyzeOptions(repository=repo, model="", output_dir=tmp_path / "out", space=SPACE,
                             strategy="exhaustive", **FAST)
    run = run_on_ray(options, ["alpha", "beta"], head.address, reporter)
    assert len(reporter.removed) == 1 and [n.node_id for n in run.lost] == reporter.removed
    alpha = next(o for o in run.result.outcomes if o.model == "alpha")
    assert alpha.skipped is None and not alpha.result.interrupted and alpha.result.best is not None
    # It went on on the node left (once beta was done with it), with the same hardware.
    assert reporter.removed[0][:8] not in alpha.result.meta["engine"]
    _, points, _ = read(tmp_path / "out" / "alpha" / CHECKPOINT_NAME)
    keys = [p.key for p in points]
    assert len(keys) == len(set(keys))  # nothing measured twice, nothing recorded lost
    assert alpha.result.measured == len(points) and alpha.result.reused == 0
    assert (tmp_path / "out" / "alpha" / "config.pbtxt").is_file()
    assert len({p.hardware for p in points}) == 1


def test_without_ray_the_flag_says_how_to_install_it(repo, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where it is not installed
    code, _out, err = cli(capsys, "analyze", str(repo), "--ray", "127.0.0.1:6379", "-o", str(tmp_path / "out"))
    assert code != 0
    assert "tritonctl analyze --ray needs ray: pip install 'tritonctl[ray]'" in " ".join(err.split())
    assert not (tmp_path / "out").exists()


def test_ray_refuses_a_running_server(repo, tmp_path):
    from tritonctl.analyzer.ray_cluster import check_options

    with pytest.raises(AnalyzeError, match="--ray starts a server on each node; --url measures one running"):
        check_options(AnalyzeOptions(repository=repo, model="", output_dir=tmp_path, engine="url", url="x:1"))


def test_a_node_without_the_files_is_sent_every_model_a_pipeline_runs(repo, tmp_path):
    from tritonctl.analyzer.ray_cluster import ServerHost, _archive, _manifest, served_models

    served = served_models(repo, "pipeline", (), SPACE)
    assert served == ("alpha", "pipeline") and served_models(repo, "beta", (), SPACE) == ("beta",)
    host = ServerHost("inprocess", str(tmp_path / "elsewhere"), "http", None, ())
    manifests = {model: _manifest(repo / model) for model in served}
    assert not host.has_models(manifests)
    host.receive({model: _archive(repo / model) for model in served})
    assert host.has_models(manifests) and host.repository != repo
    sent = host.repository / "pipeline" / "config.pbtxt"
    assert sent.read_text() == (repo / "pipeline" / "config.pbtxt").read_text()
    assert sorted(p.name for p in host.repository.iterdir()) == ["alpha", "pipeline"]
    with pytest.raises(AnalyzeError, match="model 'gamma'"):
        served_models(repo, "gamma", (), SPACE)
