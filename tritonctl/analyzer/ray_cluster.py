"""``tritonctl analyze --ray ADDRESS``: the models of a repository tuned at the same time on the
nodes of an existing Ray cluster, one model per node at a time.

The search of each model runs here, on the driver, exactly as in a one-machine run; only the
server and the load move: on its node, a Ray actor (``ServerHost``) starts the model's own server
(the bundled server, or ``--engine triton``) and runs each measurement against it on that node.
Every point comes back to the driver, which writes it to the model's checkpoint before the next
one is asked for. So the driver writes the same files as a one-machine run, and losing a node
loses only the point it was measuring: the model's server is started again on another free node
of the same hardware, the config reloaded and the point measured there.

Nodes of different hardware never compare against each other: each node is fingerprinted
(``analyzer.hardware``) and every point carries its node's fingerprint; a model stays on nodes of
one fingerprint for the whole of its search. When the last node of that hardware is gone, the model
starts again on other hardware as a fresh search (its earlier points stay in the checkpoint, and
are not reused there: the checkpoint reuses a point only on the hardware that measured it).

A pipeline (an ensemble, or a Python model calling others through BLS) runs on one node with all
its steps: the node's server holds the pipeline model and every model it runs, and the search of
its steps' configs runs on the driver as for one model.

Nodes without CPUs to offer (``ray start --head --num-cpus 0``) are left out, so the head node can
stay free of measurements. A node needs tritonctl installed; the models' files are read from the
same path when the node has all of them (a shared file system), and otherwise shipped to the node.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

from tritonctl.analyzer import analyze as analyze_module
from tritonctl.analyzer.analyze import AnalyzeOptions, run_analyze
from tritonctl.analyzer.engine import Engine, LoadFailed, make_engine
from tritonctl.analyzer.hardware import describe, fingerprint
from tritonctl.analyzer.pipeline_space import load_pipeline, pipeline_kind
from tritonctl.analyzer.repository import (ModelOutcome, RepositoryReporter, RepositoryResult, begin_run,
                                          write_repository_report)
from tritonctl.analyzer.search import AnalyzeError, Candidate, SearchSpace, load_model_config
from tritonctl.optional import require
from tritonctl.perf.options import PerfError, PerfOptions
from tritonctl.perf.run import PerfResult

NEEDED_BY = "tritonctl analyze --ray"
ENGINES = ("subprocess", "inprocess", "triton")
FINGERPRINT_TIMEOUT_S = 120.0


class ServerHost:
    """On a Ray node: one model's server and the load against it. Methods answer ``(status, value)``:
    ``ok``, or the kind of error (``load_failed``, ``analyze``, ``perf``) and its message, so the
    driver raises the same exceptions a one-machine run raises."""

    def __init__(self, kind: str, repository: str, protocol: str, tritonserver: str | None,
                 triton_args: tuple[str, ...]):
        self.kind, self.repository, self.protocol = kind, Path(repository), protocol
        self.tritonserver, self.triton_args = tritonserver, triton_args
        self.workdir = Path(tempfile.mkdtemp(prefix="tritonctl-ray-"))
        self.engine: Engine | None = None

    def has_models(self, manifests: dict[str, dict[str, int]]) -> bool:
        """Whether this node holds the models' files at the driver's path (same names and sizes)."""
        return all(_manifest(self.repository / model) == files for model, files in manifests.items())

    def receive(self, archives: dict[str, bytes]) -> None:
        """The models' directories, sent by the driver: unpacked into a repository of this node."""
        self.repository = self.workdir / "repository"
        self.repository.mkdir(exist_ok=True)
        for model, archive in archives.items():
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(self.repository / model, filter="data")

    def start(self) -> tuple[str, object]:
        def go():
            self.engine = make_engine(self.kind, self.repository, self.protocol, self.workdir / "server.log", None,
                                      self.tritonserver, self.triton_args)
            self.engine.start()
            return {"url": self.engine.url, "describe": self.engine.describe(), "hardware": fingerprint()}
        return _answer(go)

    def apply(self, model: str, config_json: str | None) -> tuple[str, object]:
        """Load the model with ``config_json``, or with its own config when that is None."""
        candidate = SimpleNamespace(config_json=config_json) if config_json is not None else None
        return _answer(lambda: self.engine.apply(model, candidate))

    def measure(self, perf: PerfOptions) -> tuple[str, object]:
        return _answer(lambda: self.engine.measure(replace(perf, url=self.engine.url)))

    def statistics(self, model: str) -> tuple[str, object]:
        return _answer(lambda: self.engine.statistics(model))

    def stop(self) -> None:
        if self.engine is not None:
            self.engine.stop()
            self.engine = None


