"""``tritonctl export kserve``: KServe InferenceService manifests for a model repository."""

from __future__ import annotations

import enum
import re
import sys
from pathlib import Path

import typer

from tritonctl.cli.errors import CliError
from tritonctl.export.names import RUNTIMES


Runtime = enum.Enum("Runtime", [(name, name) for name in RUNTIMES], type=str)


KSERVE_HELP = """Write KServe InferenceService manifests (YAML) that serve REPO over
the v2 (Open Inference) protocol, with CPU, GPU and memory requests
taken from its configs.

REPO is checked first, like `tritonctl validate`: a repository with
errors gets no manifests. --storage-uri is where the cluster finds a
copy of REPO (upload it there yourself). --runtime triton uses KServe's
Triton runtime (kserve-tritonserver); --runtime tritonctl runs
`tritonctl serve` from --image, an image you build and push. One
InferenceService serves the whole repository; with --per-model, one per
model, each loading only that model and its ensemble steps.

Memory requests are an estimate from model file sizes with headroom.
See docs/export.md.

[bold]Examples[/bold]

  tritonctl export kserve ./model_repository --storage-uri gs://bucket/models | kubectl apply -f -

  tritonctl export kserve ./model_repository --storage-uri pvc://models/repo -o manifests/

  tritonctl export kserve ./model_repository --storage-uri s3://bucket/repo --runtime tritonctl \\
      --image reg.example.com/tritonctl:0.1.0
"""


