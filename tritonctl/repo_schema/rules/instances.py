"""Instance groups (IG-*): kinds, GPU ids, profiles, host policies, rate limiter.

Whether KIND_GPU can run and which GPU ids are valid depend on the server machine:
``validate --gpus N`` (or ``TRITONCTL_ASSUME_GPUS=N``) names the target server's GPU
count, ``--gpus local`` the machine validate runs on. Without them those checks are
left out (``CheckOptions.gpus`` is None) and IG54 says so; what is wrong for any GPU
count (a negative id, GPUs on a CPU group) is always reported.
"""

from __future__ import annotations

import re

from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, ONNX, ORT_OK, TRT, Example
from tritonctl.repo_schema.gpus import ASSUME_GPUS_ENV, GpuInfo
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.schema import model_config_pb2

_GPU_EXPLANATION = f"""
    The GPUs that count are the target server's, not those of the machine validate runs
    on: `tritonctl validate --gpus N` (or {ASSUME_GPUS_ENV}=N) checks for a server with N
    GPUs (ids 0..N-1), `--gpus local` for this machine's (nvidia-smi -L, or
    /proc/driver/nvidia/gpus, narrowed by CUDA_VISIBLE_DEVICES). Without either, GPU
    counts and ids are not checked (IG54); `tritonctl serve` and the library check
    against the machine they run on.
"""

ENSEMBLE_GROUPS = register(
    "IG01", "instance_group on an ensemble", "error",
    """
    An ensemble has no instances of its own; its steps run on the composing models'
    instances. Triton refuses "instance group should not be specified for ensemble
    '<m>'". Remove instance_group and set it on the composing models.
    """, "IG-01",
    example=Example(
        'platform: "ensemble"\nmax_batch_size: 8\n'
        + IO
        + 'instance_group [ { count: 1 kind: KIND_CPU } ]\nensemble_scheduling { step [ { model_name: "my_model" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" } } ] }\n',
        files=("1/",),
    ))
MODEL_KIND_WITH_GPUS = register(
    "IG02", "KIND_MODEL group lists gpus", "error",
    """
    KIND_MODEL lets the model place itself on devices, so it takes no GPU list: Triton
    refuses "... has kind KIND_MODEL but specifies one or more GPUs". Remove `gpus`, or
    use KIND_GPU.
    """, "IG-02",
    example=Example(H + IO + "instance_group [ { kind: KIND_MODEL gpus: [ 0 ] } ]\n"))
CPU_KIND_WITH_GPUS = register(
    "IG03", "CPU group lists gpus", "error",
    """
    A KIND_CPU group runs on the CPU, so listing GPUs is a contradiction: Triton refuses
    "... has kind KIND_CPU but specifies one or more GPUs". A KIND_AUTO group whose GPUs
    are not all available on the server becomes KIND_CPU first and then fails the same
    way. Remove `gpus`, or use KIND_GPU with GPU ids the server has.
    """ + _GPU_EXPLANATION, "IG-03",
    example=Example(H + IO + "instance_group [ { count: 2 kind: KIND_CPU gpus: [ 0 ] } ]\n"))
NO_GPU_AVAILABLE = register(
    "IG04", "KIND_GPU but no GPU is available", "error",
    """
    Triton refuses KIND_GPU instance groups on a server without a usable GPU ("instance
    group <g> of model <m> has kind KIND_GPU but no GPUs are available"). Use KIND_CPU
    (or KIND_AUTO, which falls back to the CPU), or run the server on a GPU machine.
    """ + _GPU_EXPLANATION, "IG-04")
INVALID_GPU_ID = register(
    "IG05", "gpu id the server does not have", "error",
    """
    `gpus` lists CUDA device ids as the server sees them: 0..N-1 over the visible devices
    (CUDA_VISIBLE_DEVICES and docker --gpus renumber them from 0). Any other id fails:
    "specifies invalid or unsupported gpu id <g>. GPUs with at least the minimum
    required CUDA compute compatibility of 6.0 are: <list>".
    """ + _GPU_EXPLANATION, "IG-05")