def _answer(call) -> tuple[str, object]:
    try:
        return "ok", call()
    except LoadFailed as exc:
        return "load_failed", str(exc)
    except AnalyzeError as exc:
        return "analyze", str(exc)
    except PerfError as exc:
        return "perf", str(exc)


def _raise(answer: tuple[str, object]):
    status, value = answer
    if status == "ok":
        return value
    raise {"load_failed": LoadFailed, "analyze": AnalyzeError, "perf": PerfError}[status](value)


def _manifest(model_dir: Path) -> dict[str, int]:
    if not model_dir.is_dir():
        return {}
    return {str(p.relative_to(model_dir)): p.stat().st_size for p in sorted(model_dir.rglob("*")) if p.is_file()}


def _archive(model_dir: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(model_dir, arcname=".")
    return buffer.getvalue()


# --- the cluster ---------------------------------------------------------------------------

@dataclass
class Node:
    node_id: str
    address: str
    hardware: dict

    @property
    def name(self) -> str:
        return f"{self.node_id[:8]} ({self.address})"


@dataclass
class Lease:
    """The node a model runs on now; its engine moves it to another node when the node is lost."""

    node: Node
    hardware_gone: bool = False  # every node of its hardware was lost during the run


class NodePool:
    """The cluster's nodes that offer CPUs, each fingerprinted, handed out one model at a time."""

    def __init__(self, ray, nodes: list[Node]):
        self.ray = ray
        self.nodes = nodes
        self.free = list(nodes)
        self.lost: list[Node] = []
        self._changed = threading.Condition()

    @classmethod
    def discover(cls, ray) -> "NodePool":
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
        if not alive:
            raise AnalyzeError("the Ray cluster has no node with CPUs to run on (a head started with --num-cpus 0 "
                               "takes no work: start worker nodes with `ray start --address HEAD:PORT`)")
        probe = ray.remote(num_cpus=0)(fingerprint)
        refs = [probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
                for n in alive]
        try:
            values = ray.get(refs, timeout=FINGERPRINT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a node without tritonctl, or one that died meanwhile
            raise AnalyzeError(f"could not fingerprint the Ray nodes ({_first_line(exc)}); every node needs "
                               "tritonctl installed, the same version as here") from None
        return cls(ray, [Node(n["NodeID"], n.get("NodeManagerAddress", "?"), v) for n, v in zip(alive, values)])

    def acquire(self, hardware_id: str | None = None) -> Node | None:
        """A free node (of ``hardware_id`` when given), waiting for one; None when no node of that
        hardware is left."""
        with self._changed:
            while True:
                fits = [n for n in self.free if hardware_id is None or n.hardware["id"] == hardware_id]
                if fits:
                    self.free.remove(fits[0])
                    return fits[0]
                living = [n for n in self.nodes if n not in self.lost and
                          (hardware_id is None or n.hardware["id"] == hardware_id)]
                if not living:
                    return None
                self._changed.wait()

    def release(self, node: Node) -> None:
        with self._changed:
            if node not in self.lost and node not in self.free:
                self.free.append(node)
            self._changed.notify_all()

    def lose(self, node: Node) -> None:
        with self._changed:
            if node not in self.lost:
                self.lost.append(node)
            if node in self.free:
                self.free.remove(node)
            self._changed.notify_all()


class RayEngine(Engine):
    """A model's server on a Ray node (with every model it runs, for a pipeline), moved to another
    node of the same hardware when its node is lost (the point in progress is measured again there)."""

    def __init__(self, pool: NodePool, lease: Lease, kind: str, repository: Path, protocol: str,
                 models: tuple[str, ...], tritonserver: str | None, triton_args: tuple[str, ...]):
        super().__init__(repository, protocol)
        self.kind = kind  # the checkpoint's settings are a one-machine run's: the hardware tells nodes apart
        self.pool, self.lease, self.models = pool, lease, models
        self.tritonserver, self.triton_args = tritonserver, triton_args
        self._host = None
        self._loaded: dict[str, str | None] = {}  # model -> the config JSON the server has (None: its own)
        self._started: dict = {}
        self._errors = _actor_errors()

    def start(self) -> None:
        """Start the server on the lease's node; a node lost meanwhile is replaced as in ``_call``."""
        while True:
            try:
                return self._start_on(self.lease.node)
            except self._errors as exc:
                self._replace(exc)

    def _start_on(self, node: Node) -> None:
        ray = self.pool.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = ray.remote(num_cpus=0, max_restarts=0)(ServerHost).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False))
        self._host = actor.remote(self.kind, str(self.repository), self.protocol, self.tritonserver,
                                  self.triton_args)
        dirs = {model: self.repository / model for model in self.models}
        if not ray.get(self._host.has_models.remote({model: _manifest(d) for model, d in dirs.items()})):
            ray.get(self._host.receive.remote({model: _archive(d) for model, d in dirs.items()}))
        self._started = _raise(ray.get(self._host.start.remote()))
        self.url = self._started["url"]
        for model, config_json in self._loaded.items():  # a move: the configs the lost node had, in order
            _raise(ray.get(self._host.apply.remote(model, config_json)))

    def _call(self, method: str, *args):
        """A call to the node's server; a lost node is replaced and the call made again there."""
        while True:
            try:
                return _raise(self.pool.ray.get(getattr(self._host, method).remote(*args)))
            except self._errors as exc:
                self._replace(exc)
                self.start()

    def _replace(self, exc: Exception) -> None:
        """The lease's node is lost: take another free node of the same hardware (waiting for one)."""
        lost = self.lease.node
        self.pool.lose(lost)
        node = self.pool.acquire(lost.hardware["id"])
        if node is None:
            self.lease.hardware_gone = True
            raise AnalyzeError(f"Ray node {lost.name} was lost ({_first_line(exc)}) and no other node of its "
                               f"hardware ({describe(lost.hardware)}) is left") from None
        self.lease.node = node

    def apply(self, model: str, candidate: Candidate | None) -> None:
        config_json = candidate.config_json if candidate is not None else None
        try:
            self._call("apply", model, config_json)
        except LoadFailed:
            self._loaded.pop(model, None)
            raise
        self._loaded[model] = config_json

    def measure(self, perf: PerfOptions) -> PerfResult:
        return self._call("measure", perf)

    def statistics(self, model: str):
        """Read on the node: its server may listen on an address only the node reaches."""
        return self._call("statistics", model)

    def restore(self, model: str) -> None:
        """Nothing to restore: the server on the node is this run's own, and is stopped."""

    def stop(self) -> None:
        host, self._host = self._host, None
        if host is None:
            return
        try:
            self.pool.ray.get(host.stop.remote(), timeout=60)
        except Exception:  # noqa: BLE001 - the node is gone: its server went with it
            pass
        try:
            self.pool.ray.kill(host)
        except Exception:  # noqa: BLE001 - already dead
            pass

    def describe(self) -> str:
        inner = self._started.get("describe") or self.kind
        return f"{inner} on Ray node {self.lease.node.name}"

    @property
    def hardware(self) -> dict:
        return self.lease.node.hardware


