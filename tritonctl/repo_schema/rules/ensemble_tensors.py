"""Typed checks along each ensemble tensor (ENS-13..19): batch sizes, the maps
against each composing model's inputs and outputs, data types, shapes and
decoupled branching. Composing models are seen as Triton runs them, after
auto-complete (an ONNX model whose config leaves out its inputs gets them from
model.onnx)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from tritonctl.repo_schema.diagnostics import Severity, code_info, register
from tritonctl.repo_schema.examples import ADD, DECOUPLED, H, IO, OUT, Example, Sibling, ensemble, ensemble_step
from tritonctl.repo_schema.rules.ensemble import STEP, Dataflow, cycle_from
from tritonctl.repo_schema.rules.layout import versions_to_load
from tritonctl.repo_schema.schema import data_type_name, model_config_pb2

BATCH_TOO_SMALL = register(
    "ENS13", "composing model allows a smaller batch than the ensemble", "error",
    """
    An ensemble passes whole batches to its steps, so a batching composing model must
    accept the ensemble's max_batch_size. Triton refuses: "ensemble <m> allows maximum
    batch size N, but it contains model <x> which only allows maximum batch size to
    be K". Non-batching composing models (max_batch_size 0) are allowed.
    """, "ENS-13",
    example=Example(
        ensemble(ensemble_step(), head=IO).replace("max_batch_size: 8", "max_batch_size: 32", 1),
        files=("1/",),
        siblings=(ADD,),
    ))
UNKNOWN_MODEL_INPUT = register(
    "ENS14", "input_map key is not an input of the composing model", "error",
    """
    input_map keys are the composing model's input names; values are ensemble tensors.
    Triton refuses a key the model does not have: "ensemble tensor <t> is mapping to
    non-existing input <k> in model <x>". Keys and values are easy to swap.
    """, "ENS-14",
    example=Example(ensemble(ensemble_step(i='key: "B" value: "INPUT0"')), files=("1/",), siblings=(ADD,)))
UNMAPPED_MODEL_INPUT = register(
    "ENS15", "composing model input not mapped", "error",
    """
    Every input of a composing model that is not marked optional must get an ensemble
    tensor in the step's input_map. Triton refuses: "input <k> in model <x> is not
    mapped to any ensemble tensors".
    """, "ENS-15",
    example=Example(
        ensemble(ensemble_step()),
        files=("1/",),
        siblings=(
            Sibling(
                "add",
                H + 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 '
                'dims: [ 4 ] } ]\noutput [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            ),
        ),
    ))
UNKNOWN_MODEL_OUTPUT = register(
    "ENS16", "output_map key is not an output of the composing model", "error",
    """
    output_map keys are the composing model's output names; values are ensemble
    tensors. Triton refuses a key the model does not have: "ensemble tensor <t> is
    mapped from non-existing output <k> in model <x>".
    """, "ENS-16",
    example=Example(ensemble(ensemble_step(o='key: "TOTAL" value: "OUTPUT0"')), files=("1/",), siblings=(ADD,)))
DTYPE_MISMATCH = register(
    "ENS17", "data type differs along an ensemble tensor", "error",
    """
    An ensemble tensor carries one data type from its producer to every consumer,
    including the ensemble's own inputs and outputs. Triton refuses: "ensemble tensor
    <t>: inconsistent data type: TYPE_A is inferred from model X while TYPE_B is
    inferred from model Y". Make the types agree, or add a step that casts.
    """, "ENS-17",
    example=Example(
        ensemble(ensemble_step(), head='input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]\n' + OUT),
        files=("1/",),
        siblings=(ADD,),
    ))
SHAPE_MISMATCH = register(
    "ENS18", "shape differs along an ensemble tensor", "error",
    """
    Shapes along an ensemble tensor must agree, -1 matching anything: either the dims
    match, or the full shapes match with the batch dimension (-1) put in front for
    batching models, so a non-batching [-1,16] fits a batching [16]. Ensemble inputs
    and outputs count with their reshape when they have one. Triton refuses: "ensemble
    tensor <t>: inconsistent shape: [..] is inferred from model X while [..] is
    inferred from model Y".
    """, "ENS-18",
    example=Example(
        ensemble(ensemble_step(), head='input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8 ] } ]\n' + OUT),
        files=("1/",),
        siblings=(ADD,),
    ))
DECOUPLED_BRANCHES = register(
    "ENS19", "step receives inputs from different decoupled models", "error",
    """
    A decoupled model may send any number of responses per request, so tensors from two
    different decoupled models (or from one and the ensemble input) cannot be paired, neither
    as the inputs of a step nor as the ensemble's outputs. Triton refuses: "step of model
    '<x>' receives inputs originated from different decoupled models" (x: the ensemble itself
    for its outputs).
    """, "ENS-19",
    example=Example(
        ensemble(
            ensemble_step(model="gen_a", i='key: "A" value: "INPUT0"', o='key: "OUT" value: "a"'),
            ensemble_step(model="gen_b", i='key: "A" value: "INPUT0"', o='key: "OUT" value: "b"'),
            ensemble_step(
                model="join",
                i='key: "X" value: "a" } input_map { key: "Y" value: "b"',
                o='key: "Z" value: "OUTPUT0"',
            ),
        ),
        files=("1/",),
        siblings=(
            Sibling(
                "gen_a",
                DECOUPLED
                + 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            ),
            Sibling(
                "gen_b",
                DECOUPLED
                + 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            ),
            Sibling(
                "join",
                H
                + 'input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "Z" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            ),
        ),
    ))


@dataclass
class TensorNode:
    origin: str  # for messages: "ensemble input 'x'", "model 'm' output 'y' (step 1)"
    model: str
    batching: bool
    data_type: int
    dims: tuple[int, ...]

    @property
    def full_dims(self) -> tuple[int, ...]:
        return ((-1,) + self.dims) if self.batching else self.dims


def _dims_match(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or x == -1 or y == -1 for x, y in zip(a, b))


def _fmt(dims: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def completed_config(ctx):
    """The composing model's config after auto-complete, or None when it cannot be known here."""
    config = model_config_pb2().ModelConfig()
    config.CopyFrom(ctx.effective)  # a Python model's auto_complete_config has run here, when it could
    if ctx.io_left_to_backend and not (_io_complete(config) and ctx.written(("max_batch_size",))):
        return None  # DALI's pipeline, or an auto_complete_config that was not run, fills the rest
    if config.platform == "ensemble" or (config.input and config.output):
        return config
    loaded = versions_to_load(ctx)
    if not loaded:
        return None
    version_dir = loaded[max(loaded)]
    if config.backend == "onnxruntime":
        from tritonctl.repo_schema.autocomplete import autocomplete_onnxruntime

        problems: list[str] = []
        autocomplete_onnxruntime(config, version_dir, lambda code, message, hint=None: problems.append(code))
        failed = any(code_info(code).severity is Severity.ERROR for code in problems)
        return None if failed or not (config.input and config.output) else config
    if config.backend == "python":
        return None if ctx.io_left_to_backend else config
    return None


