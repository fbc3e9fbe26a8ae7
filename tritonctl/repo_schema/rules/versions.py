"""Version directories and version_policy (VP-*): which versions Triton loads.

Directory names are read like Triton does (repository.parse_version_dir_name);
warmup/, initial_state/ and configs/ are never versions (VP-01).
"""

from __future__ import annotations

from tritonctl.repo_schema.context import ENSEMBLE_MEMBERS, VERSION_DIRS
from tritonctl.repo_schema.diagnostics import register
from tritonctl.repo_schema.examples import ADD, H, IO, Example, Sibling, ensemble, ensemble_step
from tritonctl.repo_schema.rules import model_rule

NOTHING_TO_LOAD = register(
    "VP03", "no version to load", "error",
    """
    Triton loads the versions that version_policy selects among the numeric
    subdirectories of the model: `latest { num_versions: N }` the N highest, `all`
    every one, `specific { versions: [...] }` the listed ones that exist. When that
    selects nothing (no numeric directory such as `1/`, num_versions: 0, or none of the
    specific versions exists), the model fails: "at least one version must be
    available under the version policy of model '<m>'". Add a version directory (an
    empty `1/` for ensembles) or fix the policy.
    """, "VP-03",
    example=Example(H + IO, files=("v1/model.py",)))
VERSION_NOT_LOADED = register(
    "VP04", "ensemble step asks for a version that is not loaded", "error",
    """
    An ensemble step with `model_version: N` needs version N of the composing model to
    be loaded, and only the versions its version_policy selects are loaded (by
    default just the highest one). Otherwise the ensemble fails: "ensemble '<e>'
    depends on '<m>' whose required version N is not loaded". Use model_version: -1
    (latest), or widen the composing model's version_policy (all, or specific).
    """, "VP-04",
    example=Example(
        ensemble(ensemble_step(version=1)),
        files=("1/",),
        siblings=(Sibling("add", ADD.config, ("1/model.py", "2/model.py")),),
    ))
IGNORED_VERSION_DIR = register(
    "VP50", "subdirectory that Triton does not read as intended", "warning",
    """
    Triton treats every subdirectory of a model (except warmup, initial_state and
    configs) as a version candidate. Names with leading zeros (`01`) and names that are
    not numbers (`v1`, `.ipynb_checkpoints`) are ignored with only a log line. Names
    that start with a number (`1_old`, `2.5`) are read as that number by std::stoll, so
    `1_old` counts as version 1 while Triton loads the files of `1/`. Rename version
    directories to plain numbers and move everything else out of the model directory.
    """, "VP-02",
    example=Example(H + IO, files=("1/model.py", "v2/model.py")))
MISSING_SPECIFIC_VERSION = register(
    "VP51", "specific version without a directory", "warning",
    """
    A version listed in `version_policy { specific { versions: [...] } }` has no
    directory. Triton only logs "version <v> is specified for model '<m>', but the
    version directory is not present" and loads the others.
    """, "VP-03",
    example=Example(H + IO + "version_policy { specific { versions: [ 1, 2 ] } }\n"))


def available_versions(ctx) -> list[int]:
    return sorted({v.version for v in ctx.versions if v.version is not None})


def selected_versions(policy, available: list[int]) -> list[int]:
    """The versions Triton loads under ``policy`` (a ModelVersionPolicy) (VP-03)."""
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return list(available)
    if choice == "specific":
        wanted = set(policy.specific.versions)
        return [v for v in available if v in wanted]
    count = policy.latest.num_versions if choice == "latest" else 1
    return sorted(available)[-count:] if count else []


