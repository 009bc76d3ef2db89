"""PNG plots: the one matplotlib set-up and save (`figure_file`, used by every plot of the project), and
the reduce stage's plots of a stats.json result: box plots, histograms, the CCRS paper's Fig. 2 (each
query's mean over the systems), ASL curves, correlation heatmaps (plus the power plan's curves).

matplotlib (Agg backend) is imported on first use so that importing this module stays light.
`BackgroundPlots` draws the reduce stage's plots in a second process while the statistics are computed.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from stats.scores import ScoreCube


QUERY_MEANS_PLOT = "query_means.png"  # the CCRS paper's Fig. 2
QUERY_MEAN_BINS = 20  # bins of width 0.05 on [0, 1] (the paper does not state its bins)

Target = Path | IO[bytes]  # where a figure goes: a file, or a buffer (BackgroundPlots)


def score_plots() -> dict[str, Callable[[ScoreCube, Target], Target]]:
    """The reduce stage's plots of the scores alone, by file name (they need no statistic)."""
    return {"boxplots.png": boxplots, "histograms.png": histograms, QUERY_MEANS_PLOT: query_mean_histograms}


def result_plots() -> dict[str, Callable[[dict, Target], Target]]:
    """The reduce stage's plots of the stats.json result, by file name."""
    return {"asl_curves.png": asl_curves, "correlations.png": correlation_heatmaps}