def _io_complete(config) -> bool:
    entries = [*config.input, *config.output]
    return bool(config.input and config.output) and all(e.data_type and e.dims for e in entries)


def _node(origin: str, model: str, batching: bool, io, use_reshape: bool) -> TensorNode:
    dims = io.reshape.shape if use_reshape and io.HasField("reshape") else io.dims
    return TensorNode(origin, model, batching, io.data_type, tuple(dims))


def _compare(ctx, tensor: str, first: TensorNode, other: TensorNode, path: tuple) -> None:
    if first.data_type != other.data_type:
        ctx.report(DTYPE_MISMATCH,
                   f"ensemble tensor '{tensor}': {first.origin} has {data_type_name(first.data_type)} but "
                   f"{other.origin} has {data_type_name(other.data_type)}", path,
                   hint="make the data types agree in the configs, or add a step that casts")
    elif not _dims_match(first.dims, other.dims) and not _dims_match(first.full_dims, other.full_dims):
        def describe(node: TensorNode) -> str:
            kind = "batching" if node.batching else "non-batching"
            return f"{node.origin} has full shape {_fmt(node.full_dims)} ({kind})"
        ctx.report(SHAPE_MISMATCH, f"ensemble tensor '{tensor}': {describe(first)} but {describe(other)}", path,
                   hint="make the shapes agree; a batching model's dims leave out the batch dimension, "
                        "a non-batching model lists it")


def _usable_step_configs(ctx, config) -> dict[int, object]:
    models = ctx.repository.models if ctx.repository else {}
    result = {}
    for index, step in enumerate(config.ensemble_scheduling.step):
        other = models.get(step.model_name)
        if other is None or other is ctx or other.config is None:
            continue
        if any(d.severity is Severity.ERROR for d in other.diagnostics):
            continue
        if other.is_ensemble and cycle_from(ctx, step.model_name) is not None:
            continue
        completed = completed_config(other)
        if completed is not None:
            result[index] = completed
    return result


