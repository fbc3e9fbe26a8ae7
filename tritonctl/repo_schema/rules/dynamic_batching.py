"""Dynamic batching: preferred sizes, priority queues, ordering, custom batching
library (DB-*).
"""

from __future__ import annotations

from pathlib import Path

from tritonctl.repo_schema.context import MODEL_FILES
from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, Example
from tritonctl.repo_schema.rules import model_rule

DELAY = 1  # ModelQueuePolicy.TimeoutAction.DELAY
STRATEGY_PARAMETER = "TRITON_BATCH_STRATEGY_PATH"
AUTO_COMPLETED_BACKENDS = {"onnxruntime", "tensorrt"}

PREFERRED_SIZE = register("DB01", "preferred batch size out of range", "error", """
    Each dynamic_batching.preferred_batch_size must be positive ("dynamic batching
    preferred size must be positive") and at most max_batch_size ("dynamic batching
    preferred size must be <= max batch size"). Triton checks this before the backend's
    auto-complete fills in max_batch_size, so a config that lists preferred sizes but
    leaves max_batch_size out (0) is refused even if the backend would choose a larger
    value later: set max_batch_size explicitly.
    """, "DB-01",
    example=Example(H + IO + "dynamic_batching { preferred_batch_size: [ 4, 16 ] }\n"))
DEFAULT_PRIORITY = register("DB02", "default priority level out of range", "error", """
    With priority_levels: N, requests without a priority go to default_priority_level,
    which must be between 1 and N: "default priority level must be in range [1, N]".
    """, "DB-02",
    example=Example(H + IO + "dynamic_batching { priority_levels: 2 default_priority_level: 3 }\n"))
QUEUE_POLICY_LEVEL = register("DB03", "priority queue policy for a level that does not exist", "error", """
    priority_queue_policy keys are priority levels, 1 to priority_levels: "priority queue
    policy must have priority level in range [1, N]".
    """, "DB-03",
    example=Example(
        H
        + IO
        + "dynamic_batching {\n  priority_levels: 2\n  default_priority_level: 1\n  priority_queue_policy { key: 5 value { max_queue_size: 10 } }\n}\n"
    ))
ORDERING_PRIORITIES = register("DB04", "preserve_ordering with several priority levels", "error", """
    Responses cannot come back in request order when higher priorities overtake lower
    ones: "Only one priority level is allowed when 'preserve_ordering' is true".
    """, "DB-04",
    example=Example(
        H + IO + "dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 }\n"
    ))
ORDERING_DELAY = register("DB05", "preserve_ordering with a DELAY timeout action", "error", """
    A queue policy whose timeout action is DELAY (with a non-zero default timeout) moves
    timed-out requests behind others, which breaks the order preserve_ordering promises:
    "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true".
    Use REJECT, or drop preserve_ordering.
    """, "DB-05",
    example=Example(
        H
        + IO
        + "dynamic_batching {\n  preserve_ordering: true\n  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 1000 }\n}\n"
    ))
BATCH_STRATEGY = register("DB06", "custom batching library misconfigured", "error", """
    The parameter TRITON_BATCH_STRATEGY_PATH names a custom batching library for the
    dynamic batcher. Triton refuses it with sequence batching ("TRITON_BATCH_STRATEGY_PATH
    cannot be specified with sequence batcher"), when the path escapes the model
    repository ("Batching library path escapes model repository.") and when the file does
    not exist ("Batching library path not found").
    """, "DB-06",
    example=Example(
        H
        + IO
        + 'dynamic_batching { }\nparameters { key: "TRITON_BATCH_STRATEGY_PATH" value { string_value: "../../libbatch.so" } }\n'
    ))
BATCHING_WITHOUT_BATCH = register("DB50", "dynamic_batching on a model without batching", "warning", """
    dynamic_batching groups requests along the batch dimension, which a model with
    max_batch_size: 0 does not have. Triton loads it, but clients that send a batch
    dimension then fail ("unexpected shape for input ... Expected [4], got [1,4]").
    Set max_batch_size > 0 (and drop the batch dimension from dims), or remove
    dynamic_batching.
    """, "NC-07",
    example=Example('backend: "python"\nmax_batch_size: 0\n' + IO + "dynamic_batching { }\n"))
DUPLICATE_PREFERRED = register("DB51", "preferred batch size listed twice", "warning", """
    A repeated preferred_batch_size has no effect; it usually hides a typo for another
    size. List each size once.
    """, "NC-07",
    example=Example(H + IO + "dynamic_batching { preferred_batch_size: [ 4, 4 ] }\n"))
PRIORITY_WITHOUT_LEVELS = register("DB52", "priority settings without priority levels", "warning", """
    default_priority_level and priority_queue_policy only apply when priority_levels is
    set; with priority_levels: 0 Triton silently ignores them. Set priority_levels, or
    remove them.
    """, "NC-07",
    example=Example(H + IO + "dynamic_batching { default_priority_level: 1 }\n"))


