"""How far the annotators agree: Krippendorff's alpha of each labeled metric (`ccrs label --agreement`,
and on the page once two annotators labeled)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from pipelines.tools.labeling.files import read_jsonl
from tasks.runtime.layout import RunLayout

ALPHA_LEVEL = "interval"


def annotator_agreement(records: Iterable[dict], metric: str) -> dict[str, Any]:
    """Krippendorff's alpha (interval, on the raw marks) of the metric's annotators over the answers
    labeled by two or more of them (an annotator's last mark of an answer counts)."""
    from stats.agreement import krippendorff_alpha

    last: dict[tuple[str, str], dict[str, float]] = {}
    for record in records:
        if record.get("metric") == metric:
            unit = (str(record["question_id"]), str(record["system"]))
            last.setdefault(unit, {})[str(record.get("annotator") or "")] = float(record["label"])
    annotators = sorted({name for marks in last.values() for name in marks})
    matrix = np.array([[marks.get(name, np.nan) for name in annotators] for marks in last.values()],
                      dtype=float).reshape(len(last), len(annotators))
    alpha = krippendorff_alpha(matrix, ALPHA_LEVEL)
    return {"metric": metric, "annotators": annotators, "answers_by_2plus": alpha.n_units, **alpha.as_dict()}


def agreement_rows(layout: RunLayout) -> list[dict[str, Any]]:
    """`ccrs label --agreement`: one row per labeled metric."""
    records, _ = read_jsonl(layout.labels_file)
    metrics = dict.fromkeys(str(record.get("metric")) for record in records)
    return [annotator_agreement(records, metric) for metric in metrics]


