"""KServe InferenceService manifests for a model repository.

Two runtimes serve the repository, both over the KServe v2 (Open Inference) protocol:
``triton``: KServe's Triton runtime (the ``kserve-tritonserver`` ClusterServingRuntime, model
format ``triton``), which starts tritonserver on the whole repository downloaded from the
storage URI; ``tritonctl``: the bundled server as a custom predictor, a container running
``tritonctl serve`` on the same download (KServe's storage initializer fetches STORAGE_URI into
/mnt/models for it).

One InferenceService serves the whole repository, as Triton's runtime does; ``per_model`` makes
one per model instead, each loading only its model (and an ensemble's steps) with
``--model-control-mode=explicit``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonctl import __version__
from tritonctl.export.names import RUNTIMES, ExportInputError, service_name
from tritonctl.export.resources import PodResources, pod_resources
from tritonctl.repo_schema.context import ModelContext, RepositoryContext

API_VERSION = "serving.kserve.io/v1beta1"
KIND = "InferenceService"
TRITON_RUNTIME = "kserve-tritonserver"  # KServe's ClusterServingRuntime for model format "triton"
DEFAULT_IMAGE = f"tritonctl:{__version__}"  # built and pushed by the user: see docs/export.md
MODEL_MOUNT = "/mnt/models"  # where KServe's storage initializer puts what STORAGE_URI names
HTTP_PORT = 8080  # the port KServe routes to
GRPC_PORT = 9000
ANNOTATION_PREFIX = "tritonctl"


@dataclass(frozen=True)
class ExportOptions:
    storage_uri: str
    runtime: str = "triton"
    image: str = DEFAULT_IMAGE
    per_model: bool = False
    name: str | None = None  # the whole-repository service's name (default: from the directory)
    runtime_version: str | None = None  # the Triton runtime's image tag (default: the runtime's own)
    namespace: str | None = None

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ExportInputError(f"unknown runtime '{self.runtime}': expected one of {', '.join(RUNTIMES)}")


@dataclass(frozen=True)
class Service:
    """One InferenceService: its name, the models its server loads, and its pod's resources."""

    name: str
    models: tuple[str, ...]
    explicit: bool  # load only ``models`` (per-model export)
    resources: PodResources


def plan_services(repo: RepositoryContext, options: ExportOptions) -> list[Service]:
    models = repo.models
    if not models:
        raise ExportInputError(f"{repo.root} holds no model directories: nothing to export")
    if not options.per_model:
        name = options.name or service_name(repo.root.resolve().name)
        return [Service(name, tuple(sorted(models)), False, pod_resources(list(models.values())))]
    services, taken = [], {}
    for model in sorted(models):
        name = service_name(model)
        if name in taken:
            raise ExportInputError(f"models '{taken[name]}' and '{model}' both make the InferenceService name "
                                   f"'{name}'; rename one, or export the repository as one service (without "
                                   "--per-model)")
        taken[name] = model
        loaded = _with_members(model, models)
        services.append(Service(name, loaded, True, pod_resources([models[m] for m in loaded])))
    return services


def _with_members(model: str, models: dict[str, ModelContext]) -> tuple[str, ...]:
    """``model`` and, for an ensemble, every model its steps call (transitively)."""
    seen, todo = [], [model]
    while todo:
        name = todo.pop(0)
        if name in seen or name not in models:
            continue
        seen.append(name)
        config = models[name].effective
        if config.platform == "ensemble":
            todo.extend(step.model_name for step in config.ensemble_scheduling.step)
    return tuple(seen)


def manifest(service: Service, options: ExportOptions) -> dict:
    """The InferenceService for ``service`` as a plain mapping, in the order kubectl prints it."""
    metadata: dict = {"name": service.name}
    if options.namespace:
        metadata["namespace"] = options.namespace
    metadata["labels"] = {"app.kubernetes.io/managed-by": "tritonctl"}
    metadata["annotations"] = {
        f"{ANNOTATION_PREFIX}/models": ",".join(service.models),
        f"{ANNOTATION_PREFIX}/resources": service.resources.explanation(),
    }
    resources = service.resources.kubernetes()
    explicit = ["--model-control-mode=explicit", *(f"--load-model={m}" for m in service.models)] \
        if service.explicit else []
    if options.runtime == "triton":
        model = {"modelFormat": {"name": "triton"}, "runtime": TRITON_RUNTIME, "protocolVersion": "v2",
                 "storageUri": options.storage_uri}
        if options.runtime_version:
            model["runtimeVersion"] = options.runtime_version
        if explicit:
            model["args"] = explicit
        model["resources"] = resources
        predictor = {"model": model}
    else:
        container = {
            "name": "kserve-container",
            "image": options.image,
            "command": ["tritonctl"],
            "args": ["serve", MODEL_MOUNT, "--host", "0.0.0.0", "--http-port", str(HTTP_PORT),
                     "--grpc-port", str(GRPC_PORT), *explicit],
            "env": [{"name": "STORAGE_URI", "value": options.storage_uri}],
            "ports": [{"containerPort": HTTP_PORT, "protocol": "TCP"}],
            "readinessProbe": {"httpGet": {"path": "/v2/health/ready", "port": HTTP_PORT}},
            "resources": resources,
        }
        predictor = {"containers": [container]}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": {"predictor": predictor}}
