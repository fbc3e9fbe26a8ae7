"""The model repository as the server runs it: which model versions are loaded, their
states, version policies, model control modes and load / unload / reload."""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tritonctl.repo_schema.repository import model_dirs, version_dirs
from tritonctl.serve.core import override_files
from tritonctl.serve.core.backend_api import BackendLoadError, BackendRegistry, ServerHandle
from tritonctl.serve.core.cache import ResponseCache
from tritonctl.serve.core.config import DEFAULT_MAX_BATCH_SIZE, load_config
from tritonctl.serve.core.confine import Escape, check_disk_config, check_file_override, check_model_dir, inside
from tritonctl.serve.core.errors import ServeError, invalid_arg, not_found, unavailable
from tritonctl.serve.core.model import ModelVersion
from tritonctl.serve.core.names import check_model_name, check_version
from tritonctl.serve.core.rate_limiter import RateLimiter
from tritonctl.serve.core.repo_agents import RepoAgentError, run_agents

log = logging.getLogger("tritonctl.serve")

READY, UNAVAILABLE, LOADING, UNLOADING = "READY", "UNAVAILABLE", "LOADING", "UNLOADING"


@dataclass
class VersionState:
    state: str
    reason: str = ""


@dataclass
class ModelEntry:
    name: str
    model_dir: Path
    versions: dict[int, ModelVersion] = field(default_factory=dict)
    states: dict[int, VersionState] = field(default_factory=dict)
    error: str = ""  # a load failure that concerns the model as a whole (no version states)
    fingerprint: tuple = ()
    unloaded: bool = False
    overridden: bool = False  # loaded with the load API's ``config`` instead of the files on disk
    owns_dir: bool = False  # model_dir holds the load API's files (override_files): removed with the entry
    failed_fingerprint: tuple | None = None  # the files of a reload that failed while this entry served (not retried)
    reload_error: str = ""  # why the last reload failed while this entry served (the index tells it)


def policy_versions(config, available: list[int]) -> tuple[list[int], list[int]]:
    """(versions to load, versions the policy names but that do not exist) per the version policy."""
    policy = config.version_policy
    which = policy.WhichOneof("policy_choice")
    if which == "all":
        return sorted(available), []
    if which == "specific":
        wanted = sorted(set(policy.specific.versions))
        return [v for v in wanted if v in available], [v for v in wanted if v not in available]
    count = policy.latest.num_versions if which == "latest" else 1
    return sorted(available)[-max(count, 1):] if available else [], []


def is_ensemble_dir(model_dir: Path) -> bool:
    """Whether the model's config.pbtxt declares ``platform: "ensemble"`` (a quick look, before loading)."""
    path = model_dir / "config.pbtxt"
    if not inside(path, model_dir):  # refused by the load, with its reason
        return False
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(r'^\s*platform\s*:\s*"ensemble"', text, re.MULTILINE) is not None


def fingerprint(model_dir: Path) -> tuple:
    """Names, sizes and modification times of every file under a model directory."""
    entries = []
    for path in sorted(model_dir.rglob("*")):
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((str(path.relative_to(model_dir)), stat.st_size, stat.st_mtime_ns))
    return tuple(entries)


def files_but_config(entries: tuple) -> tuple:
    """A fingerprint less the model's config files (config.pbtxt, configs/)."""
    return tuple(e for e in entries if e[0] != "config.pbtxt" and not e[0].startswith("configs/"))


