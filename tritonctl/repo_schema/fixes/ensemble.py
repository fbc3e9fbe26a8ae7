"""Fixes for ensemble steps (ENS10, ENS14, ENS16): names that match exactly one model of
the repository, or exactly one tensor of the composing model."""

from __future__ import annotations

import difflib

from tritonctl.repo_schema.autocomplete import effective_config
from tritonctl.repo_schema.fixes.base import Edit, Fix, FixContext, fixer, quote, unique_candidate
from tritonctl.repo_schema.repository import looks_like_model_dir

STEP = ("ensemble_scheduling", "step")


def _step_path(ctx: FixContext, *tail) -> tuple | None:
    for path in ctx.paths_at():
        if path[:2] == STEP and len(path) == 3 + len(tail) and all(t is None or t == p for t, p in
                                                                   zip(tail, path[3:])):
            return path
    return None


@fixer("ENS10", """
    Renames a step's model_name to the one model directory of the repository it is
    close to (`resnet_50` -> `resnet50`). With no close name, or several, it is left alone.
    """)
def fix_step_model(ctx: FixContext) -> Fix | None:
    path = _step_path(ctx, "model_name")
    if path is None or ctx.config is None:
        return None
    name = ctx.config.ensemble_scheduling.step[path[2]].model_name
    try:
        models = [d.name for d in ctx.model_dir.parent.iterdir()
                  if d.is_dir() and d != ctx.model_dir and looks_like_model_dir(d)]
    except OSError:
        return None
    candidate = unique_candidate(name, sorted(models))
    if candidate is None:
        return None
    entry = ctx.entry(path)
    return Fix((Edit(entry[2], entry[3], quote(candidate)),), f"step {path[2]} runs model '{candidate}'")


def _map_key_fix(ctx: FixContext, map_name: str, side: str) -> Fix | None:
    path = _step_path(ctx, map_name, None, "key")
    if path is None or ctx.config is None:
        return None
    step = ctx.config.ensemble_scheduling.step[path[2]]
    model_dir = ctx.model_dir.parent / step.model_name
    if not step.model_name or not (model_dir / "config.pbtxt").is_file():
        return None
    composing, _ = effective_config(model_dir)
    if composing is None:
        return None
    names = [t.name for t in getattr(composing, side)]
    keys = list(getattr(step, map_name))
    key = path[4]
    unmapped = [n for n in names if n not in keys]
    unknown = [k for k in keys if k not in names]
    if len(unmapped) == 1 and len(unknown) == 1:
        candidate = unmapped[0]
    else:
        close = difflib.get_close_matches(key, unmapped, n=2, cutoff=0.75)
        candidate = close[0] if len(close) == 1 else None
    if candidate is None:
        return None
    entry = ctx.entry(path)
    return Fix((Edit(entry[2], entry[3], quote(candidate)),),
               f"step {path[2]}: {map_name} key '{key}' is {side} '{candidate}' of '{step.model_name}'")


@fixer("ENS14", """
    Renames an input_map key to the composing model's input it must be: the only input
    the step leaves unmapped (when this is the only unknown key), or the only close one.
    """)
def fix_input_map_key(ctx: FixContext) -> Fix | None:
    return _map_key_fix(ctx, "input_map", "input")


@fixer("ENS16", """
    Renames an output_map key to the composing model's output it must be: the only output
    the step leaves unmapped (when this is the only unknown key), or the only close one.
    """)
def fix_output_map_key(ctx: FixContext) -> Fix | None:
    return _map_key_fix(ctx, "output_map", "output")