def _check_maps(ctx, index: int, step, model) -> bool:
    inputs = {i.name: i for i in model.input}
    ok = _known_keys(ctx, index, step, "input_map", inputs, UNKNOWN_MODEL_INPUT, "input")
    for name, entry in inputs.items():
        if name not in step.input_map and not entry.optional:
            ok = False
            ctx.report(UNMAPPED_MODEL_INPUT, f"step {index}: input '{name}' of model '{step.model_name}' "
                       "is not mapped to any ensemble tensor", STEP + (index, "model_name"),
                       hint=f"add input_map {{ key: \"{name}\" value: \"<ensemble tensor>\" }}")
    outputs = {o.name for o in model.output}
    return _known_keys(ctx, index, step, "output_map", outputs, UNKNOWN_MODEL_OUTPUT, "output") and ok


def _known_keys(ctx, index: int, step, map_name: str, names, code: str, kind: str) -> bool:
    """Every key of the step's input_map/output_map must name an input/output of its model."""
    ok = True
    for key in getattr(step, map_name):
        if key in names:
            continue
        ok = False
        close = difflib.get_close_matches(key, sorted(names), n=1)
        ctx.report(code, f"step {index}: model '{step.model_name}' has no {kind} '{key}'"
                   f" (its {kind}s: {', '.join(sorted(names)) or 'none'})",
                   STEP + (index, map_name, key, "key"),
                   hint=f"did you mean '{close[0]}'?" if close else
                   f"{map_name} keys are the model's {kind} names, values are ensemble tensors")
    return ok


def _check_decoupled(ctx, config, flow: Dataflow, step_configs: dict) -> None:
    steps = config.ensemble_scheduling.step
    labels = {name: 0 for name in flow.inputs}
    next_label = 0
    for index in flow.fired:
        step = steps[index]
        sources = {labels.get(t, 0) for t in step.input_map.values()}
        if len(sources) > 1:
            ctx.report(DECOUPLED_BRANCHES, f"step {index} ('{step.model_name}') receives inputs that originate "
                       "from different decoupled models", STEP + (index, "model_name"),
                       hint="feed the step from one decoupled branch only")
            return
        label = next(iter(sources), 0)
        model = step_configs.get(index)
        if model is not None and model.model_transaction_policy.decoupled:
            next_label += 1
            label = next_label
        for tensor in step.output_map.values():
            labels[tensor] = label
    outputs = [entry.name for entry in config.output]
    if outputs and all(name in labels for name in outputs):  # Triton's last check: the ensemble's own outputs
        first = labels[outputs[0]]
        for index, name in enumerate(outputs):
            if labels[name] != first:
                ctx.report(DECOUPLED_BRANCHES, f"ensemble outputs '{outputs[0]}' and '{name}' originate from "
                           "different decoupled models", ("output", index, "name"),
                           hint="take every ensemble output from one decoupled branch")
                return


def check_tensors(ctx, config, flow: Dataflow) -> None:
    step_configs = _usable_step_configs(ctx, config)
    steps = config.ensemble_scheduling.step
    batching = config.max_batch_size > 0
    nodes: dict[str, TensorNode] = {}
    for i, entry in enumerate(config.input):
        nodes.setdefault(entry.name, _node(f"ensemble input '{entry.name}'", ctx.name, batching, entry, True))
    for i, entry in enumerate(config.output):
        node = _node(f"ensemble output '{entry.name}'", ctx.name, batching, entry, True)
        if entry.name in nodes:
            _compare(ctx, entry.name, nodes[entry.name], node, ("output", i, "name"))
        nodes.setdefault(entry.name, node)
    mismatched: set[str] = set()
    for index, step in enumerate(steps):
        model = step_configs.get(index)
        if model is None:
            continue
        if model.max_batch_size != 0 and model.max_batch_size < config.max_batch_size:
            ctx.report(BATCH_TOO_SMALL, f"ensemble max_batch_size is {config.max_batch_size}, but step {index} "
                       f"model '{step.model_name}' allows at most {model.max_batch_size}",
                       STEP + (index, "model_name"),
                       hint=f"lower the ensemble's max_batch_size to {model.max_batch_size}, or raise "
                            f"'{step.model_name}''s")
        if not _check_maps(ctx, index, step, model):
            continue
        step_batching = model.max_batch_size > 0
        for side, entries, mapping in (("input", model.input, step.input_map),
                                       ("output", model.output, step.output_map)):
            for entry in entries:
                if entry.name not in mapping:
                    continue
                tensor = mapping[entry.name]
                node = _node(f"model '{step.model_name}' {side} '{entry.name}' (step {index})",
                             step.model_name, step_batching, entry, False)
                first = nodes.setdefault(tensor, node)
                if first is not node and tensor not in mismatched:
                    before = len(ctx.diagnostics)
                    _compare(ctx, tensor, first, node, STEP + (index, f"{side}_map", entry.name, "value"))
                    if len(ctx.diagnostics) > before:
                        mismatched.add(tensor)
    _check_decoupled(ctx, config, flow, step_configs)