def _actor_errors() -> tuple[type[BaseException], ...]:
    from ray.exceptions import RayActorError

    errors: list[type[BaseException]] = [RayActorError]
    for name in ("NodeDiedError", "ObjectLostError", "OwnerDiedError"):
        error = getattr(__import__("ray.exceptions", fromlist=[name]), name, None)
        if error is not None:
            errors.append(error)
    return tuple(errors)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


# --- the run -------------------------------------------------------------------------------

def connect(address: str):
    """The ``ray`` module, connected to the cluster at ``address`` (``auto``: the local one)."""
    ray = require("ray", NEEDED_BY)
    if not ray.is_initialized():
        try:
            ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise AnalyzeError(f"--ray {address}: cannot connect to a Ray cluster there ({_first_line(exc)}); "
                               "start one with `ray start --head` and give its address (HOST:PORT)") from None
    return ray


def check_options(options: AnalyzeOptions) -> None:
    if options.url or options.engine == "url":
        raise AnalyzeError("--ray starts a server on each node; --url measures one running server: give one of them")
    if options.engine not in ENGINES:
        raise AnalyzeError(f"--ray runs --engine {', '.join(ENGINES)}, not {options.engine}")


@dataclass
class ClusterRun:
    """A ``--ray`` run: the repository result, and the nodes with their hardware."""

    result: RepositoryResult
    nodes: list[Node] = field(default_factory=list)
    lost: list[Node] = field(default_factory=list)


