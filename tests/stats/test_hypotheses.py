from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from stats.errors import StatsInputError
from stats.hsd import HSDResult
from stats.hypotheses import HypothesisSet, evaluate_hypotheses, load_hypotheses

PAPER_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "hypotheses" / "paper-h1-h3.yaml"


def hsd_result(means, p_values) -> HSDResult:
    means = np.asarray(means, dtype=float)
    p = np.asarray(p_values, dtype=float)
    return HSDResult(means=means, diffs=means[:, None] - means[None, :], p_values=p, n_queries=10, b=100)


def test_paper_config_loads_as_stated():
    hypotheses = {h.name: h for h in load_hypotheses(PAPER_CONFIG).hypotheses}
    assert set(hypotheses) == {"H1", "H2", "H3"}
    assert hypotheses["H1"].pairs == (("A", "C"), ("A", "E"), ("B", "D"), ("B", "F"))
    assert hypotheses["H1"].metrics == ("CC", "QR", "ID", "AC", "IR")
    assert (hypotheses["H1"].direction, hypotheses["H1"].combine) == ("greater", "all")
    assert hypotheses["H2"].pairs == (("D", "C"), ("F", "E")) and hypotheses["H2"].metrics == ("QR", "IR")
    assert (hypotheses["H3"].direction, hypotheses["H3"].combine) == ("two-sided", "any")
    assert hypotheses["H3"].pairs == (("C", "E"), ("D", "F"))


def write(tmp_path, text) -> Path:
    path = tmp_path / "h.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text",
    [
        "hypotheses:\n  - {name: H1, pairs: [[A, B]], metrics: [CC], colour: red}\n",  # unknown key
        "hypotheses:\n  - {name: H1, pairs: [[A, A]], metrics: [CC]}\n",
        "hypotheses:\n  - {name: H1, pairs: [[A, B]], metrics: [CC], direction: up}\n",
        "hypotheses:\n  - {name: H1, pairs: [[A, B]], metrics: [CC]}\n"
        "  - {name: H1, pairs: [[A, B]], metrics: [QR]}\n",
        "hypotheses: [\n",
        "[]\n",
    ],
)
def test_bad_hypotheses_file_is_a_clear_error(tmp_path, text):
    with pytest.raises(StatsInputError, match="hypotheses file"):
        load_hypotheses(write(tmp_path, text))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(StatsInputError, match="cannot read"):
        load_hypotheses(tmp_path / "absent.yaml")


def test_unknown_system_is_named():
    hypotheses = HypothesisSet.model_validate(
        {"hypotheses": [{"name": "H", "pairs": [["A", "Z"]], "metrics": ["M"]}]}
    )
    with pytest.raises(StatsInputError, match=r"unknown system\(s\) \['Z'\]"):
        evaluate_hypotheses(hypotheses, {"M": hsd_result([0.5, 0.4], np.ones((2, 2)))}, ["A", "B"], 0.05)


def test_combination_and_holm_by_hand():
    systems = ["A", "B", "C"]
    p_m1 = np.array([[1, 0.02, 0.30], [0.02, 1, 0.004], [0.30, 0.004, 1]])
    p_m2 = np.array([[1, 0.01, 0.50], [0.01, 1, 0.20], [0.50, 0.20, 1]])
    by_metric = {"m1": hsd_result([0.8, 0.5, 0.6], p_m1), "m2": hsd_result([0.7, 0.6, 0.4], p_m2)}
    hypotheses = HypothesisSet.model_validate(
        {
            "hypotheses": [
                # A > B on m1 and m2: one-sided p = 0.01 and 0.005 -> all-of = 0.01
                {"name": "all", "pairs": [["A", "B"]], "metrics": ["m1", "m2"], "direction": "greater"},
                # B vs C two-sided, any-of: min(0.004, 0.2) * 2 metrics = 0.008
                {"name": "any", "pairs": [["B", "C"]], "metrics": ["m1", "m2"], "combine": "any"},
                # C < A on m1 (diff -0.2 agrees): 0.30 / 2 = 0.15
                {"name": "less", "pairs": [["C", "A"]], "metrics": ["m1"], "direction": "less"},
            ]
        }
    )
    result = evaluate_hypotheses(hypotheses, by_metric, systems, alpha=0.05)
    raw = [result[name].raw_p for name in ("all", "any", "less")]
    assert raw == pytest.approx([0.01, 0.008, 0.15])
    adjusted = [result[name].adjusted_p for name in ("all", "any", "less")]
    assert adjusted == pytest.approx(list(multipletests(raw, method="holm")[1]))
    # sorted: 0.008 * 3 = 0.024; 0.01 * 2 = 0.02 -> 0.024 (monotone); 0.15 * 1
    assert adjusted == pytest.approx([0.024, 0.024, 0.15])
    assert [result[name].significant for name in ("all", "any", "less")] == [True, True, False]


def test_wrong_direction_never_supports_a_hypothesis():
    by_metric = {"m": hsd_result([0.2, 0.9], np.array([[1, 0.001], [0.001, 1]]))}
    hypotheses = HypothesisSet.model_validate(
        {"hypotheses": [{"name": "H", "pairs": [["A", "B"]], "metrics": ["m"], "direction": "greater"}]}
    )
    result = evaluate_hypotheses(hypotheses, by_metric, ["A", "B"], 0.05)["H"]
    assert result.raw_p == pytest.approx(0.9995) and not result.significant
