"""Sequence batching: control inputs and strategies (SB-*). Implicit state (ST-*)
lives in implicit_state.py.

Triton validates these in ``ValidateModelConfig`` on the normalized config
(``ctx.effective``), except the oldest strategy's preferred sizes, which - like
DB-01 - are compared with max_batch_size before backend auto-complete fills it in
(``ctx.config``).
"""

from __future__ import annotations

from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, SEQ, Example
from tritonctl.repo_schema.rules import model_rule
from tritonctl.repo_schema.rules.io import dtype_name
from tritonctl.repo_schema.schema import model_config_pb2

CORRID = 3  # ModelSequenceBatching.Control.Kind.CONTROL_SEQUENCE_CORRID
CORRID_TYPES = {"TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING"}
VALUE_LISTS = ("int32_false_true", "fp32_false_true", "bool_false_true")

CACHE_WITH_SEQUENCE = register("SB01", "response cache on a sequence model", "error", """
    The response cache returns stored responses for repeated requests, which would skip
    the model's per-sequence state. Triton refuses it: "Response Cache does not
    currently support model <m> with sequence batching scheduler. Please disable the
    response cache."
    """, "SB-01",
    example=Example(H + IO + "sequence_batching { }\nresponse_cache { enable: true }\n"))
CONTROL_NO_NAME = register("SB02", "sequence control input without a name", "error", """
    Each control_input names the model input that receives the control signal.
    Triton: "sequence batching control tensor must have a name".
    """, "SB-02",
    example=Example(
        H
        + IO
        + "sequence_batching {\n  control_input [ { control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]\n}\n"
    ))
CONTROL_NAME_REPEATED = register("SB03", "sequence control input name used twice", "error", """
    One tensor can carry only one control_input entry; list all its controls inside that
    entry. Triton: "sequence batching control tensor '<name>' is specified for multiple
    control kinds".
    """, "SB-03",
    example=Example(
        H
        + IO
        + SEQ % ',\n    { name: "START" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }'
    ))
CONTROL_KIND_REPEATED = register("SB04", "sequence control kind given twice", "error", """
    Each control kind (CONTROL_SEQUENCE_START, _END, _READY, _CORRID) can be sent to one
    tensor only. Triton: "sequence batching specifies multiple CONTROL_SEQUENCE_<KIND>
    tensors".
    """, "SB-04",
    example=Example(
        H
        + IO
        + SEQ % ',\n    { name: "START2" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }'
    ))
CONTROL_VALUES = register("SB05", "start/end/ready control needs one false/true value list", "error", """
    CONTROL_SEQUENCE_START, _END and _READY tell the model a flag; the control must give
    the false and true values in exactly one of int32_false_true, fp32_false_true or
    bool_false_true, with exactly 2 entries. Triton: "must specify either
    'int32_false_true', 'fp32_false_true' or 'bool_false_true'", "specifies more than one
    from ...", "... must have exactly 2 entries".
    """, "SB-05",
    example=Example(
        H
        + IO
        + 'sequence_batching {\n  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START } ] } ]\n}\n'
    ))
CORRID_CONTROL = register("SB06", "correlation-id control misconfigured", "error", """
    CONTROL_SEQUENCE_CORRID passes the sequence id itself, so it takes a data_type
    (TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING) and no false/true
    values. Triton: "sequence batching must not specify either 'int32_false_true',
    'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_CORRID", "unexpected data
    type for control CONTROL_SEQUENCE_CORRID ... Allowed data types are TYPE_UINT64,
    TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING".
    """, "SB-06",
    example=Example(
        H
        + IO
        + 'sequence_batching {\n  control_input [ { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] } ]\n}\n'
    ))
OLDEST_PREFERRED = register("SB07", "oldest-strategy preferred batch size out of range", "error", """
    Each sequence_batching.oldest.preferred_batch_size must be positive ("sequence
    batching preferred batch size must be positive") and at most max_batch_size
    ("sequence batching preferred batch size must be <= max batch size"). Like dynamic
    batching, this is checked before auto-complete: set max_batch_size explicitly.
    """, "SB-07",
    example=Example(H + IO + "sequence_batching { oldest { preferred_batch_size: [ 16 ] } }\n"))
SLOT_UTILIZATION = register("SB08", "minimum_slot_utilization outside [0, 1]", "error", """
    direct.minimum_slot_utilization is the fraction of sequence slots that must be busy
    before a batch runs. Triton: "sequence batching minimum slot utilization must be in
    range (0.0, 1.0]" (0.0 is accepted too).
    """, "SB-08",
    example=Example(H + IO + "sequence_batching { direct { minimum_slot_utilization: 1.5 } }\n"))
CONTROL_IS_INPUT = register("SB50", "sequence control name is also a configured input", "warning", """
    Control tensors are filled by Triton, not by clients, and backends count them in
    addition to the configured inputs (ONNX Runtime and PyTorch: "configuration expects N
    inputs, model provides M"). Listing the same name under `input` makes clients send
    it and breaks that count. Remove it from `input`.
    """, "NC-13",
    example=Example(
        H
        + IO
        + 'sequence_batching {\n  control_input [ { name: "INPUT0" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]\n}\n'
    ))