BAD_PROFILE = register(
    "IG06", "invalid TensorRT optimization profile", "error",
    """
    `profile` selects TensorRT optimization profiles by index, so Triton accepts it only
    for tensorrt_plan models ("specifies profile field which is only supported for
    TensorRT models") and only as non-negative integers written as strings, for example
    profile: ["0", "1"].
    """, "IG-06",
    example=Example(
        ONNX + IO + 'instance_group [ { kind: KIND_CPU profile: [ "0" ] } ]\n', files=("1/model.onnx",)
    ))
TENSORRT_NEEDS_GPU = register(
    "IG07", "TensorRT model with CPU instances", "error",
    """
    TensorRT engines run only on GPUs: "unable to load model '<m>', TensorRT backend
    supports only GPU device". KIND_CPU groups fail, and so do KIND_AUTO groups (or a
    config without instance_group) on a server without a GPU. Use KIND_GPU (or
    KIND_MODEL for multi-device engines).
    """ + _GPU_EXPLANATION, "IG-07",
    example=Example(TRT + IO + "instance_group [ { kind: KIND_CPU } ]\n", files=("1/model.plan",)))
SECONDARY_DEVICES = register(
    "IG08", "more than one secondary device", "error",
    """
    The TensorRT backend accepts at most one secondary device (an NVDLA core) per
    instance group: "must have either zero or or one secondary devices". Split the
    group into one group per DLA core.
    """, "IG-08",
    example=Example(
        TRT
        + IO
        + "instance_group [ { kind: KIND_GPU gpus: [ 0 ] secondary_devices [ { kind: KIND_NVDLA device_id: 0 }, { kind: KIND_NVDLA device_id: 1 } ] } ]\n",
        files=("1/model.plan",),
    ))
RATE_LIMITER_RESOURCE = register(
    "IG10", "rate-limiter resource is both global and per-device", "warning",
    """
    With `tritonserver --rate-limit=execution_count`, a resource is either global (one
    pool for the server) or per device. Using one name both ways fails: 'Resource
    "<r>" is present as both global and device-specific resource in the model
    configuration.' Without rate limiting the resources are ignored. Give the two
    uses different names, or make them all global.
    """, "IG-10",
    example=Example(
        H
        + IO
        + 'instance_group [ { kind: KIND_CPU rate_limiter { resources [ { name: "R" global: true count: 1 }, { name: "R" count: 2 } ] } } ]\n'
    ))
ALL_PASSIVE = register(
    "IG12", "every instance group is passive", "warning",
    """
    The instances of a passive group (passive: true) are created and initialized, but
    the scheduler never gives them requests: they are for a model or backend that hands
    work to them itself. When every group is passive the model takes no requests at all:
    Triton 2.51 stopped with a segmentation fault on one, and `tritonctl serve` answers
    each UNAVAILABLE. Leave at least one group active (drop passive: true from it).
    """,
    example=Example(H + IO + "instance_group [ { kind: KIND_CPU count: 2 passive: true } ]\n"))
TF_GPU_ACCELERATOR_ON_CPU = register(
    "IG11", "GPU accelerator with CPU-only instances (TensorFlow)", "error",
    """
    The TensorFlow backend refuses GPU execution accelerators on CPU instances: "GPU
    Execution Accelerator can only be set on non-CPU backend context". Move them to
    cpu_execution_accelerator, or use KIND_GPU instances.
    """, "IG-11",
    example=Example(
        'platform: "tensorflow_savedmodel"\nmax_batch_size: 8\n'
        + IO
        + 'instance_group [ { kind: KIND_CPU } ]\noptimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }\n',
        files=("1/model.savedmodel/",),
    ))
GPUS_NOT_CHECKED = register(
    "IG54", "GPU ids and kinds not checked", "info",
    """
    Whether a KIND_GPU group can run, and which `gpus` ids exist, depend on the server
    that will load the model, so `tritonctl validate` does not guess them from the
    machine it runs on (a CI runner usually has no GPU). Give the target server's GPU
    count with --gpus N (or TRITONCTL_ASSUME_GPUS=N), or --gpus local to check against
    this machine. Configs that are wrong whatever the GPU count (a negative gpu id,
    gpus on a KIND_CPU group, TensorRT on KIND_CPU) are reported either way.
    """, "IG-04")
