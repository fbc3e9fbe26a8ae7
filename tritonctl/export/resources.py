"""What a server running some models of a repository asks Kubernetes for, from their configs.

GPUs: an instance group of kind KIND_GPU (or a group that lists ``gpus`` and leaves the kind to
Triton) needs GPU ids 0..max(gpus) inside the container, one GPU when it lists none. The pod gets
the largest such need over its models, and every model's groups are then resolved the way Triton
resolves them on that pod (repo_schema.autocomplete.normalize_instance_groups): a group left to
KIND_AUTO lands on the GPUs when the pod has them.

CPU: one core per CPU instance (KIND_CPU and KIND_MODEL), at least one for the server itself.

Memory: an estimate, not a measurement: each served version's files held once per CPU instance
(once more while GPU instances load from host memory), plus MEMORY_PER_INSTANCE for each instance
and MEMORY_BASE for the server, all times MEMORY_HEADROOM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from tritonctl.repo_schema.autocomplete import instance_plan, normalize_instance_groups
from tritonctl.repo_schema.context import ModelContext
from tritonctl.repo_schema.schema import model_config_pb2

MIB = 1 << 20
MEMORY_BASE = 256 * MIB
MEMORY_PER_INSTANCE = 64 * MIB
MEMORY_HEADROOM = 1.5
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class ModelDemand:
    name: str
    cpu_instances: int
    gpu_instances: int
    file_bytes: int  # the files of the versions the version policy serves

    @property
    def instances(self) -> int:
        return self.cpu_instances + self.gpu_instances


@dataclass(frozen=True)
class PodResources:
    gpus: int
    cpus: int
    memory_bytes: int  # the estimate, headroom included
    models: tuple[ModelDemand, ...]

    def kubernetes(self) -> dict:
        """The container's ``resources``: requests equal to limits (the GPU count must be)."""
        amounts = {"cpu": str(self.cpus), "memory": f"{math.ceil(self.memory_bytes / MIB)}Mi"}
        if self.gpus:
            amounts[GPU_RESOURCE] = str(self.gpus)
        return {"requests": dict(amounts), "limits": dict(amounts)}

    def explanation(self) -> str:
        """One line on where the numbers come from, for an annotation."""
        cpu = sum(m.cpu_instances for m in self.models)
        gpu = sum(m.gpu_instances for m in self.models)
        files = sum(m.file_bytes for m in self.models)
        return (f"{cpu} CPU instance(s), {gpu} GPU instance(s) on {self.gpus} GPU(s); memory is an estimate: "
                f"{files / MIB:.1f} MiB of model files per host copy, {MEMORY_PER_INSTANCE // MIB} MiB per "
                f"instance, {MEMORY_BASE // MIB} MiB for the server, x{MEMORY_HEADROOM} headroom")


def gpus_needed(ctx: ModelContext) -> int:
    """How many GPUs (ids 0..n-1) the model's instance groups ask for, as written."""
    kinds = model_config_pb2().ModelInstanceGroup.Kind
    need = 0
    for group in ctx.effective.instance_group:
        if group.kind == kinds.Value("KIND_GPU") or (group.kind == kinds.Value("KIND_AUTO") and group.gpus):
            need = max(need, max(group.gpus) + 1 if group.gpus else 1)
    return need


def model_demand(ctx: ModelContext, gpus: int) -> ModelDemand:
    """The model's instances on a pod with ``gpus`` GPUs, and the size of its served files."""
    config = type(ctx.effective)()
    config.CopyFrom(ctx.effective)
    if config.platform == "ensemble":  # no instances of its own: its steps run in their models
        return ModelDemand(ctx.name, 0, 0, 0)
    normalize_instance_groups(config, list(range(gpus)))
    plan = instance_plan(config)
    gpu_instances = sum(1 for spec in plan if spec.kind == "KIND_GPU")
    return ModelDemand(ctx.name, len(plan) - gpu_instances, gpu_instances, _served_bytes(ctx, config))


def pod_resources(models: list[ModelContext]) -> PodResources:
    gpus = max((gpus_needed(ctx) for ctx in models), default=0)
    demands = tuple(model_demand(ctx, gpus) for ctx in models)
    host_bytes = sum(d.file_bytes * (d.cpu_instances + (1 if d.gpu_instances else 0)) for d in demands)
    instances = sum(d.instances for d in demands)
    memory = MEMORY_HEADROOM * (MEMORY_BASE + host_bytes + MEMORY_PER_INSTANCE * instances)
    cpus = max(1, sum(d.cpu_instances for d in demands))
    return PodResources(gpus, cpus, math.ceil(memory), demands)


def _served_bytes(ctx: ModelContext, config) -> int:
    available = {v.version: v.path for v in ctx.versions if v.version is not None}
    policy = config.version_policy
    which = policy.WhichOneof("policy_choice")
    if which == "all":
        served = sorted(available)
    elif which == "specific":
        served = sorted(set(policy.specific.versions) & set(available))
    else:
        count = policy.latest.num_versions if which == "latest" else 1
        served = sorted(available)[-max(count, 1):]
    return sum(_tree_bytes(available[v]) for v in served)


def _tree_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
