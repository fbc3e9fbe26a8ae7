"""Custom model metrics and repository agents (MET-*, AGT-*)."""

from __future__ import annotations

from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import H, IO, Example
from tritonctl.repo_schema.rules import model_rule

CUSTOMIZABLE_FAMILIES = ("nv_inference_first_response_histogram_ms",)
KNOWN_AGENTS = ("checksum",)

METRIC_CONTROL = register(
    "MET01", "incomplete metric_control", "error",
    """
    Each model_metrics.metric_control entry needs a metric_identifier with a non-empty
    family and histogram_options with at least one bucket boundary. Triton refuses the
    model otherwise: "metric control must specify 'metric_identifier'", "metric
    identifier must specify non-empty 'family'", "metric control must specify
    'histogram_options'", "histogram options must specify non-empty 'buckets'".
    """, "MET-01",
    example=Example(
        H
        + IO
        + 'model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" } } ] }\n'
    ))
UNKNOWN_FAMILY = register(
    "MET50", "metric family cannot be customized", "warning",
    """
    Only some metric families accept per-model options; today that is
    nv_inference_first_response_histogram_ms. For any other family Triton only logs
    "... is not a customizable metric in Triton core" and ignores the entry.
    """, "MET-02",
    example=Example(
        H
        + IO
        + 'model_metrics { metric_control [ { metric_identifier { family: "nv_inference_count" } histogram_options { buckets: [ 1, 10 ] } } ] }\n'
    ))
BUCKET_ORDER = register(
    "MET51", "histogram buckets not in ascending order", "warning",
    """
    Prometheus histograms need strictly increasing bucket boundaries, as the
    ModelMetrics proto asks. Triton does not check it; unsorted or repeated boundaries
    give meaningless histograms. Sort the buckets and remove duplicates.
    """, "MET-02",
    example=Example(
        H
        + IO
        + 'model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" } histogram_options { buckets: [ 100, 10, 1 ] } } ] }\n'
    ))
AGENT_NAME = register(
    "AGT01", "repository agent without a name", "error",
    """
    Each model_repository_agents.agents entry names a repository agent library,
    libtritonrepoagent_<name>.so in the server's repoagent directory. An empty name
    cannot resolve: "unable to find '<lib>' for repo agent '<name>'".
    """, "AGT-01",
    example=Example(H + IO + 'model_repository_agents { agents [ { parameters { key: "k" value: "v" } } ] }\n'))
UNKNOWN_AGENT = register(
    "AGT50", "repository agent not shipped with Triton", "warning",
    """
    Triton looks up libtritonrepoagent_<name>.so in its repoagent directory and fails
    the model when it is missing ("unable to find '<lib>' for repo agent '<name>',
    searched: ..."). Triton images ship the `checksum` agent; any other must be
    installed on the server. Check the spelling.
    """, "AGT-01",
    example=Example(H + IO + 'model_repository_agents { agents [ { name: "decryptor" } ] }\n'))


@model_rule
def check_metric_controls(ctx) -> None:
    for i, control in enumerate(ctx.config.model_metrics.metric_control):
        base = ("model_metrics", "metric_control", i)
        if not control.HasField("metric_identifier"):
            ctx.report(METRIC_CONTROL, f"metric_control {i} has no metric_identifier", base, part="key",
                       hint='add metric_identifier { family: "nv_inference_first_response_histogram_ms" }')
        elif not control.metric_identifier.family:
            ctx.report(METRIC_CONTROL, f"metric_control {i} has an empty family", base + ("metric_identifier",),
                       part="key", hint='add family: "nv_inference_first_response_histogram_ms"')
        elif control.metric_identifier.family not in CUSTOMIZABLE_FAMILIES:
            ctx.report(UNKNOWN_FAMILY, f"metric family '{control.metric_identifier.family}' cannot be customized; "
                       "Triton ignores this entry", base + ("metric_identifier", "family"),
                       hint=f"customizable families: {', '.join(CUSTOMIZABLE_FAMILIES)}")
        if not control.HasField("histogram_options"):
            ctx.report(METRIC_CONTROL, f"metric_control {i} has no histogram_options", base, part="key",
                       hint="add histogram_options { buckets: [ 1, 10, 100 ] }")
            continue
        buckets = list(control.histogram_options.buckets)
        if not buckets:
            ctx.report(METRIC_CONTROL, f"metric_control {i} has no histogram buckets",
                       base + ("histogram_options",), part="key", hint="add buckets: [ 1, 10, 100 ]")
        elif buckets != sorted(set(buckets)):
            ctx.report(BUCKET_ORDER, f"metric_control {i} buckets {buckets} are not strictly increasing",
                       base + ("histogram_options", "buckets"), hint=f"use buckets: {sorted(set(buckets))}")


@model_rule
def check_repository_agents(ctx) -> None:
    for i, agent in enumerate(ctx.config.model_repository_agents.agents):
        path = ("model_repository_agents", "agents", i)
        if not agent.name:
            ctx.report(AGENT_NAME, f"repository agent {i} has no name", path, part="key",
                       hint='add name: "checksum" (or the name of an installed agent)')
        elif agent.name not in KNOWN_AGENTS:
            ctx.report(UNKNOWN_AGENT, f"repository agent '{agent.name}' is not shipped with Triton; it must be "
                       "installed on the server", path + ("name",),
                       hint=f"Triton images ship: {', '.join(KNOWN_AGENTS)}")
