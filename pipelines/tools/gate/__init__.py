"""The nightly gate: a run checked against an accepted baseline run of the same series, on per-query
judgments stored in MLflow (`ccrs compare`, `ccrs nightly`; docs/nightly.md). Three parts, one job each:
fetch.py talks to MLflow (which runs, what they logged, the outcome written back), decide.py decides (pure:
frames in, a typed outcome out), alert.py says it (the Markdown report, the alert, the exit code); `gate()`
runs them in that order."""
from __future__ import annotations

import tempfile
from dataclasses import replace
from functools import cache
from pathlib import Path

from pipelines.extensions.registry import GateInputs
from pipelines.tools.gate import alert, decide, fetch
from pipelines.tools.gate.decide import GateOptions, RegressionReport


def gate(tracking_uri: str, experiment: str, run: str = "latest", baseline: str = "previous",
         options: GateOptions = GateOptions()) -> RegressionReport:
    """Check `run` against its baseline and tag it with the outcome (`regression.status`, `.baseline`)."""
    client = fetch.connect(tracking_uri)
    runs = fetch.pipeline_runs(client, experiment)
    current = fetch.pick_run(runs, run)
    base = fetch.pick_baseline(runs, current, baseline)
    others = fetch.other_series(runs, current)
    with tempfile.TemporaryDirectory() as tmp:
        report = _checked(client, current, base, options, Path(tmp), others)
    report = replace(report, experiment=experiment, series=fetch.series_label(current), other_series=others)
    fetch.record_outcome(tracking_uri, report.run_id, report.status, report.baseline_id, report.markdown,
                         alert.summary(report), report.moves)
    return report


def _checked(client, current, base, options: GateOptions, work: Path,
             others: tuple[str, ...]) -> RegressionReport:
    """The night decided before pairing (decide.screen), else the paired comparison said in Markdown."""
    run_id = current.info.run_id
    base_id = base.info.run_id if base is not None else None
    judgments = fetch.judgments(client, current, work)
    differing = decide.differing_settings(current.data.tags, base.data.tags) if base is not None else {}
    screened = decide.screen(run_id, judgments, base_id, differing, options,
                             decide.baseline_line(run_id, fetch.series_label(current), others))
    if screened is not None:
        return screened
    inputs = GateInputs(fetch.stats(client, current, work), cache(lambda: fetch.stats(client, base, work)),
                        base_id, options.alpha, options=options.extensions)
    base_judgments = fetch.judgments(client, base, work)
    comparison = decide.compare(judgments, base_judgments, (fetch.answers(client, current, work),
                                                            fetch.answers(client, base, work)),
                                inputs, options, run_id)
    rate = decide.failure_rate(judgments)
    markdown = alert.comparison_markdown(comparison, run_id, base_id, fetch.series_said(current, base), rate,
                                         options, differing)
    return RegressionReport(comparison.status, run_id, base_id, comparison.table, comparison.n_regressions,
                            markdown, rate, differing, moves=comparison.moves, unpaired=comparison.unpaired)


def compare_runs(tracking_uri: str, experiment: str, run: str, baseline: str, alpha: float, b: int,
                 seed: int) -> RegressionReport:
    """The gate with default limits (kept for callers of the first version)."""
    return gate(tracking_uri, experiment, run, baseline, GateOptions(alpha=alpha, b=b, seed=seed))
