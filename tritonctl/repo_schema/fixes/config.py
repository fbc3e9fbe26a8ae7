"""Fixes for what a parsed config says (TOP, DB, IO, PB codes) that need no model file."""

from __future__ import annotations

import re

from tritonctl.repo_schema.fixes.base import (
    Edit, Fix, FixContext, fixer, insert_top_level, quote, remove_node, unique_candidate,
)
from tritonctl.repo_schema.fixes.files import detected_backend, model_file_backend
from tritonctl.repo_schema.normalize import BACKEND_OF_PLATFORM, core_normalize, runs_python_runtime
from tritonctl.repo_schema.rules.parameters import known_keys
from tritonctl.repo_schema.rules.platform import KNOWN_BACKENDS, KNOWN_PLATFORMS, PLATFORM_ALIASES


def _value_path(ctx: FixContext, *shape) -> tuple | None:
    """The sourcemap path at the diagnostic whose names match ``shape`` (None matches an index or key)."""
    for path in ctx.paths_at():
        if len(path) == len(shape) and all(s is None or s == p for s, p in zip(shape, path)):
            return path
    return None


@fixer("TOP02", """
    Sets `name` to the name of the model's directory, which is what Triton requires.
    (Rename the directory instead when the name in the file is the one you want.)
    """)
def fix_name(ctx: FixContext) -> Fix | None:
    config = ctx.config
    entry = ctx.entry(("name",))
    if config is None or entry is None or not config.name or config.name == ctx.model_dir.name:
        return None
    return Fix((Edit(entry[2], entry[3], quote(ctx.model_dir.name)),),
               f"set name to \"{ctx.model_dir.name}\", the directory's name")


def _remove_preferred(ctx: FixContext, why: str) -> Fix | None:
    node = ctx.node_at(ctx.span[0]) if ctx.span else None
    if node is None:
        return None
    if node.in_list and len(node.parent.children) == 1:
        node = node.parent  # the only size: drop the field, Triton then prefers max_batch_size
    return Fix((remove_node(ctx.text, node),), why)


@fixer("DB01", """
    Removes a preferred_batch_size that is not positive or is above max_batch_size: the
    dynamic batcher can never form such a batch. When max_batch_size is not set (0), the
    fix is yours: set max_batch_size.
    """)
def fix_preferred_out_of_range(ctx: FixContext) -> Fix | None:
    config = ctx.config
    path = _value_path(ctx, "dynamic_batching", "preferred_batch_size", None)
    if config is None or path is None:
        return None
    size = config.dynamic_batching.preferred_batch_size[path[2]]
    if size <= 0:
        return _remove_preferred(ctx, f"removed preferred_batch_size {size}, which is not positive")
    if 0 < config.max_batch_size < size:
        return _remove_preferred(ctx, f"removed preferred_batch_size {size}, above max_batch_size "
                                      f"{config.max_batch_size}")
    return None


@fixer("DB51", "Removes the repeated preferred_batch_size.")
def fix_duplicate_preferred(ctx: FixContext) -> Fix | None:
    config = ctx.config
    path = _value_path(ctx, "dynamic_batching", "preferred_batch_size", None)
    if config is None or path is None:
        return None
    sizes = list(config.dynamic_batching.preferred_batch_size)
    if sizes[path[2]] not in sizes[:path[2]]:
        return None
    return _remove_preferred(ctx, f"removed the repeated preferred_batch_size {sizes[path[2]]}")


def _remove_entry(ctx: FixContext, side: str, index: int, why: str) -> Fix | None:
    entry = ctx.entry((side, index))
    node = ctx.node_at(entry[0]) if entry else None
    if node is None or node.kind != "block":
        return None
    if node.in_list and len(node.parent.children) == 1:
        node = node.parent
    return Fix((remove_node(ctx.text, node),), why)


@fixer("IO50", """
    Removes an input listed a second time with exactly the same settings. Two entries
    that differ are left to you.
    """)
def fix_duplicate_input(ctx: FixContext) -> Fix | None:
    config = ctx.config
    path = _value_path(ctx, "input", None, "name")
    if config is None or path is None:
        return None
    entry = config.input[path[1]]
    if not any(other == entry for other in config.input[:path[1]]):
        return None
    return _remove_entry(ctx, "input", path[1], f"removed the second, identical input '{entry.name}'")


@fixer("IO51", """
    Removes the second entry of an output listed twice. Triton only ever uses the first
    one, so the model behaves the same after the fix.
    """)
def fix_duplicate_output(ctx: FixContext) -> Fix | None:
    config = ctx.config
    path = _value_path(ctx, "output", None, "name")
    if config is None or path is None:
        return None
    name = config.output[path[1]].name
    if name not in [o.name for o in config.output[:path[1]]]:
        return None
    return _remove_entry(ctx, "output", path[1], f"removed the second entry of output '{name}', which Triton ignores")