@model_rule
def check_version_dirs(ctx) -> None:
    if not ctx.can_check(VERSION_DIRS):
        return
    by_number: dict[int, list[str]] = {}
    for vdir in ctx.versions:
        if vdir.version is not None:
            by_number.setdefault(vdir.version, []).append(vdir.name)
    for vdir in ctx.versions:
        if vdir.version is None:
            ctx.report(IGNORED_VERSION_DIR, f"Triton ignores directory '{vdir.name}' of model '{ctx.name}': "
                       f"{vdir.reason}", file=vdir.path,
                       hint=f"rename it to a plain version number (for example '{_suggest(vdir.name)}') or move "
                       "it out of the model directory")
        elif vdir.reason:
            clash = [n for n in by_number[vdir.version] if n != vdir.name]
            extra = f"; it collides with '{clash[0]}'" if clash else ""
            ctx.report(IGNORED_VERSION_DIR, f"directory '{vdir.name}' of model '{ctx.name}': {vdir.reason}{extra}",
                       file=vdir.path, hint=f"rename it to '{vdir.version}' or move it out of the model directory")


def _suggest(name: str) -> str:
    digits = "".join(ch for ch in name if ch.isdigit()).lstrip("0")
    return digits or "1"


@model_rule
def check_version_policy(ctx) -> None:
    policy = ctx.effective.version_policy
    if not ctx.can_check(VERSION_DIRS):
        if policy.WhichOneof("policy_choice") == "latest" and policy.latest.num_versions <= 0:
            # Nothing to load whatever the directories hold.
            ctx.report(NOTHING_TO_LOAD, f"version_policy of model '{ctx.name}' loads the latest "
                       f"{policy.latest.num_versions} versions", ("version_policy", "latest", "num_versions"),
                       hint="set num_versions: 1 or more")
        return
    available = available_versions(ctx)
    selected = selected_versions(policy, available)
    choice = policy.WhichOneof("policy_choice")
    if choice == "specific":
        for j, version in enumerate(policy.specific.versions):
            if version not in available and selected:
                ctx.report(MISSING_SPECIFIC_VERSION, f"version {version} of model '{ctx.name}' is listed in "
                           "version_policy but has no directory", ("version_policy", "specific", "versions", j),
                           hint=f"create '{version}/' or remove {version} from the list")
    if selected:
        return
    found = ", ".join(map(str, available)) or "none"
    if not available:
        ignored = [f"'{v.name}' ({v.reason})" for v in ctx.versions]
        message = f"model '{ctx.name}' has no version directory" + (
            f"; Triton ignores {', '.join(ignored)}" if ignored else "")
        hint = "create a numeric version directory such as '1/' holding the model file"
        path = ("version_policy",)
    elif choice == "latest":
        message = f"version_policy of model '{ctx.name}' loads the latest 0 versions"
        hint = "set num_versions: 1 or more"
        path = ("version_policy", "latest", "num_versions")
    else:
        wanted = ", ".join(map(str, policy.specific.versions)) or "none"
        message = f"version_policy of model '{ctx.name}' asks for versions [{wanted}] but the version " \
                  f"directories are [{found}]"
        hint = "list versions that exist, or use latest { num_versions: 1 }"
        path = ("version_policy", "specific", "versions")
    ctx.report(NOTHING_TO_LOAD, message, path, hint=hint)


@model_rule
def check_ensemble_step_versions(ctx) -> None:
    if not ctx.is_ensemble or ctx.repository is None or not ctx.can_check(ENSEMBLE_MEMBERS):
        return
    for i, step in enumerate(ctx.config.ensemble_scheduling.step):
        target = ctx.repository.models.get(step.model_name)
        if target is None or target is ctx or not target.source.parsed.ok or step.model_version == -1:
            continue
        available = available_versions(target)
        if step.model_version not in available:
            continue  # a missing version directory is the ensemble rules' finding
        loaded = selected_versions(target.effective.version_policy, available)
        if step.model_version not in loaded:
            ctx.report(VERSION_NOT_LOADED, f"step {i} of ensemble '{ctx.name}' needs version {step.model_version} "
                       f"of '{step.model_name}', but its version_policy loads only "
                       f"[{', '.join(map(str, loaded)) or 'none'}]",
                       ("ensemble_scheduling", "step", i, "model_version"),
                       hint=f"use model_version: -1, or give '{step.model_name}' version_policy: {{ all {{ }} }}")