NON_POSITIVE_COUNT = register(
    "IG50", "instance count is zero or negative", "warning",
    """
    `count: 0` does not disable a group: Triton replaces any count below 1 with the
    default (1, or 2 for CPU groups of onnxruntime and tensorflow), so the model still
    runs that many instances. Set the count you want, or remove the group.
    """, "NC-02",
    example=Example(H + IO + "instance_group [ { count: 0 kind: KIND_CPU } ]\n"))
DUPLICATE_GROUP_NAME = register(
    "IG51", "two instance groups with the same name", "warning",
    """
    Triton accepts duplicate group names, but instances are named <group>_<k>, so the
    names collide in logs, metrics and statistics. Give each group its own name.
    """, "NC-02",
    example=Example(
        H + IO + 'instance_group [ { name: "cpu" kind: KIND_CPU }, { name: "cpu" kind: KIND_CPU } ]\n'
    ))
UNKNOWN_HOST_POLICY = register(
    "IG52", "host_policy is not a default policy", "warning",
    """
    host_policy names a policy defined with `tritonserver --host-policy=<name>,<setting>=
    <value>`. The built-in names are "cpu", "model" and "gpu_<id>". Any other name that
    the server does not define silently uses an empty policy (no NUMA binding).
    """, "NC-02",
    example=Example(H + IO + 'instance_group [ { kind: KIND_CPU host_policy: "numa0" } ]\n'))
ORT_GPU_ACCELERATOR_ON_CPU = register(
    "IG53", "GPU accelerator with CPU-only instances", "warning",
    """
    gpu_execution_accelerator entries (tensorrt, cuda) apply only to GPU and KIND_AUTO
    instances. When every instance group is KIND_CPU, the onnxruntime backend ignores
    them without a message. Use KIND_GPU, or remove the accelerators.
    """, "NC-06",
    example=Example(
        ONNX
        + IO
        + 'instance_group [ { kind: KIND_CPU } ]\noptimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }\n',
        files=("1/",),
        onnx=ORT_OK,
    ))

_DEFAULT_HOST_POLICY = re.compile(r"cpu|model|gpu_\d+")
_PROFILE = re.compile(r"[ \t\n\r\f\v]*[+-]?\d+")


def kind_name(kind: int) -> str:
    return model_config_pb2().ModelInstanceGroup.Kind.Name(kind)


def resolved_kind(group, gpus: GpuInfo | None) -> int | None:
    """The kind Triton gives the group after normalization (KIND_AUTO resolved);
    None when that depends on GPUs that are unknown."""
    kinds = model_config_pb2().ModelInstanceGroup
    if group.kind != kinds.KIND_AUTO:
        return group.kind
    if any(gid < 0 for gid in group.gpus):
        return kinds.KIND_CPU  # no server has a negative GPU id
    if gpus is None:
        return None
    if gpus.count == 0 or any(gid not in gpus.ids for gid in group.gpus):
        return kinds.KIND_CPU
    return kinds.KIND_GPU


def group_name(ctx, index: int) -> str:
    return ctx.config.instance_group[index].name or f"{ctx.name}_{index}"


def _gpu_hint(gpus: GpuInfo | None) -> str:
    if gpus is None:
        return "no server has a negative GPU id; ids count from 0"
    return (f"checked for a server with {gpus.count} GPU(s) ({gpus.source}); for a target server with "
            f"another count, validate with --gpus <count> (or {ASSUME_GPUS_ENV}=<count>)")


@model_rule
def check_ensemble_groups(ctx) -> None:
    if ctx.is_ensemble and ctx.config.instance_group:
        ctx.report(ENSEMBLE_GROUPS, f"ensemble '{ctx.name}' sets instance_group", ("instance_group",), part="key",
                   hint="remove instance_group; set instances on the composing models instead")


