"""Ensembles: structure, dataflow graph and composing models (ENS-01..12).

Typed checks along each ensemble tensor (ENS-13..19) are in ensemble_tensors.py.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from tritonctl.repo_schema.context import ENSEMBLE_MEMBERS
from tritonctl.repo_schema.diagnostics import Severity, register
from tritonctl.repo_schema.examples import ADD, ENS, IN, IO, OUT, Example, Sibling, ensemble, ensemble_step
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.rules.layout import versions_to_load

STEP = ("ensemble_scheduling", "step")

OPTIMIZATION_SET = register(
    "ENS01", "optimization set on an ensemble", "error",
    """
    An ensemble runs no model code of its own, so it has nothing to optimize; Triton
    refuses it: "optimization should not be specified for ensemble '<m>'". Set
    optimization on the composing models instead and remove it here.
    """, "ENS-01",
    example=Example(
        'platform: "ensemble"\nmax_batch_size: 8\n'
        + IO
        + 'optimization { input_pinned_memory { enable: false } }\nensemble_scheduling { step [ { model_name: "missing" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" } } ] }\n',
        files=("1/",),
    ))
WARMUP_SET = register(
    "ENS02", "model_warmup set on an ensemble", "error",
    """
    Triton refuses warmup on ensembles: "model_warmup can not be specified for
    ensemble '<m>'". Warm up the composing models in their own configs instead.
    """, "ENS-02",
    example=Example(
        ensemble(
            ensemble_step(),
            top='model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n',
        ),
        files=("1/",),
        siblings=(ADD,),
    ))
NO_STEP = register(
    "ENS03", "ensemble without steps", "error",
    """
    An ensemble is a pipeline of steps; with none Triton refuses it: "must specify
    'step' for ensemble '<m>'". Add ensemble_scheduling { step [ ... ] }.
    """, "ENS-03",
    example=Example(
        'platform: "ensemble"\nmax_batch_size: 8\n' + IO + "ensemble_scheduling { }\n", files=("1/",)
    ))
INCOMPLETE_STEP = register(
    "ENS04", "ensemble step without model_name, input_map or output_map", "error",
    """
    Each step names the model it runs and maps ensemble tensors to the model's inputs
    (input_map) and the model's outputs to ensemble tensors (output_map). Triton
    refuses a step missing any of them: "must specify 'model_name'|'input_map'|
    'output_map' in step <i> of ensemble '<m>'".
    """, "ENS-04",
    example=Example(
        ENS
        + IO
        + 'ensemble_scheduling {\n  step [ { model_name: "add" model_version: -1 input_map { key: "A" value: "INPUT0" } } ]\n}\n',
        files=("1/",),
        siblings=(ADD,),
    ))
WRITTEN_TWICE = register(
    "ENS05", "ensemble tensor written by two output_map entries", "error",
    """
    Each ensemble tensor must have exactly one producer. Triton refuses a tensor that
    is the value of more than one output_map entry: "ensemble tensor '<t>' can appear
    in an output map only once for ensemble '<m>' step <i>". Give each output its own
    ensemble tensor name.
    """, "ENS-05",
    example=Example(ensemble(ensemble_step(), ensemble_step()), files=("1/",), siblings=(ADD,)))
INPUT_UNUSED = register(
    "ENS07", "ensemble input not used by any step", "error",
    """
    Every ensemble input must feed at least one step. Triton refuses the ensemble:
    "ensemble input '<i>' for ensemble <m>' is not used". Map it in some step's
    input_map, or remove it from the ensemble's inputs.
    """, "ENS-07",
    example=Example(
        ensemble(
            ensemble_step(),
            head='input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "EXTRA" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            + OUT,
        ),
        files=("1/",),
        siblings=(ADD,),
    ))
OUTPUT_NOT_WRITTEN = register(
    "ENS08", "ensemble output is never produced", "error",
    """
    Every ensemble output must be the value of some step's output_map, and that step
    must be reachable from the ensemble inputs: all its inputs must be ensemble
    inputs or outputs of other reachable steps. Triton says only "output '<o>' for
    ensemble '<m>' is not written" (sometimes naming one unconnected tensor);
    tritonctl names the step and the input that nothing feeds, which is usually a
    misspelled tensor name.
    """, "ENS-08",
    example=Example(
        ensemble(
            ensemble_step(o='key: "SUM" value: "tmp"'),
            ensemble_step(i='key: "A" value: "tmp"', o='key: "SUM" value: "OUTPUT1"'),
            head=IN
            + 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        ),
        files=("1/",),
        siblings=(ADD,),
    ))
TENSOR_UNUSED = register(
    "ENS09", "ensemble tensor is unused or never written", "error",
    """
    Every intermediate ensemble tensor must be written by a reachable step and read
    by at least one step. Triton refuses the ensemble: "ensemble tensor '<t>' is
    unused in ensemble '<m>'". Map only the step outputs you consume (a model's extra
    outputs need no output_map entry), or make the tensor an ensemble output.
    """, "ENS-09",
    example=Example(ensemble(ensemble_step(), ensemble_step(o='key: "SUM" value: "unused"')), files=("1/",), siblings=(ADD,)))
MODEL_MISSING = register(
    "ENS10", "ensemble step names a model that is not in the repository", "error",
    """
    Each step's model_name must be a model of the repository. Triton refuses the
    ensemble: "ensemble <m> contains models that are not available or ambiguous:
    <list>". Check the spelling against the model directory names.
    """, "ENS-10",
    example=Example(
        'platform: "ensemble"\nmax_batch_size: 8\n'
        + IO
        + 'ensemble_scheduling { step [ { model_name: "resnet" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" } } ] }\n',
        files=("1/",),
    ))
CIRCULAR = register(
    "ENS11", "circular dependency between ensembles", "error",
    """
    An ensemble cannot use itself, directly or through other ensembles. Triton
    refuses it: "circular dependency between ensembles: A -> ... -> A".
    """, "ENS-11",
    example=Example(
        ensemble(ensemble_step(model="my_model", i='key: "INPUT0" value: "INPUT0"', o='key: "OUTPUT0" value: "OUTPUT0"')),
        files=("1/",),
    ))
DEPENDENCY_UNAVAILABLE = register(
    "ENS12", "composing model or its required version will not load", "error",
    """
    An ensemble loads only when every composing model loads, in the version the step
    asks for. A step without model_version asks for version 0, not the latest: Triton
    fails with "ensemble '<m>' depends on '<x>' whose required version 0 is not
    loaded" unless a version directory 0 exists. Use model_version: -1 for the latest
    loaded version. A composing model that fails to load fails the ensemble too
    ("depends on '<x>' which is not valid").
    """, "ENS-12",
    example=Example(
        ensemble(ensemble_step()),
        files=("1/",),
        siblings=(Sibling("add", ADD.config.replace("max_batch_size: 8", "max_batch_size: -1")),),
    ))
NAMESPACE_SET = register(
    "ENS50", "step.model_namespace is set", "warning",
    """
    model_namespace is reserved: Triton overwrites it with the namespace it resolves
    for the composing model, so a value written here has no effect. Remove it.
    """, "NC-11",
    example=Example(ensemble(ensemble_step(extra=' model_namespace: "ns"')), files=("1/",), siblings=(ADD,)))


@dataclass
class Dataflow:
    """Who writes and who reads each ensemble tensor, and what the ensemble inputs reach."""

    inputs: list[str]
    producers: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # tensor -> (step, model output)
    consumers: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # tensor -> (step, model input)
    ready: set[str] = field(default_factory=set)
    fired: list[int] = field(default_factory=list)  # steps in the order they can run


def build_dataflow(config) -> Dataflow:
    flow = Dataflow([i.name for i in config.input])
    steps = config.ensemble_scheduling.step
    for index, step in enumerate(steps):
        for key, tensor in step.input_map.items():
            flow.consumers.setdefault(tensor, []).append((index, key))
        for key, tensor in step.output_map.items():
            flow.producers.setdefault(tensor, []).append((index, key))
    flow.ready = set(flow.inputs)
    pending = list(range(len(steps)))
    progress = True
    while progress:
        progress = False
        for index in list(pending):
            if all(t in flow.ready for t in steps[index].input_map.values()):
                flow.ready.update(steps[index].output_map.values())
                flow.fired.append(index)
                pending.remove(index)
                progress = True
    return flow


def _did_you_mean(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _unfed_root(config, flow: Dataflow, tensor: str) -> tuple[int, str, str] | None:
    """The first (step, model input, tensor) upstream of ``tensor`` that nothing writes."""
    steps = config.ensemble_scheduling.step
    seen: set[str] = set()
    todo = [tensor]
    while todo:
        current = todo.pop(0)
        for step_index, _ in flow.producers.get(current, []):
            for key, source in sorted(steps[step_index].input_map.items()):
                if source in flow.ready or source in seen:
                    continue
                seen.add(source)
                if source not in flow.producers:
                    return step_index, key, source
                todo.append(source)
    return None


def check_dataflow(ctx, config, flow: Dataflow) -> None:
    steps = config.ensemble_scheduling.step
    outputs = {o.name for o in config.output}
    for tensor, writers in flow.producers.items():
        for step_index, key in writers[1:]:
            first = writers[0][0]
            ctx.report(WRITTEN_TWICE, f"ensemble tensor '{tensor}' is written by step {first} and again by "
                       f"step {step_index} ('{steps[step_index].model_name}' output '{key}')",
                       STEP + (step_index, "output_map", key, "value"),
                       hint="give each step output its own ensemble tensor name")
    for index, tensor in enumerate(flow.inputs):
        if tensor not in flow.consumers and tensor not in flow.producers:
            ctx.report(INPUT_UNUSED, f"ensemble input '{tensor}' is not read by any step",
                       ("input", index, "name"), hint=f"map '{tensor}' in a step's input_map, or remove the input")
    explained: set[str] = set()
    known = set(flow.inputs) | set(flow.producers)
    for index, out in enumerate(config.output):
        if out.name not in flow.producers:
            explained.add(out.name)
            ctx.report(OUTPUT_NOT_WRITTEN, f"ensemble output '{out.name}' is not produced by any step"
                       f"{_did_you_mean(out.name, flow.producers)}", ("output", index, "name"),
                       hint=f"map a step's output to '{out.name}' in its output_map")
            continue
        if out.name in flow.ready:
            continue
        root = _unfed_root(config, flow, out.name)
        if root is None:
            ctx.report(OUTPUT_NOT_WRITTEN, f"ensemble output '{out.name}' is never written: the steps "
                       "leading to it depend on each other in a cycle", ("output", index, "name"),
                       hint="break the cycle so every step's inputs come from earlier steps or ensemble inputs")
            continue
        step_index, key, tensor = root
        explained.add(tensor)
        ctx.report(OUTPUT_NOT_WRITTEN,
                   f"ensemble output '{out.name}' cannot be produced: step {step_index} "
                   f"('{steps[step_index].model_name}') needs input '{key}' from ensemble tensor '{tensor}', "
                   "and nothing feeds it (it is neither an ensemble input nor another step's output)",
                   ("output", index, "name"),
                   hint=f"feed '{tensor}' from an ensemble input or a step output{_did_you_mean(tensor, known)}",
                   notes=[f"ensemble tensor '{tensor}' is read at "
                          f"{ctx.sourcemap.locate(STEP + (step_index, 'input_map', key, 'value'))}"])
    for tensor, readers in flow.consumers.items():
        if tensor in flow.producers or tensor in flow.inputs or tensor in explained:
            continue
        step_index, key = readers[0]
        ctx.report(TENSOR_UNUSED, f"ensemble tensor '{tensor}' read by step {step_index} "
                   f"('{steps[step_index].model_name}') input '{key}' is never written"
                   f"{_did_you_mean(tensor, known)}",
                   STEP + (step_index, "input_map", key, "value"),
                   hint="use an ensemble input or another step's output here")
    for tensor, writers in flow.producers.items():
        if tensor in outputs or tensor in flow.consumers:
            continue
        if difflib.get_close_matches(tensor, sorted(explained), n=1, cutoff=0.6):
            continue  # the misspelled reader was reported with a did-you-mean
        step_index, key = writers[0]
        ctx.report(TENSOR_UNUSED, f"ensemble tensor '{tensor}' written by step {step_index} "
                   f"('{steps[step_index].model_name}') output '{key}' is never read",
                   STEP + (step_index, "output_map", key, "value"),
                   hint=f"remove this output_map entry (unmapped model outputs are fine), or list "
                        f"'{tensor}' as an ensemble output")


def cycle_from(ctx, start: str) -> list[str] | None:
    """A chain of ensemble names from ``start`` back to ctx's model, if one exists."""
    models = ctx.repository.models if ctx.repository else {}
    stack = [(start, [ctx.name, start])]
    seen: set[str] = set()
    while stack:
        name, chain = stack.pop()
        if name == ctx.name:
            return chain
        other = models.get(name)
        if name in seen or other is None or other.config is None or not other.is_ensemble:
            continue
        seen.add(name)
        for step in other.config.ensemble_scheduling.step:
            stack.append((step.model_name, chain + [step.model_name]))
    return None