def kserve(
    repository: Path = typer.Argument(..., metavar="REPO", help="The model repository."),
    storage_uri: str = typer.Option(..., "--storage-uri", metavar="URI",
                                    help="Where the cluster finds the repository: gs://, s3://, pvc://CLAIM/PATH, "
                                    "hdfs://, webhdfs://, http(s)://, oci://."),
    runtime: Runtime = typer.Option(Runtime.triton, "--runtime",
                                    help="triton: KServe's Triton runtime; tritonctl: the bundled server in "
                                    "--image."),
    image: str = typer.Option(None, "--image", metavar="IMAGE",
                              help="The tritonctl container image (--runtime tritonctl); default "
                              "tritonctl:<version>, built and pushed by you."),
    runtime_version: str = typer.Option(None, "--runtime-version", metavar="TAG",
                                        help="The Triton image tag for --runtime triton (e.g. 24.08-py3); default: "
                                        "the kserve-tritonserver runtime's own."),
    per_model: bool = typer.Option(False, "--per-model",
                                   help="One InferenceService per model instead of one for the repository."),
    name: str = typer.Option(None, "--name", metavar="NAME",
                             help="The repository's InferenceService name (default: from REPO's directory name)."),
    namespace: str = typer.Option(None, "--namespace", "-n", metavar="NS", help="metadata.namespace to set."),
    output: Path = typer.Option(None, "--output", "-o", metavar="DIR",
                                help="Write one NAME.yaml per InferenceService into DIR (created if needed) "
                                "instead of standard output ('-')."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files in DIR."),
    model_config_name: str = typer.Option(None, "--model-config-name", metavar="NAME",
                                          help="Use configs/<NAME>.pbtxt where present, like tritonserver."),
    no_exec: bool = typer.Option(False, "--no-exec", help="Never run model code (a Python model's "
                                 "auto_complete_config) while checking the repository."),
    schema_python: str = typer.Option(None, "--schema-python", metavar="PYTHON",
                                      help="The Python that checks the manifests against KServe's schema, when "
                                      "kserve is installed in another environment (kserve caps pandas below 3); "
                                      "default: $TRITONCTL_KSERVE_PYTHON, else this one."),
) -> None:
    from tritonctl.export.kserve import DEFAULT_IMAGE, ExportOptions
    from tritonctl.export.names import ExportInputError, check_service_name, check_storage_uri

    if image is not None and runtime is not Runtime.tritonctl:
        raise CliError("--image is for --runtime tritonctl (KServe's Triton runtime brings its own image)", 2)
    if runtime_version is not None and runtime is not Runtime.triton:
        raise CliError("--runtime-version is for --runtime triton (with --runtime tritonctl, --image names the "
                       "whole image)", 2)
    if runtime_version is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", runtime_version):
        raise CliError(f"--runtime-version {runtime_version!r} is not an image tag (letters, digits, '_', '.', '-')",
                       2)
    if name is not None and per_model:
        raise CliError("--name names the one InferenceService of the repository; with --per-model each model's "
                       "service is named after the model", 2)
    try:
        options = ExportOptions(storage_uri=check_storage_uri(storage_uri), runtime=runtime.value,
                                image=image or DEFAULT_IMAGE, per_model=per_model, runtime_version=runtime_version,
                                name=check_service_name(name) if name is not None else None, namespace=namespace)
    except ExportInputError as exc:
        raise CliError(str(exc), 2) from None
    if namespace is not None:
        _check_namespace(namespace)
    documents = _manifests(repository, options, model_config_name, no_exec, schema_python)
    if output is None or str(output) == "-":
        _write_stdout(documents)
    else:
        _write_files(documents, output, force)


def _manifests(repository: Path, options, model_config_name: str | None, no_exec: bool,
               schema_python: str | None) -> list[tuple[str, str]]:
    """(file name, YAML text) per InferenceService, every one checked against KServe's schema."""
    from tritonctl.export.kserve import manifest, plan_services
    from tritonctl.export.names import ExportInputError
    from tritonctl.export.schema import SchemaPythonError, schema_errors
    from tritonctl.optional import require

    yaml = require("yaml", "tritonctl export kserve")
    repo = _checked_repository(repository, model_config_name, no_exec)
    try:
        services = plan_services(repo, options)
    except ExportInputError as exc:
        raise CliError(str(exc)) from None
    docs = [manifest(service, options) for service in services]
    try:
        errors = schema_errors(docs, schema_python)
    except SchemaPythonError as exc:
        raise CliError(str(exc)) from None
    for service, error in zip(services, errors):
        if error is not None:
            raise CliError(f"the InferenceService '{service.name}' does not pass KServe's schema: {error}")
    return [(f"{service.name}.yaml", yaml.safe_dump(doc, sort_keys=False)) for service, doc in zip(services, docs)]


def _checked_repository(repository: Path, model_config_name: str | None, no_exec: bool):
    """The repository after every check `tritonctl validate` makes; CliError listing the errors if any."""
    from tritonctl.repo_schema.context import CheckOptions
    from tritonctl.repo_schema.python_autocomplete import ModelCodePolicy
    from tritonctl.repo_schema.render import render
    from tritonctl.repo_schema.validate import UsageError, ValidationReport, classify, validate_repository

    try:
        kind = classify(repository)
    except UsageError as exc:
        raise CliError(f"{exc}: give the model repository to export", 2) from None
    if kind != "repository":
        raise CliError(f"{repository} is a {'model directory' if kind == 'model' else 'config file'}, not a model "
                       "repository: give the directory that holds the model directories", 2)
    # The target's GPUs are not this machine's: KIND_GPU groups become GPU requests instead.
    options = CheckOptions(gpus=None, model_code=ModelCodePolicy(run=not no_exec))
    repo = validate_repository(repository, model_config_name, options)
    report = ValidationReport(diagnostics=[*repo.diagnostics, *(d for ctx in repo.models.values()
                                                                for d in ctx.diagnostics)],
                              models_checked=len(repo.models))
    if report.errors:
        sys.stderr.write(render(report, "text"))
        raise CliError(f"{repository} does not pass `tritonctl validate` ({report.errors} error"
                       f"{'s' if report.errors != 1 else ''}): fix it first; nothing was written")
    if report.warnings:
        typer.echo(f"warning: {report.warnings} validation warning{'s' if report.warnings != 1 else ''} in "
                   f"{repository}; see `tritonctl validate {repository}`", err=True)
    return repo


def _check_namespace(namespace: str) -> None:
    if len(namespace) > 63 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", namespace):
        raise CliError(f"--namespace {namespace!r} is not a Kubernetes namespace name (lower-case letters, digits "
                       "and '-', at most 63 characters)", 2)


def _write_stdout(documents: list[tuple[str, str]]) -> None:
    sys.stdout.write("---\n".join(text for _, text in documents))
    sys.stdout.flush()


def _write_files(documents: list[tuple[str, str]], directory: Path, force: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise CliError(f"--output {directory} is a file: give a directory for the manifests", 2)
    targets = [(directory / file_name, text) for file_name, text in documents]
    existing = [str(path) for path, _ in targets if path.exists()]
    if existing and not force:
        raise CliError(f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: nothing was "
                       "written; pass --force to overwrite", 1)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for path, text in targets:
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write the manifests: {exc.strerror or exc} ({exc.filename})", 1) from None
    for path, _ in targets:
        typer.echo(f"wrote {path}", err=True)
    typer.echo(f"apply with: kubectl apply -f {directory}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``tritonctl export`` (with its ``kserve`` command) to ``app``."""
    export = typer.Typer(name="export", help="Write deployment manifests for a model repository.",
                         no_args_is_help=True, rich_markup_mode="rich")
    export.command("kserve", help=KSERVE_HELP, no_args_is_help=True,
                   short_help="KServe InferenceService manifests for a repository.")(kserve)
    app.add_typer(export)