@fixer("PB01", """
    Fixes a platform when exactly one is meant: a misspelt or abbreviated platform
    (`onnx` -> `onnxruntime_onnx`), or a backend name written as the platform
    (`platform: "python"` becomes `backend: "python"`), as long as the model file agrees.
    """)
def fix_unexpected_platform(ctx: FixContext) -> Fix | None:
    config = ctx.config
    entry = ctx.entry(("platform",))
    if config is None or entry is None or config.backend:
        return None
    platform = config.platform
    detected = detected_backend(ctx)
    lowered = platform.lower()
    if lowered in KNOWN_BACKENDS and lowered not in PLATFORM_ALIASES:
        if detected not in (None, lowered):
            return None
        return Fix((Edit(entry[0], entry[1], "backend"), Edit(entry[2], entry[3], quote(lowered))),
                   f"'{platform}' is a backend: wrote backend: \"{lowered}\"")
    candidate = PLATFORM_ALIASES.get(lowered) or unique_candidate(platform, KNOWN_PLATFORMS)
    if candidate is None:
        return None

    if detected is not None and BACKEND_OF_PLATFORM.get(candidate) != detected:
        return None
    return Fix((Edit(entry[2], entry[3], quote(candidate)),), f"wrote platform: \"{candidate}\"")


@fixer("PB02", """
    Removes `backend` from a model that is an ensemble (platform "ensemble" with
    ensemble_scheduling): ensembles run inside Triton and have no backend.
    """)
def fix_ensemble_backend(ctx: FixContext) -> Fix | None:
    config = ctx.config
    entry = ctx.entry(("backend",))
    if config is None or entry is None or config.platform != "ensemble" or not config.HasField("ensemble_scheduling"):
        return None
    node = ctx.node_at(entry[0])
    return Fix((remove_node(ctx.text, node),), "removed backend from the ensemble") if node else None


@fixer("PB05", """
    Adds `platform: "ensemble"` to a config that has ensemble_scheduling but neither a
    platform nor a backend, and no model file: it can only be an ensemble.
    """)
def fix_ensemble_platform(ctx: FixContext) -> Fix | None:
    config = ctx.config
    if config is None or not config.HasField("ensemble_scheduling") or config.platform or config.backend \
            or config.default_model_filename or detected_backend(ctx) is not None or "." in ctx.model_dir.name:
        return None
    return Fix((insert_top_level(ctx, 'platform: "ensemble"'),), 'added platform: "ensemble"')


@fixer("PB50", """
    Rewrites a two-digit cc_model_filenames key as the compute capability Triton
    compares with (`"86"` or `"sm_86"` -> `"8.6"`).
    """)
def fix_cc_key(ctx: FixContext) -> Fix | None:
    config = ctx.config
    path = _value_path(ctx, "cc_model_filenames", None, "key")
    if config is None or path is None:
        return None
    digits = re.sub(r"\D", "", path[1])
    if len(digits) != 2:
        return None
    key = f"{digits[0]}.{digits[1]}"
    if key in config.cc_model_filenames:
        return None
    entry = ctx.entry(path)
    return Fix((Edit(entry[2], entry[3], quote(key)),), f"wrote the key \"{path[1]}\" as \"{key}\"")


@fixer("PB51", """
    Fixes a misspelt backend when exactly one known backend is close and the model file
    in the version directory is that backend's (`onnxrutime` with a model.onnx ->
    `onnxruntime`). Custom backends are left alone.
    """)
def fix_unknown_backend(ctx: FixContext) -> Fix | None:
    config = ctx.config
    entry = ctx.entry(("backend",))
    if config is None or entry is None:
        return None
    candidate = unique_candidate(config.backend, KNOWN_BACKENDS)
    if candidate is None or candidate == config.backend:
        return None
    if model_file_backend(ctx, candidate) != candidate:
        return None
    return Fix((Edit(entry[2], entry[3], quote(candidate)),), f"wrote backend: \"{candidate}\"")


@fixer("PAR50", """
    Renames a misspelt parameter key when exactly one key the backend reads is close
    (`enable_mem_arna` -> `enable_mem_arena`, `Execution_Mode` -> `execution_mode`) and
    that key is not set already. Keys of custom backends, and Python models' own keys,
    are left alone.
    """)
def fix_parameter_key(ctx: FixContext) -> Fix | None:
    config = ctx.config
    path = _value_path(ctx, "parameters", None, "key")
    if config is None or path is None:
        return None
    normalized = core_normalize(config, ctx.model_dir)
    keys = known_keys(normalized.backend, runs_python_runtime(normalized))
    candidate = unique_candidate(path[1], sorted(keys or ()))
    if candidate is None or candidate in config.parameters:
        return None
    entry = ctx.entry(path)
    return Fix((Edit(entry[2], entry[3], quote(candidate)),), f"renamed parameter '{path[1]}' to '{candidate}'")