def write_plots(result: dict, cube: ScoreCube, plot_dir: Path) -> list[Path]:
    plot_dir.mkdir(parents=True, exist_ok=True)
    return [*(draw(cube, plot_dir / name) for name, draw in score_plots().items()),
            *(draw(result, plot_dir / name) for name, draw in result_plots().items())]


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def figure_file(path: Target, *, dpi: int = 100, tight_layout: bool = True, bbox_inches: str | None = None,
                **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """(figure, axes) of `pyplot().subplots(**subplots)` to draw on; on leaving the block the figure is laid
    out (tight_layout), saved to `path` (PNG at `dpi`; a file, or a binary buffer) and closed, closed on an
    error too."""
    plt = pyplot()
    figure, axes = plt.subplots(**subplots)
    try:
        yield figure, axes
        if tight_layout:
            figure.tight_layout()
        buffer = not isinstance(path, (str, os.PathLike))
        figure.savefig(path, dpi=dpi, bbox_inches=bbox_inches, format="png" if buffer else None)
    finally:
        plt.close(figure)


@contextmanager
def grid_file(path: Target, n_panels: int,
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


def boxplots(cube: ScoreCube, path: Target) -> Target:
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


def histograms(cube: ScoreCube, path: Target) -> Target:
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


def query_mean_histograms(cube: ScoreCube, path: Target) -> Target:
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


def asl_curves(result: dict, path: Target) -> Target:
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


def correlation_heatmaps(result: dict, path: Target) -> Target:
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


# --- the reduce stage's plots drawn in a second process


def png_bytes(kind: str, data: Any) -> dict[str, bytes]:
    """The PNG of every plot of `kind` ("score": of a ScoreCube, "result": of a stats.json result), by file
    name: the bytes write_plots writes."""
    plots = score_plots() if kind == "score" else result_plots()
    pngs = {}
    for name, draw in plots.items():
        buffer = io.BytesIO()
        draw(data, buffer)
        pngs[name] = buffer.getvalue()
    return pngs


def serve_plots() -> None:
    """The process behind BackgroundPlots: pickled (kind, data) jobs in on stdin, each answered on stdout
    with ("ok", png_bytes(kind, data)) or ("error", message), until stdin closes."""
    import stats.scores  # noqa: F401 - the cube's class (and pandas), ready before the first job comes

    jobs, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the replies
    pyplot()
    while True:
        try:
            kind, data = pickle.load(jobs)
        except EOFError:
            return
        try:
            reply = ("ok", png_bytes(kind, data))
        except Exception as error:  # noqa: BLE001 - said to the parent, which draws the plots itself
            reply = ("error", f"{type(error).__name__}: {error}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class BackgroundPlots:
    """write_plots in a second process, drawn while this one computes the statistics: started first (it
    imports matplotlib meanwhile), the score plots once `draw_scores` gives the cube, the result plots once
    `add_result` gives the result. `write` writes the same files, byte for byte, as write_plots; nothing
    is written before it, so statistics that fail leave no plot behind. Should the process fail, `write`
    draws the plots here (with a warning).

    A process of its own (`python -c`, not multiprocessing): nothing of the caller's __main__ is run again
    there, and none of its threads is copied half-way. Use as a context manager; leaving it ends the
    process."""

    def __init__(self):
        self._cube, self._result, self._sender = None, None, None
        self._pngs: dict[str, bytes] = {}
        self._failure: str | None = None
        source = str(Path(__file__).resolve().parents[2])  # this code, wherever the interpreter finds ccrs
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
            path for path in (source, os.environ.get("PYTHONPATH")) if path)}
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from pipelines.reporting.plots import serve_plots; serve_plots()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment)

    @classmethod
    def for_a_fresh_process(cls) -> AbstractContextManager[BackgroundPlots | None]:
        """A BackgroundPlots to start before the rest of a command is imported, where it saves time: two or
        more CPUs, and matplotlib not imported yet (drawing here would import it first, about 0.5 s); else
        None (the plots are drawn here)."""
        if usable_cpus() < 2 or "matplotlib.pyplot" in sys.modules:
            return nullcontext()
        return cls.start() or nullcontext()

    @classmethod
    def start(cls) -> BackgroundPlots | None:
        """A started BackgroundPlots; None where no process can be had (the plots are drawn here)."""
        try:
            return cls()
        except OSError:
            return None

    def draw_scores(self, cube: ScoreCube) -> None:
        """Start the score plots."""
        self._cube = cube
        self._send(("score", cube))

    def add_result(self, result: dict) -> None:
        """Start the result plots (the score plots' PNGs are taken first: the process answers in turn)."""
        self._result = result
        self._receive()
        if self._failure is None:
            self._send(("result", result))

    def write(self, plot_dir: Path) -> list[Path]:
        """The plots' files in plot_dir, in write_plots' order."""
        self._receive()
        if self._failure is not None:
            warnings.warn(f"the plot process failed ({self._failure}); plots drawn here", RuntimeWarning,
                          stacklevel=2)
            return write_plots(self._result, self._cube, plot_dir)
        plot_dir.mkdir(parents=True, exist_ok=True)
        paths = [plot_dir / name for name in [*score_plots(), *result_plots()]]
        for path in paths:
            path.write_bytes(self._pngs[path.name])
        return paths

    def _send(self, job: tuple[str, Any]) -> None:
        """Pickle the job into the process from a thread: the pipe holds 64 KiB, and the process reads only
        once it has imported matplotlib."""
        if self._sender is not None:
            self._sender.join()
        self._sender = threading.Thread(target=self._write_job, args=(job,), daemon=True)
        self._sender.start()

    def _write_job(self, job: tuple[str, Any]) -> None:
        try:
            pickle.dump(job, self._process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._process.stdin.flush()
        except (OSError, ValueError):  # the process is gone: _receive says so
            pass

    def _receive(self) -> None:
        if self._failure is not None:
            return
        try:
            status, payload = pickle.load(self._process.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as error:
            status, payload = "error", f"it stopped ({type(error).__name__}, exit {self._process.poll()})"
        if status == "ok":
            self._pngs.update(payload)
        else:
            self._failure = payload

    def __enter__(self) -> BackgroundPlots:
        return self

    def __exit__(self, *_) -> None:
        self._process.kill()  # its answers are read or no longer wanted; its interpreter's teardown is ~0.2 s
        self._process.wait()
        if self._sender is not None:
            self._sender.join()
        for pipe in (self._process.stdin, self._process.stdout):
            try:
                pipe.close()
            except OSError:  # the unsent rest of a job
                pass