@model_rule
def check_instance_groups(ctx) -> None:
    if ctx.is_ensemble:
        return
    is_tensorrt = ctx.effective.backend == "tensorrt"
    seen_names: set[str] = set()
    for i, group in enumerate(ctx.config.instance_group):
        base = ("instance_group", i)
        name = group_name(ctx, i)
        if group.count <= 0 and ctx.written(base + ("count",)):
            ctx.report(NON_POSITIVE_COUNT, f"instance group '{name}' has count {group.count}; Triton uses the "
                       "default count instead", base + ("count",), hint="set count: 1 or more")
        if group.name:
            if group.name in seen_names:
                ctx.report(DUPLICATE_GROUP_NAME, f"instance group name '{group.name}' is used twice",
                           base + ("name",), hint="give each instance group its own name")
            seen_names.add(group.name)
        if group.host_policy and not _DEFAULT_HOST_POLICY.fullmatch(group.host_policy):
            ctx.report(UNKNOWN_HOST_POLICY, f"instance group '{name}' uses host_policy '{group.host_policy}', "
                       "which only exists if tritonserver defines it", base + ("host_policy",),
                       hint=f"start tritonserver with --host-policy={group.host_policy},<setting>=<value>, or use "
                       "cpu, model or gpu_<id>")
        _check_kind(ctx, group, name, base, is_tensorrt)
        _check_profiles(ctx, group, name, base)
        if is_tensorrt and len(group.secondary_devices) > 1:
            ctx.report(SECONDARY_DEVICES, f"instance group '{name}' has {len(group.secondary_devices)} secondary "
                       "devices; TensorRT accepts at most one", base + ("secondary_devices", 1),
                       hint="use one instance group per DLA core")
    if is_tensorrt and not ctx.config.instance_group:
        gpus = ctx.target_gpus()
        if gpus is not None and gpus.count == 0:
            where = ("backend",) if ctx.written(("backend",)) else ("platform",)
            ctx.report(TENSORRT_NEEDS_GPU, f"TensorRT model '{ctx.name}' has no instance_group and no GPU is "
                       "available, so Triton would create CPU instances", where, hint=_gpu_hint(gpus))


def _check_kind(ctx, group, name: str, base: tuple, is_tensorrt: bool) -> None:
    kinds = model_config_pb2().ModelInstanceGroup
    kind_path = base + ("kind",)
    if group.kind == kinds.KIND_MODEL and group.gpus:
        ctx.report(MODEL_KIND_WITH_GPUS, f"instance group '{name}' is KIND_MODEL but lists gpus",
                   base + ("gpus",), hint="remove gpus, or use kind: KIND_GPU")
        return
    if group.kind == kinds.KIND_CPU:
        if group.gpus:
            ctx.report(CPU_KIND_WITH_GPUS, f"instance group '{name}' is KIND_CPU but lists gpus",
                       base + ("gpus",), hint="remove gpus, or use kind: KIND_GPU")
        elif is_tensorrt:
            ctx.report(TENSORRT_NEEDS_GPU, f"instance group '{name}' is KIND_CPU, but TensorRT runs only on GPUs",
                       kind_path, hint="use kind: KIND_GPU")
        return
    if group.kind == kinds.KIND_MODEL:
        return
    # KIND_AUTO without gpus runs either way (TensorRT aside), so it does not need the GPU count.
    needs_gpus = group.kind == kinds.KIND_GPU or is_tensorrt or bool(group.gpus)
    gpus = ctx.target_gpus() if needs_gpus else ctx.options.gpus
    if group.kind == kinds.KIND_AUTO:
        if resolved_kind(group, gpus) == kinds.KIND_CPU:
            if group.gpus:
                bad = [g for g in group.gpus if g < 0] or [g for g in group.gpus if g not in gpus.ids]
                ctx.report(CPU_KIND_WITH_GPUS, f"instance group '{name}' is KIND_AUTO with gpus {list(group.gpus)}, "
                           f"but GPU {bad[0]} is not available, so Triton makes it KIND_CPU and then refuses its gpus",
                           base + ("gpus",), hint=_gpu_hint(gpus))
            elif is_tensorrt:
                ctx.report(TENSORRT_NEEDS_GPU, f"instance group '{name}' is KIND_AUTO and no GPU is available, so "
                           "Triton makes it KIND_CPU, but TensorRT runs only on GPUs", base, part="key",
                           hint=_gpu_hint(gpus))
        return
    if not group.gpus:
        if gpus is not None and gpus.count == 0:
            ctx.report(NO_GPU_AVAILABLE, f"instance group '{name}' has kind KIND_GPU but no GPUs are available",
                       kind_path, hint=_gpu_hint(gpus) + "; or use kind: KIND_CPU")
        return
    for j, gid in enumerate(group.gpus):
        if gid < 0:
            ctx.report(INVALID_GPU_ID, f"instance group '{name}' lists gpu id {gid}; GPU ids count from 0",
                       base + ("gpus", j), hint=_gpu_hint(None))
        elif gpus is not None and gid not in gpus.ids:
            available = (", ".join(map(str, gpus.ids)) if gpus.count <= 8 else f"0 to {gpus.count - 1}") or "none"
            ctx.report(INVALID_GPU_ID, f"instance group '{name}' lists gpu id {gid}, but the available GPU ids are: "
                       f"{available}", base + ("gpus", j), hint=_gpu_hint(gpus))


