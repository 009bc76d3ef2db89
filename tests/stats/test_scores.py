import numpy as np
import pandas as pd
import pytest

from stats.errors import StatsInputError
from stats.scores import build_cube, long_scores, validate_scores


def repeated(repeats) -> pd.DataFrame:
    return pd.DataFrame({"query_id": ["q1"] * 4 + ["q2"] * 4, "system": ["A", "A", "B", "B"] * 2,
                         "metric": "CC", "score": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
                         "repeat": repeats})


def test_a_repeat_column_is_kept_as_integers_and_averaged_in_the_cube():
    frame = validate_scores(repeated(["0", "1"] * 4))  # CSV reads it as text
    assert frame["repeat"].dtype == np.int64 and list(frame.columns)[-1] == "repeat"
    cube = build_cube(frame)
    assert cube.values[:, :, 0] == pytest.approx(np.array([[0.15, 0.35], [0.55, 0.75]]))
    assert cube.repeat_labels == ((0, 1),) and cube.n_repeats("CC") == 2
    assert cube.metric_repeats("CC")[0, 1].tolist() == [0.3, 0.4]


def test_a_cell_lacking_a_repeat_is_missing_in_the_averaged_cube():
    frame = repeated([0, 1] * 4)
    frame.loc[7, "score"] = np.nan  # a failed judgment
    cube = build_cube(validate_scores(frame))
    assert np.isnan(cube.values[1, 1, 0]) and cube.values[1, 0, 0] == pytest.approx(0.55)


def test_one_repeat_label_leaves_the_scores_as_they_are():
    frame = repeated([7] * 8).drop_duplicates(["query_id", "system"])
    cube = build_cube(validate_scores(frame))
    plain = build_cube(validate_scores(frame.drop(columns=["repeat"])))
    assert np.array_equal(cube.values, plain.values) and cube.n_repeats("CC") == 1
    assert plain.repeats is None and plain.n_repeats("CC") == 1


@pytest.mark.parametrize("bad", [1.5, "", None, "first", True])
def test_a_repeat_that_is_no_integer_is_one_clear_error(bad):
    frame = repeated([0, 1] * 4).astype({"repeat": object})
    frame.loc[3, "repeat"] = bad
    with pytest.raises(StatsInputError, match=r"repeat must be an integer .* row\(s\) 3"):
        validate_scores(frame)


def test_duplicates_are_checked_on_query_system_metric_and_repeat():
    with pytest.raises(StatsInputError, match=r"duplicate \(query_id, system, metric, repeat\) rows: 8 rows, "
                                              r"e\.g\. \(q1, A, CC, 0\)"):
        validate_scores(repeated([0] * 8))


def test_a_wide_table_keeps_its_repeat_column_as_a_key():
    wide = pd.DataFrame({"id": ["q1", "q1"], "system": ["A", "A"], "repeat": [0, 1], "CC": [0.2, 0.4]})
    long = long_scores(wide)
    assert sorted(long["metric"].unique()) == ["CC"] and long["repeat"].tolist() == [0, 1]
