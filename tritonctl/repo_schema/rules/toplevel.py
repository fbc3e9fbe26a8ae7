"""Top-level fields: name and max_batch_size (TOP-*)."""

from __future__ import annotations

from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import IO, Example
from tritonctl.repo_schema.rules import model_rule

NAME_MISMATCH = register(
    "TOP02", "model name differs from its directory", "error",
    """
    When config.pbtxt sets `name`, it must equal the name of the model's directory;
    Triton refuses to load it otherwise ("unexpected directory name '<dir>' for model
    '<name>', directory name must equal model name"). Leaving `name` out is fine:
    Triton then uses the directory name.
    """, "TOP-02",
    example=Example('name: "resnet"\nbackend: "python"\nmax_batch_size: 8\n' + IO, model="resnet50"))
NEGATIVE_MAX_BATCH = register(
    "TOP03", "max_batch_size is negative", "error",
    """
    max_batch_size is the largest batch the model accepts; 0 means the model does not
    batch and its dims are the full tensor shape. Triton refuses negative values
    ("'max_batch_size' must be non-negative value").
    """, "TOP-03",
    example=Example('backend: "python"\nmax_batch_size: -1\n' + IO))


@model_rule
def check_name(ctx) -> None:
    name = ctx.config.name
    if name and name != ctx.name:
        ctx.report(NAME_MISMATCH, f"model name '{name}' differs from its directory name '{ctx.name}'",
                   ("name",), hint=f"rename the directory to '{name}', or set name: \"{ctx.name}\" (or remove it)")


@model_rule
def check_max_batch_size(ctx) -> None:
    if ctx.config.max_batch_size < 0:
        ctx.report(NEGATIVE_MAX_BATCH, f"max_batch_size is {ctx.config.max_batch_size}; it must be 0 or more",
                   ("max_batch_size",),
                   hint="use 0 for a model without a batch dimension, or the largest batch it accepts")