def run_on_ray(options: AnalyzeOptions, models: list[str], address: str,
               reporter: RepositoryReporter | None = None) -> ClusterRun:
    """Tune ``models`` on the cluster's nodes, each into ``options.output_dir / <model>`` as a
    one-machine repository run writes it, with its summary; ``options.time_budget_s`` holds for the
    whole run, shared fairly among the models waiting for a node."""
    check_options(options)
    reporter = reporter or RepositoryReporter()
    ray = connect(address)
    pool = NodePool.discover(ray)
    repository = options.repository.resolve()
    out = options.output_dir
    run, tunable, clock, deadline = begin_run(options, repository, models)
    served: dict[str, tuple[str, ...]] = {}
    for model in list(tunable):
        try:
            served[model] = served_models(repository, model, (), options.space)
        except AnalyzeError as exc:  # as a one-machine run reports a model whose run cannot start
            tunable.remove(model)
            run.outcomes.append(ModelOutcome(model, skipped=f"failed: {exc}"))
    stopping = threading.Event()
    started = [0]
    lock = threading.Lock()

    def tune(model: str) -> ModelOutcome:
        attempt_options = replace(options, repository=repository, model=model, output_dir=out / model)
        while True:
            node = pool.acquire()
            if node is None:
                return ModelOutcome(model, skipped="failed: every node of the Ray cluster was lost")
            if stopping.is_set():
                pool.release(node)
                return ModelOutcome(model, skipped="not started: interrupted")
            with lock:
                started[0] += 1
                index, waiting = started[0], len(tunable) - started[0] + 1
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
            share = None if left is None else left * min(len(pool.nodes), waiting) / waiting
            reporter.model_start(index, len(tunable), f"{model} on node {node.name}", share, left)
            lease = Lease(node)
            maker = _maker(pool, lease, served[model])
            outcome = ModelOutcome(model, share)
            begun = time.monotonic()
            try:
                outcome.result = run_analyze(replace(attempt_options, time_budget_s=share, engine_maker=maker),
                                             reporter)
            except (AnalyzeError, PerfError) as exc:
                outcome.skipped = f"failed: {exc}"
            finally:
                pool.release(lease.node)
            outcome.wall_s = time.monotonic() - begun
            if lease.hardware_gone and not stopping.is_set():
                # A fresh search on other hardware; what was measured stays in the checkpoint.
                attempt_options = replace(attempt_options, resume=True, overwrite=False)
                with lock:
                    started[0] -= 1
                continue
            reporter.model_done(outcome)
            return outcome

    with ThreadPoolExecutor(max_workers=len(pool.nodes), thread_name_prefix="analyze-ray") as executor:
        futures = [executor.submit(tune, model) for model in tunable]
        try:
            wait(futures)
        except KeyboardInterrupt:  # each model's run stops at its next point; the models not started wait
            stopping.set()
            run.interrupted = True
            while wait(futures, timeout=0.5).not_done:
                analyze_module.CTRL_C.set()  # again: a run that was just starting cleared it
        for future in futures:
            outcome = future.result()
            run.outcomes.append(outcome)
            if outcome.result is not None and outcome.result.interrupted and \
                    not outcome.result.meta.get("out_of_time"):
                run.interrupted = True
    run.wall_s = time.monotonic() - clock
    run.outcomes.sort(key=lambda o: o.model)
    run.files = write_repository_report(run, repository)
    return ClusterRun(run, pool.nodes, pool.lost)


def run_model_on_ray(options: AnalyzeOptions, address: str, reporter=None):
    """``--model M --ray ADDRESS``: one model tuned on one node of the cluster, written to
    ``options.output_dir`` as a one-machine run writes it; returns its ``AnalyzeResult``."""
    check_options(options)
    repository = options.repository.resolve()
    served = served_models(repository, options.model, options.composing_models, options.space)
    pool = NodePool.discover(connect(address))
    node = pool.acquire()
    lease = Lease(node)
    try:
        return run_analyze(replace(options, repository=repository, engine_maker=_maker(pool, lease, served)),
                           reporter)
    finally:
        pool.release(lease.node)


def served_models(repository: Path, model: str, composing: tuple[str, ...], space: SearchSpace) -> tuple[str, ...]:
    """The models a node's server needs to tune ``model``: the model, and for a pipeline (an ensemble
    or a BLS model) every model it runs. Raises AnalyzeError for a model or pipeline that cannot be
    tuned, as a one-machine run does."""
    if not pipeline_kind(repository, model, composing):
        load_model_config(repository, model)
        return (model,)
    pipeline = load_pipeline(repository, model, composing, space)
    return (*pipeline.names, *pipeline.fixed, model)


def _maker(pool: NodePool, lease: Lease, models: tuple[str, ...]):
    def make(kind: str, repository: Path, protocol: str, log_path: Path, url: str | None = None,
             tritonserver: str | None = None, triton_args: tuple[str, ...] = ()) -> Engine:
        return RayEngine(pool, lease, kind, repository, protocol, models, tritonserver, triton_args)
    return make