class ModelManager:
    """``backends``: the backends models may name (the runtime registers them); ``host``: the
    handle every instance gets, set to the server once one runs over this manager."""

    def __init__(self, repository: Path, backends: BackendRegistry, control_mode: str = "none",
                 config_name: str | None = None, strict_readiness: bool = True, drain_timeout_s: float = 30.0,
                 response_cache: ResponseCache | None = None, auto_complete: bool = True,
                 rate_limiter: RateLimiter | None = None, default_max_batch_size: int = DEFAULT_MAX_BATCH_SIZE):
        self.repository = repository
        self.backends = backends
        self.host = ServerHandle()
        self.response_cache = response_cache  # the server's cache, shared by every model
        self.rate_limiter = rate_limiter  # tritonserver's --rate-limit=execution_count; None: off
        # what onnxruntime's auto-complete gives a model that can batch (--backend-config's)
        self.default_max_batch_size = default_max_batch_size
        self.control_mode = control_mode
        self.config_name = config_name
        self.strict_readiness = strict_readiness
        self.drain_timeout_s = drain_timeout_s
        # tritonserver's --strict-model-config=true (auto_complete False): every model needs its
        # config file, and no backend completes a config
        self.auto_complete = auto_complete
        self.models: dict[str, ModelEntry] = {}
        self._locks_lock = threading.Lock()
        self._model_locks: dict[str, threading.RLock] = {}
        self.loading: Counter = Counter()  # model name -> loads of it running now
        self.version_listeners: list[Callable[[ModelVersion], None]] = []  # told of each version loaded

    # ---- discovery and loading -------------------------------------------------------------
    def model_names_on_disk(self) -> list[str]:
        return [d.name for d in model_dirs(self.repository)]

    def load_all(self, names: list[str] | None = None) -> None:
        """Load ``names`` (default: every model); ensembles after the models they are made of, in
        rounds, so an ensemble of ensembles finds its steps loaded."""
        names = names if names is not None else self.model_names_on_disk()
        ensembles = [n for n in names if is_ensemble_dir(self.repository / n)]
        for name in [n for n in names if n not in ensembles]:
            self._load_logged(name)
        while ensembles:
            failed = [n for n in ensembles if not self._load_logged(n, quiet=True)]
            if len(failed) == len(ensembles):
                for name in failed:
                    self._load_logged(name)
                break
            ensembles = failed

    def _load_logged(self, name: str, quiet: bool = False) -> bool:
        try:
            self.load(name)
        except ServeError as exc:
            if not quiet:
                log.error("%s", exc.message)
            return False
        return True

    def load(self, name: str, config_override: str | None = None, files_dir: Path | None = None) -> None:
        """Load or reload ``name`` (from ``files_dir``, a directory of the load API's files, else
        from the repository); the previous versions keep serving until the new ones are ready.
        A load that fails changes nothing that serves: the versions that were serving go on
        (the new ones are dropped); a model that served nothing is recorded with its reason."""
        check_model_name(name)
        model_dir = files_dir or self.repository / name
        if not model_dir.is_dir():
            raise invalid_arg(f"failed to load '{name}', failed to poll from model repository")
        self.loading[name] += 1
        try:
            self._load(name, model_dir, config_override, owns_dir=files_dir is not None)
        finally:
            self.loading[name] -= 1
            if not self.loading[name]:
                del self.loading[name]

    def _model_lock(self, name: str) -> threading.RLock:
        """One lock per model name: the loads and unloads of a model take turns, while other models'
        go on (a Python model's initialize may load another one with pb_utils.load_model)."""
        with self._locks_lock:
            return self._model_locks.setdefault(name, threading.RLock())

    def _load(self, name: str, model_dir: Path, config_override: str | None, owns_dir: bool) -> None:
        with self._model_lock(name):
            old = self.models.get(name)
            serving = old is not None and bool(old.versions)
            entry = ModelEntry(name, model_dir, overridden=config_override is not None,
                               fingerprint=fingerprint(model_dir), owns_dir=owns_dir)
            try:
                if not owns_dir:
                    check_model_dir(self.repository, model_dir, self.config_name)
                if config_override is None:
                    check_disk_config(model_dir, self.config_name)
            except Escape as exc:
                entry.error = str(exc)
                self._fail(entry, old, serving, [])
            if config_override is None and not self.auto_complete and not self._has_config_file(model_dir):
                entry.error = f"failed to open text file for read {model_dir / 'config.pbtxt'}: No such file or directory"
                self._fail(entry, old, serving, [], unreadable=True)
            loaded = load_config(model_dir, self.config_name, config_override,
                                 self.backends.complete_config if self.auto_complete else None,
                                 self.default_max_batch_size)
            if loaded.errors or loaded.config is None:
                entry.error = loaded.error_text() or "the config could not be built"
                self._fail(entry, old, serving, [], unreadable=loaded.unreadable)
            config = loaded.config
            config.name = name
            try:
                run_agents(config, model_dir)
            except RepoAgentError as exc:
                entry.error = str(exc)
                self._fail(entry, old, serving, [], unreadable=True)
            if config.platform == "ensemble":
                self._load_steps(config)
            available = [v.version for v in version_dirs(model_dir) if v.version is not None and v.version >= 0]
            wanted, missing = policy_versions(config, available)
            for version in missing:
                entry.states[version] = VersionState(UNAVAILABLE, f"version {version} does not exist in {model_dir}")
            if not wanted and not missing:
                entry.error = f"no version is available for model '{name}' in {model_dir}"
            fresh = []  # versions loaded by this call (not reused from ``old``)
            for version in wanted:
                reusable = old.versions.get(version) if old and config_override is None and \
                    not old.overridden and old.fingerprint == entry.fingerprint else None
                if reusable is not None and not all(i.ready() for i in getattr(reusable, "instances", ())):
                    reusable = None  # an instance that cannot execute any more (a dead stub): load it anew
                if reusable is not None:
                    entry.versions[version] = reusable
                    entry.states[version] = VersionState(READY)
                    continue
                try:
                    updated = self._update_in_place(old, entry, version, config)
                    if updated is not None:
                        entry.versions[version] = updated
                        entry.states[version] = VersionState(READY)
                        continue
                    if config.platform == "ensemble":
                        from tritonctl.serve.core.ensemble import EnsembleVersion

                        entry.versions[version] = EnsembleVersion(config, version, model_dir, self.get)
                    else:
                        entry.versions[version] = ModelVersion.load(config, version, model_dir, self.backends,
                                                                   self.host, self.response_cache,
                                                                   self.rate_limiter)
                    fresh.append(entry.versions[version])
                    for listener in self.version_listeners:
                        listener(entry.versions[version])
                    entry.states[version] = VersionState(READY)
                    log.info("loaded model '%s' version %d", name, version)
                except BackendLoadError as exc:
                    entry.states[version] = VersionState(UNAVAILABLE, str(exc))
            if entry.error or any(s.state != READY for s in entry.states.values()):
                self._fail(entry, old, serving, fresh)
            self._install(name, entry, old)

    def _has_config_file(self, model_dir: Path) -> bool:
        return (model_dir / "config.pbtxt").is_file() or bool(
            self.config_name and (model_dir / "configs" / f"{self.config_name}.pbtxt").is_file())

    def _update_in_place(self, old: ModelEntry | None, entry: ModelEntry, version: int, config):
        """Triton's model update: where the version serves, the model's files other than its config
        are unchanged and ``config`` changes only its instance groups, the version stays and gains
        or loses instances (ModelVersion.update_instances); None where it must load anew."""
        current = old.versions.get(version) if old is not None else None
        if current is None or old.model_dir != entry.model_dir \
                or files_but_config(old.fingerprint) != files_but_config(entry.fingerprint) \
                or not getattr(current, "can_update_instances", lambda _: False)(config) \
                or not all(instance.ready() for instance in current.instances):
            return None
        current.update_instances(config, self.backends, self.host)
        log.info("updated the instances of model '%s' version %d", entry.name, version)
        return current

    def _load_steps(self, config) -> None:
        """Load the ensemble's step models that were never loaded or were unloaded, as Triton
        does; one that fails to load leaves the ensemble's load to name it."""
        for model in dict.fromkeys(step.model_name for step in config.ensemble_scheduling.step):
            entry = self.models.get(model)
            if (entry is None or entry.unloaded) and model not in self.loading and (self.repository / model).is_dir():
                try:
                    self.load(model)
                except ServeError:
                    pass

    def _fail(self, entry: ModelEntry, old: ModelEntry | None, serving: bool, fresh: list,
              unreadable: bool = False) -> None:
        """Raise the load failure of ``entry``, in Triton's words: a poll failure where the config
        is ``unreadable``, else the failed versions. Where ``old`` serves, it goes on serving and the
        versions this load started (``fresh``) are stopped; else ``entry`` is recorded, so the
        repository index tells the reason."""
        name = entry.name
        failures = [f"version {v} is at UNAVAILABLE state: {s.reason}" for v, s in entry.states.items()
                    if s.state != READY]
        detail = "; ".join(filter(None, [entry.error, *failures]))
        error = override_files.poll_failure(name, detail) if unreadable else \
            invalid_arg(f"load failed for model '{name}': {detail}")
        message = error.message
        if serving:
            old.failed_fingerprint = entry.fingerprint  # poll mode retries only once the files change again
            old.reload_error = f"{message}; the versions that were serving go on serving"
            if fresh:
                threading.Thread(target=self._retire, args=(fresh,), daemon=True).start()
            log.error("%s; the versions that were serving go on serving", message)
        else:
            self._install(name, entry, old)
        raise error

    def load_from_api(self, name: str, parameters: dict) -> None:
        """The repository API's load: explicit mode only, an optional ``config`` JSON override, and
        optional ``file:<version>/<name>`` files (bytes) to load the model from (override_files)."""
        if self.control_mode != "explicit":  # checked first, as Triton does, whatever the name
            raise unavailable("explicit model load / unload is not allowed if polling is enabled")
        check_model_name(name)
        files = {}
        for key, value in parameters.items():
            if key == "config":
                if not isinstance(value, (str, bytes)):
                    raise invalid_arg(f"failed to load '{name}': the 'config' parameter must be a string holding "
                                      f"the model's ModelConfig as JSON, got {type(value).__name__}")
            elif key.startswith(override_files.PREFIX):
                try:
                    check_file_override(key, name)
                except Escape as exc:
                    raise override_files.poll_failure(name, str(exc)) from None
                if not isinstance(value, bytes):
                    raise override_files.poll_failure(name, f"File parameter '{key}' must have bytes type for its "
                                                            "value")
                files[key] = value
        config = parameters.get("config")
        config = config.decode() if isinstance(config, bytes) else config
        if not files:
            self.load(name, config)
            return
        if config is None:
            raise override_files.poll_failure(name, "Load parameter 'config' must be specified for model file "
                                                    "override")
        files_dir = override_files.write_model_dir(name, files)
        try:
            self.load(name, config, files_dir)
        finally:
            entry = self.models.get(name)
            if entry is None or entry.model_dir != files_dir:  # a failed reload: the old versions go on
                override_files.remove_model_dir(files_dir)

    def unload_from_api(self, name: str) -> None:
        if self.control_mode != "explicit":  # checked first, as Triton does, whatever the name
            raise unavailable("explicit model load / unload is not allowed if polling is enabled")
        check_model_name(name)
        self.unload(name)

    def _install(self, name: str, entry: ModelEntry, old: ModelEntry | None) -> None:
        """Serve ``entry`` in place of ``old``. As in Triton, the versions of ``old`` that ``entry``
        leaves out stay in the index: UNLOADING while they drain, then UNAVAILABLE "unloaded"."""
        if old is not None:
            for version, state in old.states.items():
                if version not in entry.states and (version in old.versions or state.reason == "unloaded"):
                    entry.states[version] = VersionState(UNLOADING) if version in old.versions else state
        self.models[name] = entry
        if old is None:
            return
        retired = [mv for v, mv in old.versions.items() if entry.versions.get(v) is not mv]
        gone = old if old.owns_dir and old.model_dir != entry.model_dir else None
        if retired or gone:
            threading.Thread(target=self._retire, args=(retired, gone), daemon=True).start()

    def _retire(self, versions: list[ModelVersion], gone: ModelEntry | None = None) -> None:
        """Stop ``versions`` (a version left UNLOADING in the index becomes UNAVAILABLE "unloaded");
        then remove the load API's files of ``gone``, an entry replaced or unloaded."""
        for model_version in versions:
            model_version.stop(self.drain_timeout_s)
            entry = self.models.get(model_version.name)
            state = entry.states.get(model_version.version) if entry is not None else None
            if state is not None and state.state == UNLOADING and model_version.version not in entry.versions:
                entry.states[model_version.version] = VersionState(UNAVAILABLE, "unloaded")
        if gone is not None and gone.owns_dir:
            gone.owns_dir = False
            override_files.remove_model_dir(gone.model_dir)

    def unload(self, name: str) -> None:
        with self._model_lock(name):
            entry = self.models.get(name)
            if entry is None:
                return
            for version in entry.versions:
                entry.states[version] = VersionState(UNLOADING)
            versions = list(entry.versions.values())
            entry.versions = {}
        self._retire(versions, entry)
        with self._model_lock(name):
            entry.states = {v: VersionState(UNAVAILABLE, "unloaded") for v in entry.states}
            entry.unloaded = True
            entry.error = ""
        log.info("unloaded model '%s'", name)
        for dependent in self._ensembles_using(name):
            self.unload(dependent)

    def _ensembles_using(self, name: str) -> list[str]:
        """The loaded ensembles with a step on ``name``: as in Triton, unloading a model unloads
        them too (state UNAVAILABLE, reason "unloaded"); loading one again loads its steps."""
        return [other for other, entry in list(self.models.items())
                if other != name and any(step.model == name for version in list(entry.versions.values())
                                         for step in getattr(version, "steps", ()))]

    def poll(self) -> None:
        """POLL mode: load new and changed models, unload removed ones."""
        on_disk = set(self.model_names_on_disk())
        changed = [name for name in sorted(on_disk) if name not in self.models
                   or fingerprint(self.repository / name) not in (self.models[name].fingerprint,
                                                                   self.models[name].failed_fingerprint)]
        self.load_all(changed)
        for name in [n for n in self.models if n not in on_disk and not self.models[n].unloaded]:
            self.unload(name)

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop every model version, after the loads running now (a stuck load keeps this waiting:
        the runtime's stop gives up on it at its exit timeout, naming the load)."""
        for name in list(self.loading):
            with self._model_lock(name):
                pass
        entries = list(self.models.values())
        for model_version in [mv for entry in entries for mv in list(entry.versions.values())]:
            model_version.stop(timeout_s)
        for entry in entries:
            if entry.owns_dir:
                entry.owns_dir = False
                override_files.remove_model_dir(entry.model_dir)

    # ---- lookups ----------------------------------------------------------------------------
    def get(self, name: str, version: str = "") -> ModelVersion:
        entry = self.models.get(name)
        if entry is None:
            check_model_name(name)
            raise not_found(f"Request for unknown model: '{name}' is not found")
        if version:
            check_version(name, version)
            number = int(version)
            model_version = entry.versions.get(number)
            if model_version is not None:
                return model_version
            if number in entry.states:
                raise unavailable(f"Request for unknown model: '{name}' version {number} is not at ready state")
            raise not_found(f"Request for unknown model: '{name}' version {number} is not found")
        if not entry.versions:  # unloaded, or no version loaded: NOT_FOUND in Triton, unlike a version's state
            raise not_found(f"Request for unknown model: '{name}' has no available versions")
        return entry.versions[max(entry.versions)]

    def is_ready(self, name: str, version: str = "") -> bool:
        """Whether that version (or the latest) is ready; a name or version that cannot be one is
        refused (invalid_arg)."""
        check_model_name(name)
        check_version(name, version)
        try:
            model_version = self.get(name, version)
        except ServeError:
            return False
        for instance in model_version.instances:
            reason = instance.readiness()
            if reason is not None:  # Triton's line, one per check
                log.error("Model '%s' version %s is not ready: %s", name, model_version.version, reason)
                return False
        return True

    def failed_models(self) -> list[str]:
        """The models whose last load failed (as a whole or in a version), unloaded ones aside."""
        return [name for name, entry in list(self.models.items()) if not entry.unloaded
                and (entry.error or any(s.state not in (READY, UNLOADING) and s.reason != "unloaded"
                                        for s in entry.states.values()))]

    def server_ready(self) -> bool:
        return not self.strict_readiness or not self.failed_models()

    def index(self, ready_only: bool = False) -> list[dict]:
        rows = []
        on_disk = self.model_names_on_disk() if self.repository.is_dir() else []
        for name in sorted(set(on_disk) | set(self.models)):
            entry = self.models.get(name)
            if entry is not None and entry.unloaded and name not in on_disk:
                continue  # unloaded and gone from the repository (poll mode): Triton's index forgets it
            if entry is None or (not entry.states and not entry.error):
                if not ready_only:
                    rows.append({"name": name, **({"state": UNAVAILABLE, "reason": "unloaded"}
                                                  if entry is not None else {})})
                continue
            if entry.error and not entry.states:
                if not ready_only:
                    rows.append({"name": name, "state": UNAVAILABLE, "reason": entry.error})
                continue
            for version, state in sorted(entry.states.items()):
                if ready_only and state.state != READY:
                    continue
                row = {"name": name, "version": str(version), "state": state.state}
                reason = state.reason or (entry.reload_error if state.state == READY else "")
                if reason:
                    row["reason"] = reason
                rows.append(row)
        return rows

    def ready_versions(self, name: str) -> list[str]:
        entry = self.models.get(name)
        return [str(v) for v in sorted(entry.versions)] if entry else []
