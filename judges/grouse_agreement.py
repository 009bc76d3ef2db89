"""Agreement between two judges on the same samples (GroUSE paper, Table 4): Spearman correlation for the
Likert metrics, three-class (0, 1, null) macro F1 for the nullable binary metrics. Pure math, no I/O."""
from __future__ import annotations

import math
from collections.abc import Sequence

LIKERT_METRICS = ("answer_relevancy", "completeness")
BINARY_METRICS = ("usefulness", "faithfulness", "positive_acceptance", "negative_rejection")
NULL = "null"


def spearman(a: Sequence[float | None], b: Sequence[float | None]) -> dict:
    """Spearman's rho over the pairs where both judges gave a mark (nulls dropped pairwise)."""
    from scipy.stats import spearmanr

    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    n = len(pairs)
    if n < 2 or len({x for x, _ in pairs}) < 2 or len({y for _, y in pairs}) < 2:
        return {"spearman": None, "n": n, "note": "fewer than two pairs or a constant side"}
    rho = spearmanr([x for x, _ in pairs], [y for _, y in pairs]).statistic
    return {"spearman": None if math.isnan(rho) else float(rho), "n": n}


def _label(value: float | None) -> str:
    return NULL if value is None else str(int(value))


def macro_f1(a: Sequence[float | None], b: Sequence[float | None]) -> dict:
    """Three-class macro F1 with `a` as the reference labels; the classes averaged are those present in
    either side (as scikit-learn does by default). F1 of a class is 0 when it has no true positive."""
    truth = [_label(x) for x in a]
    pred = [_label(y) for y in b]
    if len(truth) != len(pred):
        raise ValueError("both judges must label the same samples")
    classes = sorted(set(truth) | set(pred))
    if not classes:
        return {"macro_f1": None, "n": 0, "per_class": {}}
    per_class = {}
    for cls in classes:
        tp = sum(t == cls and p == cls for t, p in zip(truth, pred))
        fp = sum(t != cls and p == cls for t, p in zip(truth, pred))
        fn = sum(t == cls and p != cls for t, p in zip(truth, pred))
        per_class[cls] = 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)
    return {"macro_f1": sum(per_class.values()) / len(classes), "n": len(truth), "per_class": per_class}


def agreement(a: dict[str, dict[str, float | None]], b: dict[str, dict[str, float | None]]) -> dict:
    """a, b: {sample_id: {metric: mark or None}}; None is a null mark, a missing key a mark the judge
    could not give (left out). Each metric is compared on the samples where both judges hold it."""
    shared = sorted(set(a) & set(b))
    result: dict = {"n_samples": len(shared)}
    for metric in LIKERT_METRICS + BINARY_METRICS:
        both = [s for s in shared if metric in a[s] and metric in b[s]]
        score = spearman if metric in LIKERT_METRICS else macro_f1
        result[metric] = score([a[s][metric] for s in both], [b[s][metric] for s in both])
    return result
