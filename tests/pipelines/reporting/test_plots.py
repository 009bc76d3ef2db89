"""The one plot helper: a figure to draw on, saved as PNG and closed on leaving, closed on an error too;
the CCRS paper's Fig. 2 (each query's mean over the systems)."""
import numpy as np
import pandas as pd
import pytest

from stats.scores import build_cube, validate_scores
from pipelines.reporting.plots import (
    figure_file,
    grid_file,
    listed_colormap,
    pyplot,
    query_mean_histograms,
    query_means,
)


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
