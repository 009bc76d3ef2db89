"""Agreement between two judges' meta-evaluation results (GroUSE paper, Table 4)."""
from __future__ import annotations

import json
from pathlib import Path

# Judge agreement (GroUSE paper, Table 4): Spearman on the 1-5 marks, macro F1 on the nullable 0/1 ones.
LIKERT_METRICS = ("answer_relevancy", "completeness")
BINARY_METRICS = ("usefulness", "faithfulness", "positive_acceptance", "negative_rejection")


def marks_by_test(results: dict) -> dict[str, dict[str, float | None]]:
    """{test_id: {metric: mark}} from a results.json; failed judgments are left out of the metric."""
    marks: dict[str, dict[str, float | None]] = {}
    for outcome in results.get("outcomes", []):
        marks[outcome["test_id"]] = {m: c["value"] for m, c in outcome["checks"].items()
                                     if c["status"] != "failed"}
    return marks


def agreement_between(path_a: Path, path_b: Path) -> dict:
    """Agreement of two judges' results.json (GroUSE paper, Table 4): Spearman on the Likert metrics,
    three-class macro F1 on the nullable binary ones."""
    from stats.agreement import agreement

    a = marks_by_test(json.loads(Path(path_a).read_text()))
    b = marks_by_test(json.loads(Path(path_b).read_text()))
    return agreement(a, b, LIKERT_METRICS, BINARY_METRICS).as_dict()