def _check_value_lists(ctx, control, kind_name: str, path: tuple, what: str) -> None:
    given = [name for name in VALUE_LISTS if len(getattr(control, name))]
    if not given:
        ctx.report(CONTROL_VALUES, f"{what} ({kind_name}) gives no false/true values", path,
                   hint="add e.g. int32_false_true: [ 0, 1 ]")
    elif len(given) > 1:
        ctx.report(CONTROL_VALUES, f"{what} ({kind_name}) gives both {given[0]} and {given[1]}",
                   path + (given[1],), hint=f"keep only {given[0]}")
    elif len(getattr(control, given[0])) != 2:
        ctx.report(CONTROL_VALUES, f"{what} ({kind_name}) has {len(getattr(control, given[0]))} entries in "
                   f"{given[0]}; it needs exactly 2 (false, then true)", path + (given[0],),
                   hint=f"write {given[0]}: [ <false>, <true> ]")


def _check_controls(ctx) -> None:
    seq = ctx.effective.sequence_batching
    kind_name = model_config_pb2().ModelSequenceBatching.Control.Kind.Name
    names: set[str] = set()
    kinds: set[int] = set()
    inputs = {io.name for io in ctx.effective.input}
    for i, control_input in enumerate(seq.control_input):
        path = ("sequence_batching", "control_input", i)
        name = control_input.name
        what = f"control input '{name}'" if name else f"control input #{i + 1}"
        if not name:
            ctx.report(CONTROL_NO_NAME, f"{what} has no name", path + ("name",),
                       hint="add name: \"...\" with the model input that receives the control")
        elif name in names:
            ctx.report(CONTROL_NAME_REPEATED, f"{what} appears in two control_input entries", path + ("name",),
                       hint="put all controls of this tensor into one control_input entry")
        elif name in inputs:
            ctx.report(CONTROL_IS_INPUT, f"{what} is also listed under input; Triton fills it, clients do not",
                       path + ("name",), hint=f"remove '{name}' from `input`")
        names.add(name)
        for j, control in enumerate(control_input.control):
            control_path = path + ("control", j)
            if control.kind in kinds:
                ctx.report(CONTROL_KIND_REPEATED, f"{kind_name(control.kind)} is given more than once",
                           control_path + ("kind",), hint="send each control kind to one tensor only")
            kinds.add(control.kind)
            if control.kind != CORRID:
                _check_value_lists(ctx, control, kind_name(control.kind), control_path, what)
                continue
            given = [n for n in VALUE_LISTS if len(getattr(control, n))]
            if given:
                ctx.report(CORRID_CONTROL, f"{what} (CONTROL_SEQUENCE_CORRID) must not have {given[0]}",
                           control_path + (given[0],), hint="remove it and set data_type instead")
            if dtype_name(control.data_type) not in CORRID_TYPES:
                ctx.report(CORRID_CONTROL, f"{what} (CONTROL_SEQUENCE_CORRID) has data_type "
                           f"{dtype_name(control.data_type)}", control_path + ("data_type",),
                           hint="use data_type: TYPE_UINT64 (or TYPE_INT64, TYPE_UINT32, TYPE_INT32, TYPE_STRING)")


def _check_strategy(ctx) -> None:
    seq = ctx.config.sequence_batching
    if seq.HasField("oldest"):
        # Checked before backend auto-complete: max_batch_size as written (ctx.config).
        for j, size in enumerate(seq.oldest.preferred_batch_size):
            path = ("sequence_batching", "oldest", "preferred_batch_size", j)
            if size <= 0:
                ctx.report(OLDEST_PREFERRED, f"oldest.preferred_batch_size {size} is not positive", path,
                           hint="use batch sizes of 1 or more")
            elif size > ctx.config.max_batch_size:
                ctx.report(OLDEST_PREFERRED, f"oldest.preferred_batch_size {size} exceeds max_batch_size "
                           f"{ctx.config.max_batch_size}", path,
                           hint="lower it, or set max_batch_size explicitly to at least this size")
    utilization = seq.direct.minimum_slot_utilization
    if seq.HasField("direct") and (utilization < 0.0 or utilization > 1.0):
        ctx.report(SLOT_UTILIZATION, f"direct.minimum_slot_utilization is {utilization:g}; it must be in [0, 1]",
                   ("sequence_batching", "direct", "minimum_slot_utilization"),
                   hint="use a fraction such as 0.5")


@model_rule
def check_sequence_batching(ctx) -> None:
    if not ctx.config.HasField("sequence_batching"):
        return
    if ctx.effective.response_cache.enable:
        ctx.report(CACHE_WITH_SEQUENCE, "response_cache is enabled on a model with sequence_batching",
                   ("response_cache", "enable"), hint="remove response_cache (or set enable: false)")
    _check_controls(ctx)
    _check_strategy(ctx)
