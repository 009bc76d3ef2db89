"""The one plot helper: a figure to draw on, saved as PNG and closed on leaving, closed on an error too."""
import pytest

from tasks.plots import figure_file, grid_file, listed_colormap, pyplot


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
