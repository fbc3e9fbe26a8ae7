"""``tritonctl analyze --ray`` and ``--concurrent``: runs over several models at once, their
progress and their outputs."""

from __future__ import annotations

import threading

import typer
from rich.console import Console

from tritonctl.analyzer.analyze import AnalyzeOptions
from tritonctl.analyzer.hardware import describe
from tritonctl.analyzer.repository import RepositoryReporter
from tritonctl.cli.analyze_view import print_repository, print_result
from tritonctl.optional import require


class ClusterProgress(RepositoryReporter):
    """Models run side by side on the nodes: a line as each starts and ends, and every decision
    prefixed with its model (the one-model progress bar does not fit several at once)."""

    def __init__(self, console: Console):
        self.console = console
        self.local = threading.local()
        self.lock = threading.Lock()

    def model_start(self, index: int, total: int, model: str, budget_s: float | None, eta_s: float | None) -> None:
        self.local.model = model.split(" ", 1)[0]
        share = f", up to {budget_s:.0f} s" if budget_s is not None else ""
        self._print(f"[bold]\\[{index}/{total}] {model}[/bold]{share}")

    def model_done(self, outcome) -> None:
        if outcome.skipped is not None:
            self._print(f"[yellow]{outcome.model}:[/yellow] {outcome.skipped}")
            return
        best = outcome.result.best
        chosen = best.config_id if best is not None else "no config met the constraints"
        self._print(f"[bold]{outcome.model}:[/bold] {chosen} ({outcome.wall_s:.0f} s)")

    def decision(self, text: str) -> None:
        self._print(f"{getattr(self.local, 'model', '')}: {text}", markup=False)

    def note(self, text: str) -> None:
        self._print(f"[yellow]note:[/yellow] {getattr(self.local, 'model', '')}: {text}")

    def _print(self, text: str, markup: bool = True) -> None:
        with self.lock:
            self.console.print(text, soft_wrap=True, markup=markup)


def analyze_on_ray(options: AnalyzeOptions, models: list[str] | None, address: str, err: Console) -> None:
    """Tune ``models`` (None: the one ``options.model``) on the Ray cluster at ``address``."""
    require("ray", "tritonctl analyze --ray")
    from tritonctl.analyzer.ray_cluster import run_model_on_ray, run_on_ray

    reporter = ClusterProgress(err)
    if models is None:
        result = run_model_on_ray(options, address, reporter)
        print_result(result, options, Console(), err)
        if result.interrupted:
            raise typer.Exit(130)
        if result.best is None:
            raise typer.Exit(1)
        return
    cluster = run_on_ray(options, models, address, reporter)
    for node in cluster.nodes:
        lost = " (lost during the run)" if node in cluster.lost else ""
        err.print(f"Ray node {node.name}: {describe(node.hardware)} [{node.hardware['id']}]{lost}", soft_wrap=True,
                  markup=False)
    print_repository(cluster.result, Console(), err)
    if cluster.result.interrupted:
        raise typer.Exit(130)


def analyze_concurrent(options: AnalyzeOptions, models: list[str], err: Console) -> None:
    """Tune ``models`` alone, then measure the combinations of their best configs on one server."""
    from tritonctl.analyzer.concurrent import run_repository_concurrent
    from tritonctl.cli.analyze_view import RepositoryProgress

    with RepositoryProgress(err) as reporter:
        run, combined = run_repository_concurrent(options, models, reporter)
    print_repository(run, Console(), err)
    if combined is None:
        raise typer.Exit(130)
    out = Console()
    out.print((combined.output_dir / "concurrent.md").read_text(), soft_wrap=True, markup=False)
    for note in combined.notes:
        err.print(f"[yellow]note:[/yellow] {note}", soft_wrap=True)
    out.print("Outputs: " + ", ".join(str(path) for path in combined.files), soft_wrap=True)
    if combined.chosen is None:
        raise typer.Exit(1)
