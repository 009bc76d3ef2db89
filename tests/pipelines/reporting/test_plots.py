"""The one plot helper: a figure to draw on, saved as PNG and closed on leaving, closed on an error too;
the CCRS paper's Fig. 2 (each query's mean over the systems); the reduce stage's plots drawn in a second
process, the same files byte for byte."""
import shutil
import sys

import numpy as np
import pandas as pd
import pytest

from stats.analysis import compute_all
from stats.scores import build_cube, validate_scores
from pipelines.reporting import plots as plots_module
from pipelines.reporting.plots import (
    BackgroundPlots,
    figure_file,
    grid_file,
    listed_colormap,
    pyplot,
    query_mean_histograms,
    query_means,
    write_plots,
)
from tests.stats.conftest import make_scores


def test_figure_file_saves_a_png_and_closes_the_figure(tmp_path):
    path = tmp_path / "f.png"
    with figure_file(path, figsize=(2.0, 2.0)) as (figure, axis):
        axis.plot([0, 1], [1, 0])
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert figure.number not in pyplot().get_fignums()


def test_an_error_while_drawing_closes_the_figure_and_writes_nothing(tmp_path):
    path = tmp_path / "f.png"
    with pytest.raises(RuntimeError), figure_file(path) as (figure, _):
        raise RuntimeError("drawing failed")
    assert not path.exists() and figure.number not in pyplot().get_fignums()


def test_grid_file_hides_the_panels_it_does_not_need(tmp_path):
    with grid_file(tmp_path / "g.png", 4) as (_, axes):
        assert len(axes) == 6 and [axis.get_visible() for axis in axes] == [True] * 4 + [False] * 2
    assert listed_colormap(["red", "green"]).N == 2


def _cube():
    rows = [("q1", "A", "CC", 0.2), ("q1", "B", "CC", 0.6), ("q1", "C", "CC", 1.0),
            ("q2", "A", "CC", 0.0), ("q2", "B", "CC", 0.3), ("q2", "C", "CC", 0.0),
            ("q3", "A", "CC", 0.5), ("q3", "B", "CC", 0.5),  # C has no CC score for q3: left out
            ("q1", "A", "QR", 1.0), ("q1", "B", "QR", 1.0), ("q1", "C", "QR", 1.0)]
    return build_cube(validate_scores(pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"])),
                      ["CC", "QR"])


def test_fig2_is_each_complete_query_mean_over_the_systems(tmp_path):
    cube = _cube()
    np.testing.assert_allclose(query_means(cube, "CC"), [0.6, 0.1])  # (0.2+0.6+1)/3, (0+0.3+0)/3
    np.testing.assert_allclose(query_means(cube, "QR"), [1.0])
    path = query_mean_histograms(cube, tmp_path / "query_means.png")
    assert path.read_bytes()[:4] == b"\x89PNG" and not pyplot().get_fignums()


def test_background_plots_are_write_plots_files_byte_for_byte(tmp_path):
    cube = build_cube(validate_scores(make_scores(n_queries=12)), ["CC", "QR"])
    result = compute_all(make_scores(n_queries=12), b=50)
    here = write_plots(result, cube, tmp_path / "here")
    with BackgroundPlots() as background:
        background.draw_scores(cube)
        background.add_result(result)
        there = background.write(tmp_path / "there")
    assert [path.name for path in there] == [path.name for path in here] == [
        "boxplots.png", "histograms.png", "query_means.png", "asl_curves.png", "correlations.png"]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(here, there))


def test_background_plots_write_nothing_when_the_statistics_fail(tmp_path):
    with pytest.raises(RuntimeError), BackgroundPlots() as background:
        background.draw_scores(_cube())
        raise RuntimeError("the statistics failed")
    assert not tmp_path.joinpath("plots").exists() and not list(tmp_path.iterdir())


def test_background_plots_are_drawn_here_with_a_warning_when_the_process_fails(tmp_path, monkeypatch):
    cube = build_cube(validate_scores(make_scores(n_queries=12)), ["CC", "QR"])
    result = compute_all(make_scores(n_queries=12), b=50)
    monkeypatch.setattr(sys, "executable", shutil.which("false"))  # a process that exits at once
    with BackgroundPlots() as background:
        background.draw_scores(cube)
        background.add_result(result)
        with pytest.warns(RuntimeWarning, match="plot process failed"):
            written = background.write(tmp_path / "plots")
    here = write_plots(result, cube, tmp_path / "here")
    assert [path.read_bytes() for path in written] == [path.read_bytes() for path in here]


def test_a_plot_process_is_started_first_only_where_it_saves_time(monkeypatch):
    """Two CPUs and matplotlib not yet imported (a fresh `ccrs stats`); here pyplot is imported."""
    monkeypatch.setattr(plots_module, "usable_cpus", lambda: 2)
    assert pyplot() and BackgroundPlots.for_a_fresh_process().__enter__() is None
    monkeypatch.delitem(sys.modules, "matplotlib.pyplot")  # put back when the test ends
    with BackgroundPlots.for_a_fresh_process() as plots:
        assert isinstance(plots, BackgroundPlots)
    monkeypatch.setattr(plots_module, "usable_cpus", lambda: 1)
    assert BackgroundPlots.for_a_fresh_process().__enter__() is None
