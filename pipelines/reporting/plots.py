"""PNG plots: the one matplotlib set-up and save (`figure_file`, used by every plot of the project), and
the reduce stage's plots of a stats.json result: box plots, histograms, the CCRS paper's Fig. 2 (each
query's mean over the systems), ASL curves, correlation heatmaps (plus the power plan's curves).

matplotlib (Agg backend) is imported on first use so that importing this module stays light.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from stats.scores import ScoreCube


QUERY_MEANS_PLOT = "query_means.png"  # the CCRS paper's Fig. 2
QUERY_MEAN_BINS = 20  # bins of width 0.05 on [0, 1] (the paper does not state its bins)


def write_plots(result: dict, cube: ScoreCube, plot_dir: Path) -> list[Path]:
    plot_dir.mkdir(parents=True, exist_ok=True)
    return [
        boxplots(cube, plot_dir / "boxplots.png"),
        histograms(cube, plot_dir / "histograms.png"),
        query_mean_histograms(cube, plot_dir / QUERY_MEANS_PLOT),
        asl_curves(result, plot_dir / "asl_curves.png"),
        correlation_heatmaps(result, plot_dir / "correlations.png"),
    ]


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def figure_file(path: Path, *, dpi: int = 100, tight_layout: bool = True, bbox_inches: str | None = None,
                **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """(figure, axes) of `pyplot().subplots(**subplots)` to draw on; on leaving the block the figure is laid
    out (tight_layout), saved to `path` (PNG at `dpi`) and closed, closed on an error too."""
    plt = pyplot()
    figure, axes = plt.subplots(**subplots)
    try:
        yield figure, axes
        if tight_layout:
            figure.tight_layout()
        figure.savefig(path, dpi=dpi, bbox_inches=bbox_inches)
    finally:
        plt.close(figure)


@contextmanager
def grid_file(path: Path, n_panels: int,
              panel_size: tuple[float, float] = (4.0, 3.2)) -> Iterator[tuple[Any, Any]]:
    """`figure_file` with n_panels panels, 3 to a row (the unused ones hidden); yields the flat axes."""
    columns = min(3, n_panels)
    rows = math.ceil(n_panels / columns)
    figsize = (panel_size[0] * columns, panel_size[1] * rows)
    with figure_file(path, nrows=rows, ncols=columns, figsize=figsize, squeeze=False) as (figure, axes):
        for axis in axes.ravel()[n_panels:]:
            axis.set_visible(False)
        yield figure, axes.ravel()


def listed_colormap(colors: Sequence[str]):
    """A colormap of these colors, one per integer code (for `imshow` of category codes)."""
    from matplotlib.colors import ListedColormap

    return ListedColormap(list(colors))


def _complete_rows(cube: ScoreCube, metric: str) -> np.ndarray:
    matrix = cube.metric_matrix(metric)
    return matrix[np.isfinite(matrix).all(axis=1)]


def boxplots(cube: ScoreCube, path: Path) -> Path:
    """One panel per metric, systems sorted by median score (paired queries only)."""
    with grid_file(path, len(cube.metrics)) as (_, axes):
        for axis, metric in zip(axes, cube.metrics):
            used = _complete_rows(cube, metric)
            axis.set_title(f"{metric} (n={len(used)})")
            if len(used) == 0:
                continue
            order = np.argsort(np.median(used, axis=0), kind="stable")
            axis.boxplot([used[:, s] for s in order], showmeans=True)
            axis.set_xticks(range(1, len(order) + 1), [cube.systems[s] for s in order], rotation=45,
                            ha="right")
            axis.set_ylim(-0.05, 1.05)
    return path


def histograms(cube: ScoreCube, path: Path) -> Path:
    """One panel per metric: each system's score histogram as a step line."""
    with grid_file(path, len(cube.metrics)) as (_, axes):
        bins = np.linspace(0.0, 1.0, 21)
        for axis, metric in zip(axes, cube.metrics):
            used = _complete_rows(cube, metric)
            axis.set_title(metric)
            for s, system in enumerate(cube.systems):
                if len(used):
                    axis.hist(used[:, s], bins=bins, histtype="step", label=system)
            axis.set_xlabel("score")
            axis.set_ylabel("queries")
        axes[0].legend(fontsize="small")
    return path