def check_composing_models(ctx, config) -> None:
    from tritonctl.repo_schema.validate import check_model

    models = ctx.repository.models if ctx.repository else {}
    for index, step in enumerate(config.ensemble_scheduling.step):
        name = step.model_name
        where = STEP + (index, "model_name")
        other = models.get(name)
        if other is None:
            ctx.report(MODEL_MISSING, f"step {index} uses model '{name}', which is not in the repository"
                       f"{_did_you_mean(name, [n for n in models if n != ctx.name])}", where,
                       hint="use the name of a model directory in this repository")
            continue
        cycle = cycle_from(ctx, name)
        if cycle is not None:
            ctx.report(CIRCULAR, f"circular dependency between ensembles: {' -> '.join(cycle)}", where,
                       hint="an ensemble cannot contain itself, directly or through another ensemble")
            continue
        check_model(other)
        errors = [d for d in other.diagnostics if d.severity is Severity.ERROR]
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            ctx.report(DEPENDENCY_UNAVAILABLE, f"step {index} uses model '{name}', which will not load: "
                       f"{errors[0].message}{more}", where,
                       hint=f"fix model '{name}' first ({errors[0].location})")
            continue
        if other.config is None:
            continue
        loaded = versions_to_load(other)
        wanted = step.model_version
        if (wanted == -1 and loaded) or wanted in loaded:
            continue
        if any(v.version == wanted for v in other.versions):
            continue  # the directory exists but the version policy skips it: VP04
        have = ", ".join(str(v) for v in loaded) or "none"
        if not ctx.written(STEP + (index, "model_version")):
            ctx.report(DEPENDENCY_UNAVAILABLE,
                       f"step {index} ('{name}') has no model_version, so it asks for version 0, which model "
                       f"'{name}' does not load (loaded versions: {have})", where,
                       hint="add model_version: -1 to use the latest loaded version")
        elif not loaded:
            ctx.report(DEPENDENCY_UNAVAILABLE, f"step {index} uses model '{name}', which has no loadable version",
                       STEP + (index, "model_version"),
                       hint=f"add a numeric version directory such as {name}/1/")
        else:
            ctx.report(DEPENDENCY_UNAVAILABLE,
                       f"step {index} asks for version {wanted} of model '{name}', which is not loaded "
                       f"(loaded versions: {have})", STEP + (index, "model_version"),
                       hint="use model_version: -1 for the latest version, or one of the loaded versions")