def _check_preferred_sizes(ctx) -> None:
    # DB-01 runs before backend auto-complete: the config as written (ctx.config).
    config = ctx.config
    seen: set[int] = set()
    for j, size in enumerate(config.dynamic_batching.preferred_batch_size):
        path = ("dynamic_batching", "preferred_batch_size", j)
        if size <= 0:
            ctx.report(PREFERRED_SIZE, f"preferred_batch_size {size} is not positive", path,
                       hint="use batch sizes of 1 or more")
        elif size > config.max_batch_size:
            hint = (f"lower it to at most {config.max_batch_size}, or raise max_batch_size"
                    if config.max_batch_size > 0 else
                    "set max_batch_size explicitly: it is checked before the backend fills it in")
            ctx.report(PREFERRED_SIZE, f"preferred_batch_size {size} exceeds max_batch_size "
                       f"{config.max_batch_size}", path, hint=hint)
        if size in seen:
            ctx.report(DUPLICATE_PREFERRED, f"preferred_batch_size {size} is listed twice", path,
                       hint="remove the repeated size")
        seen.add(size)


def _check_priorities(ctx) -> None:
    batching = ctx.effective.dynamic_batching
    levels = batching.priority_levels
    base = ("dynamic_batching",)
    if levels == 0:
        if batching.default_priority_level or batching.priority_queue_policy:
            field = "default_priority_level" if batching.default_priority_level else "priority_queue_policy"
            ctx.report(PRIORITY_WITHOUT_LEVELS, f"{field} is set but priority_levels is 0, so it is ignored",
                       base + (field,), hint="set priority_levels to the number of levels, or remove it")
        return
    if not 1 <= batching.default_priority_level <= levels:
        ctx.report(DEFAULT_PRIORITY, f"default_priority_level is {batching.default_priority_level}; with "
                   f"priority_levels: {levels} it must be in [1, {levels}]", base + ("default_priority_level",),
                   hint=f"set default_priority_level to a level between 1 and {levels}")
    for level in sorted(batching.priority_queue_policy):
        if not 1 <= level <= levels:
            ctx.report(QUEUE_POLICY_LEVEL, f"priority_queue_policy for level {level}, but the levels are 1 to {levels}",
                       base + ("priority_queue_policy", level, "key"),
                       hint=f"use a key between 1 and {levels}, or raise priority_levels")


def _check_ordering(ctx) -> None:
    batching = ctx.effective.dynamic_batching
    if not batching.preserve_ordering:
        return
    base = ("dynamic_batching",)
    if batching.priority_levels > 1:
        ctx.report(ORDERING_PRIORITIES, f"preserve_ordering is true with {batching.priority_levels} priority levels",
                   base + ("priority_levels",), hint="use one priority level, or drop preserve_ordering")
    policies = [(base + ("default_queue_policy",), batching.default_queue_policy)]
    policies += [(base + ("priority_queue_policy", level, "value"), policy)
                 for level, policy in sorted(batching.priority_queue_policy.items())]
    for path, policy in policies:
        if policy.timeout_action == DELAY and policy.default_timeout_microseconds != 0:
            ctx.report(ORDERING_DELAY, "queue policy delays timed-out requests (timeout_action: DELAY) although "
                       "preserve_ordering is true", path + ("timeout_action",),
                       hint="use timeout_action: REJECT, or drop preserve_ordering")


def _check_strategy_path(ctx) -> None:
    if STRATEGY_PARAMETER not in ctx.config.parameters:
        return
    path = ("parameters", STRATEGY_PARAMETER, "value", "string_value")
    if ctx.config.HasField("sequence_batching"):
        ctx.report(BATCH_STRATEGY, f"{STRATEGY_PARAMETER} is set on a model with sequence_batching", path,
                   hint="custom batching libraries only work with dynamic_batching; remove the parameter")
        return
    value = ctx.config.parameters[STRATEGY_PARAMETER].string_value
    if not ctx.can_check(MODEL_FILES):
        return
    repo_root = (ctx.repository.root if ctx.repository and ctx.repository.root else ctx.model_dir.parent).resolve()
    library = Path(value)
    if library.is_absolute():
        # An absolute path is on the server's file system; check it only when it points into this repository.
        candidates = [library.resolve()] if library.resolve().is_relative_to(repo_root) else []
    else:
        # Relative to the model directory, or to where the server starts next to the repository.
        candidates = [(ctx.model_dir / library).resolve(), (repo_root.parent / library).resolve()]
        if not any(c.is_relative_to(repo_root) for c in candidates):
            ctx.report(BATCH_STRATEGY, f"{STRATEGY_PARAMETER} '{value}' points outside the model repository", path,
                       hint="put the library in the model directory and name it relative to it")
            return
    if candidates and not any(c.is_file() for c in candidates):
        ctx.report(BATCH_STRATEGY, f"{STRATEGY_PARAMETER} '{value}' does not exist", path,
                   hint="build the library into the model directory, or fix the path")


@model_rule
def check_dynamic_batching(ctx) -> None:
    _check_strategy_path(ctx)
    if not ctx.config.HasField("dynamic_batching"):
        return
    _check_preferred_sizes(ctx)
    _check_priorities(ctx)
    _check_ordering(ctx)
    config = ctx.effective
    may_auto_complete = config.backend in AUTO_COMPLETED_BACKENDS and not (config.input and config.output)
    # DALI (from its pipeline) and a Python auto_complete_config that was not run may set it too.
    may_auto_complete |= ctx.io_left_to_backend and not ctx.written(("max_batch_size",))
    if config.max_batch_size == 0 and not may_auto_complete:
        ctx.report(BATCHING_WITHOUT_BATCH, "dynamic_batching is set but max_batch_size is 0, so no batch can form",
                   ("dynamic_batching",), part="key",
                   hint="set max_batch_size to the largest batch the model accepts, or remove dynamic_batching")
