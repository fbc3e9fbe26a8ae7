"""What ``tritonctl analyze`` shows: a progress bar with ETA while it runs, then the summary."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from tritonctl.analyzer.analyze import AnalyzeOptions, AnalyzeResult, Reporter
from tritonctl.analyzer.objective import ConfigResult
from tritonctl.analyzer.point import Point
from tritonctl.analyzer.search import Candidate
from tritonctl.analyzer.why import why_lines


class ProgressReporter(Reporter):
    """One bar over the configs to measure (the smart budget, or all for exhaustive), with ETA;
    a line per measured point and per decision above it."""

    def __init__(self, console: Console):
        self.console = console
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("configs"), TimeElapsedColumn(),
                                 TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=True)
        self.task = None
        self.current = ""

    def __enter__(self) -> "ProgressReporter":
        self.progress.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.progress.stop()

    def plan(self, total: int, strategy: str) -> None:
        if self.task is not None:  # the next model of a repository run
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(f"{strategy} search", total=total)

    def candidate(self, candidate: Candidate, stage: str) -> None:
        self.current = candidate.config_id
        self._describe(f"{stage}: {candidate.config_id}")

    def point(self, point: Point, reused: bool) -> None:
        source = "[dim](from checkpoint)[/dim]" if reused else ""
        text = point.describe() if point.ok else f"[red]{point.describe()}[/red]"
        self.console.print(f"  [dim]{point.config_id:>24}[/dim]  {text} {source}".rstrip(), soft_wrap=True)
        self._describe(f"{point.stage}: {point.config_id} ({point.load_words()} done)")

    def candidate_done(self, result: ConfigResult) -> None:
        if self.task is not None:
            task = self.progress.tasks[0]
            if task.completed + 1 > (task.total or 0):
                self.progress.update(self.task, total=task.completed + 1)
            self.progress.advance(self.task)

    def decision(self, text: str) -> None:
        self.console.print(f"[cyan]>[/cyan] {text}", soft_wrap=True)

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]note:[/yellow] {text}", soft_wrap=True)

    def _describe(self, text: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, description=text)


def print_result(result: AnalyzeResult, options: AnalyzeOptions, out: Console, err: Console) -> None:
    from tritonctl.analyzer.results import summary_table

    best_id = result.best.config_id if result.best else None
    if result.results:
        out.print(summary_table(result.results, options.objective, options.constraints, best_id))
    meta = result.meta
    out.print(f"Measured {meta['candidates_measured']} of {meta['candidates_total']} configs "
              f"({result.measured} points measured, {result.reused} from the checkpoint) in {meta['wall_s']:.0f} s.")
    if result.best is not None:
        out.print(f"[bold]Best:[/bold] {result.best.config_id}: {result.best.best.describe()}")
        default = result.default
        if default is not None and default.best is not None and default.config_id != best_id:
            tp = result.best.best.throughput / default.best.throughput if default.best.throughput else 0.0
            out.print(f"[bold]Default:[/bold] {default.best.describe()} "
                      f"(best/default throughput x{tp:.2f}, p99 {result.best.best.p99_ms:.2f} vs "
                      f"{default.best.p99_ms:.2f} ms)")
        final = meta.get("final_round")
        if final and final.get("runner_up"):
            standings = ", ".join(f"{f['config_id']} {f['throughput']:,.1f} infer/s" for f in final["finalists"]
                                  if f.get("throughput") is not None)
            out.print(f"[bold]Final round[/bold] ({final['rounds']} rounds head to head, medians): {standings}",
                      soft_wrap=True)
            out.print(f"[bold]Margin:[/bold] {final['verdict']}.", soft_wrap=True)
        why = why_lines(meta.get("why"))
        if why:
            out.print("[bold]Why it won:[/bold]")
            for line in why:
                out.print(f"  - {line}", soft_wrap=True, markup=False)
    elif not result.interrupted:
        err.print(f"[red]No config met the constraints[/red] ({options.constraints.describe()}); "
                  "see the table for the closest ones, or relax --max-p99-ms / --min-throughput.")
    if meta.get("unexplored_knobs"):
        err.print(f"[yellow]warning:[/yellow] the budget of {meta.get('budget')} configs ran out before "
                  f"the search explored: {', '.join(meta['unexplored_knobs'])}; raise --budget to cover them.",
                  soft_wrap=True)
    unstable = int((~result.frame["stable"]).sum()) if len(result.frame) else 0
    if unstable:
        err.print(f"[yellow]note:[/yellow] {unstable} of {len(result.frame)} points did not reach a stable "
                  f"measurement in {options.max_trials} windows (is something else using the machine?); their "
                  "numbers are the last 3 windows. Longer windows (-p) or more of them (-r) steady them.",
                  soft_wrap=True)
    for note in result.notes:
        err.print(f"[yellow]note:[/yellow] {note}", soft_wrap=True)
    out.print("Outputs: " + ", ".join(str(path) for path in result.files), soft_wrap=True)
    if result.interrupted:
        err.print(f"[yellow]Interrupted:[/yellow] {result.measured + result.reused} points kept in "
                  f"{result.output_dir}; run the same command with --resume to continue.")


class RepositoryProgress(ProgressReporter):
    """A repository run: a line as each model starts (its share of the time and the run's ETA) and
    ends, and the one-model progress in between."""

    def model_start(self, index: int, total: int, model: str, budget_s: float | None, eta_s: float | None) -> None:
        share = f", up to {budget_s:.0f} s" if budget_s is not None else ""
        eta = f"; the run ends within {eta_s:.0f} s" if eta_s is not None else ""
        self.console.print(f"[bold]\\[{index}/{total}] {model}[/bold]{share}{eta}", soft_wrap=True)

    def model_done(self, outcome) -> None:
        if outcome.skipped is not None:
            self.console.print(f"[yellow]{outcome.model}:[/yellow] {outcome.skipped}", soft_wrap=True)
            return
        best = outcome.result.best
        chosen = best.config_id if best is not None else "no config met the constraints"
        self.console.print(f"[bold]{outcome.model}:[/bold] {chosen} ({outcome.wall_s:.0f} s)", soft_wrap=True)


def print_repository(run, out: Console, err: Console) -> None:
    for outcome in run.outcomes:
        if outcome.skipped is not None:
            err.print(f"[yellow]skipped[/yellow] {outcome.model}: {outcome.skipped}", soft_wrap=True)
    out.print((run.output_dir / "repository.md").read_text(), soft_wrap=True, markup=False)
    out.print("Outputs: " + ", ".join(str(path) for path in run.files), soft_wrap=True)
    if run.interrupted:
        err.print("[yellow]Interrupted:[/yellow] run the same command with --resume to continue.")
