"""ONNX preparation: a dynamic batch dimension for models exported with a fixed batch of 1
(constant Reshape targets included), constant folding, checker and shape inference.

Each step takes an ``onnx.ModelProto`` and returns a new one; only ``save_checked`` writes.
Models keep their IR version. Before IR version 4 every initializer must also be listed as a
graph input, and runtimes (onnxruntime, hence Triton) hold such initializers constant; from IR
version 4 on, an initializer listed as a graph input is a default the caller may override.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tritonctl.convert.errors import BuildError

NON_DETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                               "Multinomial", "Bernoulli"})
# A folded tensor may be at most this large unless it is no larger than its inputs.
FOLD_LIMIT_BYTES = 16 << 20
# IR version 3 brought operator-set imports; onnxruntime loads nothing older.
OLDEST_IR_VERSION = 3
# From this IR version on, initializers need not be graph inputs (and those that are, are overridable).
INITIALIZERS_APART_IR_VERSION = 4
# onnxruntime, and so Triton's onnxruntime backend, has kernels for ai.onnx opset 7 and newer;
# older models are converted to UPGRADE_OPSET by onnx's version converter.
OLDEST_RUNNABLE_OPSET = 7
UPGRADE_OPSET = 13


@dataclass
class Prepared:
    model: object  # onnx.ModelProto
    changes: list[str] = field(default_factory=list)  # what the batch rewrite changed
    folded: int = 0  # nodes replaced by constants


def check_ir_version(model) -> None:
    """Refuse models from before operator sets were versioned: nothing serves them."""
    if model.ir_version < OLDEST_IR_VERSION:
        raise BuildError(f"the ONNX model has IR version {model.ir_version}, from before ONNX versioned its "
                         f"operators (IR version {OLDEST_IR_VERSION}, onnx 1.0); onnxruntime and Triton cannot "
                         "load it. Re-export it from its framework with a current exporter")


def default_opset(model) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def upgrade_old_opset(model):
    """``model`` converted to opset UPGRADE_OPSET when its ai.onnx opset is older than
    onnxruntime runs; None when it needs no upgrade."""
    version = default_opset(model)
    if version is None or version >= OLDEST_RUNNABLE_OPSET:
        return None
    from onnx import version_converter

    try:
        upgraded = version_converter.convert_version(model, UPGRADE_OPSET)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BuildError(f"the ONNX model uses opset {version}, older than the opset {OLDEST_RUNNABLE_OPSET} "
                         "onnxruntime (and Triton's onnxruntime backend) runs, and onnx's version converter "
                         f"cannot upgrade it: {reason}. Re-export it with opset {UPGRADE_OPSET} or newer") from None
    if upgraded.ir_version < INITIALIZERS_APART_IR_VERSION:  # inputs the converter made initializers (Pad's pads)
        from onnx import helper

        listed = {v.name for v in upgraded.graph.input}
        upgraded.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                    for t in upgraded.graph.initializer if t.name not in listed)
    return upgraded


def check(model) -> None:
    """onnx's checker; raises BuildError with its first line."""
    import onnx

    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise BuildError(f"the ONNX model fails onnx.checker: {str(exc).strip().splitlines()[0]}") from None


def save_checked(model, path) -> object:
    """Save ``model`` to ``path``, run the checker and shape inference on the file (onnx's
    C++ reads it directly: no Python-side serialization of large weights), and return the
    inferred model as written."""
    import onnx

    onnx.save(model, str(path))
    try:
        onnx.checker.check_model(str(path))
    except Exception as exc:
        raise BuildError(f"the ONNX model fails onnx.checker: {str(exc).strip().splitlines()[0]}") from None
    try:
        onnx.shape_inference.infer_shapes_path(str(path), str(path), check_type=True, data_prop=True)
    except Exception as exc:
        raise BuildError(f"ONNX shape inference failed: {str(exc).strip().splitlines()[0]}") from None
    return onnx.load(str(path))


def overridable_initializers(model) -> set[str]:
    """Initializers a caller may feed in place of their stored values: those also listed as
    graph inputs, from IR version 4 on (before it every initializer is listed, and constant)."""
    if model.ir_version < INITIALIZERS_APART_IR_VERSION:
        return set()
    initializers = {t.name for t in model.graph.initializer}
    return {v.name for v in model.graph.input if v.name in initializers}


def add_initializer(model, tensor) -> None:
    """Append ``tensor`` (a TensorProto) to the main graph's initializers, and to its inputs
    where the model's IR version requires every initializer to be one."""
    from onnx import helper

    model.graph.initializer.append(tensor)
    if model.ir_version < INITIALIZERS_APART_IR_VERSION:
        model.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))


def _graph_io(model):
    initializers = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers]
    return inputs, list(model.graph.output)


