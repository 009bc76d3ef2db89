"""The reduce stage's reporting: tables/ and plots/ beside stats.json, written by the caller after the
stage (so that the stage's code key covers the statistics only), and the statistics of scores the user
brings (`ccrs stats`, `ccrs_eval.compute_stats`) with their verdict."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from stats.errors import StatsInputError
from stats.scores import build_cube, validate_scores
from tasks.runtime.layout import PLOTS_DIR, SUMMARY_FILE, TABLES_DIR
from tasks.reduce import concat_scores, load_scores, write_stats

if TYPE_CHECKING:
    from stats.labels import LabelSet
    from pipelines.reporting.plots import BackgroundPlots
    from pipelines.reporting.verdict import VerdictSection

# The metrics' HSDs side by side: each holds its B x questions random picks (94 MB at the paper's scale).
MAX_TEST_THREADS = 4
# Below this many score rows x iterations (B) the statistics end before a plot process could have started
# (about a second: Python, numpy, pandas, matplotlib), so the plots are drawn here after them. The paper's
# scale is 141,570 x 10,000.
BACKGROUND_PLOTS_MIN_WORK = 400_000_000


def write_outputs(result: dict, scores: pd.DataFrame, out_dir: Path,
                  background: BackgroundPlots | None = None) -> list[Path]:
    """Write stats.json, tables/*.csv and tables/*.md, plots/*.png; return the written paths."""
    return [write_stats(result, out_dir), *write_reports(result, scores, out_dir, background)]


def write_reports(result: dict, scores: pd.DataFrame, out_dir: Path,
                  background: BackgroundPlots | None = None) -> list[Path]:
    """tables/ and plots/ of a result into out_dir (nothing when no judgment has a score); the plots drawn
    here, or by `background` (already drawing the scores' plots) while the tables are written."""
    from pipelines.reporting import tables
    from pipelines.reporting import plots

    if not result["systems"]:  # no judgment has a score: nothing to tabulate or plot
        return []
    out_dir = Path(out_dir)
    if background is not None:
        background.add_result(result)
        return [*tables.write_tables(result, out_dir / TABLES_DIR), *background.write(out_dir / PLOTS_DIR)]
    cube = build_cube(validate_scores(scores), result["metrics"])
    return [*tables.write_tables(result, out_dir / TABLES_DIR),
            *plots.write_plots(result, cube, out_dir / PLOTS_DIR)]


def write_reduce_reports(result: dict, scores_paths: list[Path], out_dir: Path) -> list[Path]:
    """tables/ and plots/ of a finished (or reused) reduce stage, from its stats.json result and the
    scores it reduced."""
    if not result["systems"]:
        return []
    return write_reports(result, concat_scores([load_scores(path) for path in scores_paths]), out_dir)


def reduce_user_scores(scores: pd.DataFrame, out_dir: Path, *, scale: tuple[float, float] | None = None,
                       hypotheses_path: str | Path | None = None, b: int = 10_000, seed: int = 0,
                       alpha: float = 0.05, title: str = "your scores", on_metric=None,
                       sections: Sequence[VerdictSection] = (),
                       labels: LabelSet | None = None, in_parallel: bool = True,
                       plots: BackgroundPlots | None = None,
                       amend: Callable[[dict, pd.DataFrame], dict] | None = None,
                       ) -> tuple[dict, list[Path], str]:
    """Scores the user brings (`ccrs stats`, `ccrs_eval.compute_stats`): long or wide, on [0, 1] or on
    `scale`, through the same statistics as a run; writes stats.json, tables/, plots/ and the verdict
    (summary.md, with the caller's added `sections`) into out_dir. The user's metric names are theirs: no
    judge suite is attached to them. `labels`: human labels (stats.labels.validate_labels), for the
    human-calibrated statistics. `amend(result, scores)`: the result as a run extension's statistics
    contributor leaves it before anything is written (its inputs may give one; e.g. estimates valid under a
    labeling design of its own). `in_parallel`: where two or more CPUs allow, the metrics' HSDs side by side
    on threads and the plots drawn in a second process while the statistics are computed: in `plots`
    (started by the caller, which ends it), else, for large scores, in one started here (the same files;
    False: one thing after another, here)."""
    from judges.suite import metric_order
    from stats.analysis import compute_all
    from tasks.reduce import load_hypotheses
    from pipelines.reporting.plots import BackgroundPlots, usable_cpus
    from pipelines.reporting.verdict import build_stats_summary

    frame = user_scores(scores, scale)
    hypotheses = load_hypotheses(hypotheses_path) if hypotheses_path is not None else None
    threads = min(MAX_TEST_THREADS, usable_cpus()) if in_parallel else 1
    owned = None
    if threads < 2:
        plots = None
    elif plots is None and len(frame) * b >= BACKGROUND_PLOTS_MIN_WORK:
        plots = owned = BackgroundPlots.start()
    with owned or nullcontext(), _map_tests(threads) as map_tests:
        background = _drawing_scores(plots, frame, metric_order())
        result = compute_all(frame, hypotheses, b=b, seed=seed, alpha=alpha, on_metric=on_metric,
                             metric_order=metric_order(), metric_suites={}, labels=labels,
                             map_tests=map_tests)
        if amend is not None:
            result = amend(result, frame)
        written = write_outputs(result, frame, out_dir, background)
    verdict = build_stats_summary(result, title, str(hypotheses_path) if hypotheses_path else None, sections)
    summary = Path(out_dir) / SUMMARY_FILE
    summary.write_text(verdict)
    return result, [*written, summary], verdict


def _drawing_scores(plots: BackgroundPlots | None, frame: pd.DataFrame,
                    metric_order: Sequence[str]) -> BackgroundPlots | None:
    """`plots` drawing the score plots of the cube compute_all will build; None where there is none."""
    if plots is None:
        return None
    try:
        cube = build_cube(frame, metric_order)
    except StatsInputError:  # compute_all says what is wrong, after its own checks
        return None
    plots.draw_scores(cube)
    return plots


@contextmanager
def _map_tests(threads: int) -> Iterator[Callable]:
    """compute_all's map_tests: `map`, or the map of a pool of `threads` threads."""
    if threads < 2:
        yield map
        return
    with ThreadPoolExecutor(threads) as pool:
        yield pool.map




def user_scores(scores: pd.DataFrame, scale: tuple[float, float] | None = None) -> pd.DataFrame:
    """Validated long-format scores on [0, 1] from the user's long or wide table (StatsInputError, one
    line, on anything else)."""
    from stats.scores import long_scores, rescale_scores

    frame = long_scores(scores)
    return validate_scores(rescale_scores(frame, *scale) if scale is not None else frame)