def query_means(cube: ScoreCube, metric: str) -> np.ndarray:
    """Each query's mean score over the systems, for the queries every system has (the HSD's queries)."""
    return _complete_rows(cube, metric).mean(axis=1)


def query_mean_histograms(cube: ScoreCube, path: Path) -> Path:
    """The CCRS paper's Fig. 2: one panel per metric, the histogram of `query_means` on [0, 1]."""
    bins = np.linspace(0.0, 1.0, QUERY_MEAN_BINS + 1)
    with grid_file(path, len(cube.metrics)) as (_, axes):
        for index, (axis, metric) in enumerate(zip(axes, cube.metrics)):
            means = query_means(cube, metric)
            axis.hist(means, bins=bins)
            over = f"mean of {len(cube.systems)} systems" if len(cube.systems) > 1 else cube.systems[0]
            axis.set_title(f"({_panel_letter(index)}) {metric}: {over} (N={len(means)})", fontsize="small")
            axis.set_xlim(0.0, 1.0)
            axis.set_xlabel("mean score per query")
            axis.set_ylabel("queries")
    return path


def _panel_letter(index: int) -> str:
    return chr(ord("a") + index) if index < 26 else str(index + 1)


def asl_curves(result: dict, path: Path) -> Path:
    """Sakai's ASL curves: each metric's pairwise p-values sorted, against their rank."""
    with figure_file(path, figsize=(6.0, 4.0)) as (_, axis):
        for metric, entry in result["per_metric"].items():
            p_values = sorted(pair["p_value"] for pair in entry["pairwise"] if pair["p_value"] is not None)
            if p_values:
                axis.plot(range(1, len(p_values) + 1), p_values, marker="o", markersize=3, label=metric)
        axis.axhline(result["alpha"], color="grey", linestyle="--", linewidth=1,
                     label=f"alpha={result['alpha']}")
        axis.set_xlabel("system pairs sorted by p-value")
        axis.set_ylabel("achieved significance level (p-value)")
        axis.legend(fontsize="small")
    return path


def correlation_heatmaps(result: dict, path: Path) -> Path:
    """Fisher-z averaged metric x metric correlations, one panel per method."""
    metrics = result["metrics"]
    methods = list(result["correlations"])
    with figure_file(path, nrows=1, ncols=len(methods), figsize=(4.2 * len(methods), 3.8),
                     squeeze=False) as (figure, axes):
        for axis, method in zip(axes.ravel(), methods):
            matrix = np.array(
                [
                    [np.nan if r is None else r for r in row]
                    for row in result["correlations"][method]["fisher_z_mean"]
                ],
                dtype=float,
            )
            image = axis.imshow(matrix, vmin=-1.0, vmax=1.0, cmap="coolwarm")
            axis.set_xticks(range(len(metrics)), metrics, rotation=45, ha="right")
            axis.set_yticks(range(len(metrics)), metrics)
            for (i, j), value in np.ndenumerate(matrix):
                if np.isfinite(value):
                    axis.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7)
            axis.set_title(f"{method} (Fisher-z mean)")
            figure.colorbar(image, ax=axis, fraction=0.046)
    return path


def power_curves(plan: dict, path: Path) -> Path:
    """One panel per metric: parametric HSD power against the number of questions for each requirement,
    the simulated power at the recommended n as a marker, the target as a dashed line."""
    per_metric = plan["per_metric"]
    with grid_file(path, max(1, len(per_metric))) as (_, axes):
        for axis, (metric, entry) in zip(axes, per_metric.items()):
            for name, requirement in entry["requirements"].items():
                curve = requirement["curve"]
                line = axis.plot(curve["n"], curve["power"], label=name)[0]
                simulated = requirement["simulated_power"]
                if simulated is not None:
                    axis.plot([requirement["n_questions"]], [simulated], marker="o", color=line.get_color())
            if not entry["requirements"]:
                axis.text(0.5, 0.5, "no variance in the pilot", ha="center", transform=axis.transAxes)
            axis.axhline(plan["power"], color="grey", linestyle="--", linewidth=1)
            axis.set_title(f"{metric} (delta={plan['delta']}, pilot n={entry['n_pilot']})")
            axis.set_xlabel("questions")
            axis.set_ylabel("power")
            axis.set_ylim(0.0, 1.02)
            if entry["requirements"]:
                axis.legend(fontsize="small")
    return path