def _first_dim(value_info):
    shape = value_info.type.tensor_type.shape
    return shape.dim[0] if value_info.type.HasField("tensor_type") and shape.dim else None


def has_fixed_batch_of_one(model) -> bool:
    """Every input and output has a first dimension fixed to 1."""
    inputs, outputs = _graph_io(model)
    dims = [_first_dim(v) for v in inputs + outputs]
    return bool(dims) and all(d is not None and d.HasField("dim_value") and d.dim_value == 1 for d in dims)


def _constant_arrays(graph) -> dict:
    from onnx import numpy_helper

    found = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            value = next((a for a in node.attribute if a.name == "value"), None)
            if value is not None:
                found[node.output[0]] = numpy_helper.to_array(value.t)
    return found


def make_batch_dynamic(model, label: str = "batch") -> Prepared:
    """A copy of ``model`` whose first input/output dimension is ``label`` and whose constant
    Reshape targets no longer pin the batch to 1. The result must be verified
    (``verify_rows``): a model can hard-code its batch in ways no rewrite sees."""
    import onnx
    from onnx import numpy_helper

    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    changes = []
    inputs, outputs = _graph_io(result)
    for role, values in (("input", inputs), ("output", outputs)):
        for value in values:
            value.type.tensor_type.shape.dim[0].dim_param = label
            changes.append(f"{role} '{value.name}': first dimension 1 -> '{label}'")
    del graph.value_info[:]
    constants = _constant_arrays(graph)
    for index, node in enumerate(graph.node):
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in constants:
            continue
        target = constants[node.input[1]].copy()
        if target.ndim != 1 or not len(target) or target[0] != 1:
            continue
        allowzero = next((a.i for a in node.attribute if a.name == "allowzero"), 0)
        if -1 not in target:
            target[0] = -1
        elif not allowzero:
            target[0] = 0  # 0 copies the input's first dimension
        else:
            changes.append(f"Reshape '{node.name or index}': target {constants[node.input[1]].tolist()} "
                           "hard-codes batch 1 and cannot be rewritten (allowzero=1 and a -1 already present)")
            continue
        new_name = f"{node.input[1]}__dynamic_batch_{index}"
        add_initializer(result, numpy_helper.from_array(target, new_name))
        changes.append(f"Reshape '{node.name or index}': target {constants[node.input[1]].tolist()} -> "
                       f"{target.tolist()}")
        node.input[1] = new_name
    _drop_unused(graph)
    return Prepared(result, changes)


def fold_constants(model) -> Prepared:
    """Replace every node whose inputs are all constants by its computed outputs
    (onnx's reference evaluator runs it), then drop what nothing uses any more."""
    import onnx
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    overridable = overridable_initializers(result)
    constants = {name: array for name, array in _constant_arrays(graph).items() if name not in overridable}
    opsets = {o.domain or "": o.version for o in result.opset_import}
    kept, folded = [], 0
    for node in graph.node:
        names = [n for n in node.input if n]
        foldable = (node.domain in ("", "ai.onnx") and node.op_type not in NON_DETERMINISTIC
                    and not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                                for a in node.attribute)
                    and all(n in constants for n in names))
        if node.op_type == "Constant" or not foldable:
            kept.append(node)
            continue
        try:
            values = ReferenceEvaluator(node, opsets=opsets).run(None, {n: constants[n] for n in names})
        except Exception:
            kept.append(node)  # an op the reference evaluator lacks: leave it to the runtime
            continue
        if not all(hasattr(v, "nbytes") for v in values):
            kept.append(node)  # a sequence or optional value: no initializer can hold it
            continue
        size_in = sum(constants[n].nbytes for n in names)
        if any(getattr(v, "nbytes", 0) > max(FOLD_LIMIT_BYTES, size_in) for v in values):
            kept.append(node)
            continue
        for name, value in zip(node.output, values):
            if name:
                constants[name] = value
                add_initializer(result, numpy_helper.from_array(value, name))
        folded += 1
    del graph.node[:]
    graph.node.extend(kept)
    _drop_unused(graph)
    return Prepared(result, folded=folded)


def _drop_unused(graph) -> None:
    """Remove nodes and initializers no output depends on."""
    needed = {o.name for o in graph.output}
    live = []
    for node in reversed(graph.node):
        if any(o in needed for o in node.output):
            live.append(node)
            needed.update(n for n in node.input if n)
            for attribute in node.attribute:  # names a subgraph reads from the outer scope
                for sub in [attribute.g] + list(attribute.graphs):
                    needed.update(n for inner in sub.node for n in inner.input)
    live.reverse()
    del graph.node[:]
    graph.node.extend(live)
    dropped = {t.name for t in graph.initializer if t.name not in needed}
    kept = [t for t in graph.initializer if t.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    inputs = [v for v in graph.input if v.name not in dropped]  # the model's own inputs all stay
    del graph.input[:]
    graph.input.extend(inputs)