@model_rule
def check_ensemble(ctx) -> None:
    if not ctx.is_ensemble:
        return
    config = ctx.config
    if config.HasField("optimization"):
        ctx.report(OPTIMIZATION_SET, f"ensemble '{ctx.name}' sets optimization", ("optimization",), part="key",
                   hint="remove optimization here; set it on the composing models")
    if config.model_warmup:
        ctx.report(WARMUP_SET, f"ensemble '{ctx.name}' sets model_warmup", ("model_warmup",), part="key",
                   hint="remove model_warmup here; warm up the composing models instead")
    steps = config.ensemble_scheduling.step
    if not steps:
        if not config.HasField("ensemble_scheduling"):
            return  # PB05: the ensemble has no ensemble_scheduling at all
        ctx.report(NO_STEP, f"ensemble '{ctx.name}' has no steps", ("ensemble_scheduling",), part="key",
                   hint="add ensemble_scheduling { step [ { model_name: ... input_map ... output_map ... } ] }")
        return
    complete = True
    for index, step in enumerate(steps):
        for name in ("model_name", "input_map", "output_map"):
            if not getattr(step, name):
                complete = False
                ctx.report(INCOMPLETE_STEP, f"step {index} of ensemble '{ctx.name}' has no '{name}'",
                           STEP + (index,), part="key", hint=f"add {name} to the step")
        if step.model_namespace:
            ctx.report(NAMESPACE_SET, f"step {index} sets model_namespace, which Triton overwrites",
                       STEP + (index, "model_namespace"), hint="remove model_namespace")
    if not complete:
        return
    flow = build_dataflow(config)
    check_dataflow(ctx, config, flow)
    if ctx.can_check(ENSEMBLE_MEMBERS):
        check_composing_models(ctx, config)
    else:
        for index, step in enumerate(config.ensemble_scheduling.step):
            if step.model_name == ctx.name:  # a cycle that needs no other model to see
                ctx.report(CIRCULAR, f"circular dependency between ensembles: {ctx.name} -> {ctx.name}",
                           STEP + (index, "model_name"), hint="an ensemble cannot contain itself")
    from tritonctl.repo_schema.rules.ensemble_tensors import check_tensors

    check_tensors(ctx, config, flow)