def _check_profiles(ctx, group, name: str, base: tuple) -> None:
    if not group.profile:
        return
    if ctx.effective.platform != "tensorrt_plan":
        ctx.report(BAD_PROFILE, f"instance group '{name}' sets profile, which only TensorRT models support",
                   base + ("profile",), hint="remove profile")
        return
    for j, profile in enumerate(group.profile):
        match = _PROFILE.match(profile)
        if match is None or int(match.group()) < 0 or not -(2**31) <= int(match.group()) < 2**31:
            ctx.report(BAD_PROFILE, f"instance group '{name}' has profile {profile!r}; profiles are non-negative "
                       "integers", base + ("profile", j), hint='write profile indices as strings: profile: ["0"]')


@model_rule
def check_passive_groups(ctx) -> None:
    groups = ctx.config.instance_group
    if groups and all(group.passive for group in groups):
        ctx.report(ALL_PASSIVE, f"every instance group of model '{ctx.name}' is passive, so it takes no requests",
                   ("instance_group", 0, "passive"), hint="drop passive: true from the group that should serve")


@model_rule
def check_rate_limiter_resources(ctx) -> None:
    scope: dict[str, bool] = {}
    for i, group in enumerate(ctx.config.instance_group):
        for j, resource in enumerate(group.rate_limiter.resources):
            is_global = getattr(resource, "global")
            if scope.setdefault(resource.name, is_global) != is_global:
                ctx.report(RATE_LIMITER_RESOURCE, f"rate-limiter resource '{resource.name}' is global in one place "
                           "and per-device in another", ("instance_group", i, "rate_limiter", "resources", j),
                           hint="use one name per kind of resource, or mark every use global: true")


@model_rule
def check_gpu_accelerators_on_cpu(ctx) -> None:
    accelerators = ctx.config.optimization.execution_accelerators.gpu_execution_accelerator
    groups = ctx.config.instance_group
    kinds = model_config_pb2().ModelInstanceGroup
    if not accelerators or not groups or any(g.kind != kinds.KIND_CPU for g in groups):
        return
    path = ("optimization", "execution_accelerators", "gpu_execution_accelerator")
    if ctx.effective.backend == "tensorflow":
        ctx.report(TF_GPU_ACCELERATOR_ON_CPU, "GPU execution accelerators are set but every instance group is "
                   "KIND_CPU", path, part="key", hint="use cpu_execution_accelerator, or KIND_GPU instances")
    elif ctx.effective.backend == "onnxruntime":
        ctx.report(ORT_GPU_ACCELERATOR_ON_CPU, "GPU execution accelerators are ignored: every instance group is "
                   "KIND_CPU", path, part="key", hint="use KIND_GPU instances, or remove gpu_execution_accelerator")
