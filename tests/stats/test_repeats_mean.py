import numpy as np
import pandas as pd

from stats.scores import mean_over_repeats


def test_the_mean_over_repeats_leaves_failed_repeats_out_and_unrepeated_scores_as_they_are():
    frame = pd.DataFrame({"query_id": ["q1"] * 3 + ["q2"] * 3, "system": "A", "metric": "CC",
                          "score": [0.2, 0.4, np.nan, np.nan, np.nan, np.nan], "repeat": [0, 1, 2] * 2})
    means = mean_over_repeats(frame)
    assert list(means.columns) == ["query_id", "system", "metric", "score"]
    assert means["score"].iloc[0] == 0.30000000000000004 and np.isnan(means["score"].iloc[1])
    once = frame.drop(columns="repeat").head(1)
    assert mean_over_repeats(once) is once
