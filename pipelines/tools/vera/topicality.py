"""`ccrs vera topicality` (VERA sections 3.4 and 5.2): N query sets of a declared topicality, most topical
first, through the run's own retrievers; their answers judged with the VERA suite (or, our cosine method,
the retrievers' hit scores), and the sets compared per retriever and metric.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from retrievers.config import DatasetConfig
from pipelines.resources import RESOURCE_ROOT
from pipelines.tools.vera.query_sets import Ask, compare_sets_from_scores, set_order
from pipelines.tools.vera.scoring import Size, sample_size_fields

DEFAULT_NEGATIVE = RESOURCE_ROOT / "configs" / "vera" / "offtopic-queries.yaml"
# The paper's three query sets (section 5.2, Table 3) for the BioASQ sample repository, most topical first.
DEFAULT_SETS = RESOURCE_ROOT / "configs" / "vera" / "topicality-sets.yaml"
COSINE_METRIC = "mean_hit_cosine"


class QuerySetSpec(BaseModel):
    """One query set of configs/vera/topicality-sets.yaml: its queries come from exactly one source."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    topic: str = Field(default="", description="what the set is, in words (reported)")
    run_dataset: bool = Field(default=False, description="the run config's dataset questions")
    dataset: str | None = Field(default=None, description="BioASQ JSON / rag-mini-bioasq path")
    queries: str | None = Field(default=None, description="YAML list of query strings (no ground truth)")
    answers: str | None = Field(default=None, description="with `queries`: a JSON or YAML file whose "
                                "`answers` maps each query string to its reference answer (ground truth: "
                                "retrieval recall)")

    @model_validator(mode="after")
    def _one_source(self) -> QuerySetSpec:
        given = [k for k in ("run_dataset", "dataset", "queries") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"query set {self.name!r}: give exactly one of run_dataset, dataset, queries "
                             f"(got {given or 'none'})")
        if self.answers and not self.queries:
            raise ValueError(f"query set {self.name!r}: answers go with queries (a dataset has its own)")
        return self


class QuerySetsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sets: list[QuerySetSpec] = Field(min_length=2, description="most to least topical")

    @model_validator(mode="after")
    def _unique_names(self) -> QuerySetsFile:
        names = [s.name for s in self.sets]
        if len(set(names)) != len(names):
            raise ValueError(f"query set names must be unique, got {names}")
        return self


@dataclass(frozen=True)
class QuerySet:
    name: str
    topic: str
    source: str
    texts: tuple[str, ...]
    ground_truths: tuple[str, ...]  # "" where the query has none


def load_query_sets(path: str | Path, run_dataset: DatasetConfig, limit: int | None = None) -> list[QuerySet]:
    """The sets of a sets file, in its order; each capped at `limit` queries (its first ones)."""
    path = Path(path)
    try:
        spec = QuerySetsFile.model_validate(yaml.safe_load(path.read_text()) or {})
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    except ValidationError as exc:
        raise ValueError(f"{path}: invalid query sets:\n{exc}") from None
    return [_query_set(s, path.parent, run_dataset, limit) for s in spec.sets]


def _query_set(spec: QuerySetSpec, base: Path, run_dataset: DatasetConfig, limit: int | None) -> QuerySet:
    from retrievers.loaders import load_dataset

    if spec.queries:
        texts = load_negative_queries(base / spec.queries)[:limit]
        truths = (load_reference_answers(base / spec.answers, load_negative_queries(base / spec.queries))
                  if spec.answers else {})
        return QuerySet(spec.name, spec.topic, str(base / spec.queries), tuple(texts),
                        tuple(truths.get(text, "") for text in texts))
    dataset = run_dataset if spec.run_dataset else DatasetConfig(path=str(base / spec.dataset))
    queries = load_dataset(dataset).queries
    cap = min(x for x in (limit, dataset.limit if spec.run_dataset else None, queries.num_rows)
              if x is not None)
    texts = queries.column("text").to_pylist()[:cap]
    truths = [str(t or "") for t in queries.column("answer").to_pylist()[:cap]]
    return QuerySet(spec.name, spec.topic, dataset.path, tuple(texts), tuple(truths))


def load_negative_queries(path: str | Path = DEFAULT_NEGATIVE) -> list[str]:
    data = yaml.safe_load(Path(path).read_text())
    queries = data["queries"] if isinstance(data, dict) else data
    if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
        raise ValueError(f"{path}: expected a non-empty list of query strings under 'queries'")
    return list(queries)


def load_reference_answers(path: Path, queries: list[str]) -> dict[str, str]:
    """{query: reference answer} of an answers file; every query of the set answered, no other query."""
    data = yaml.safe_load(path.read_text()) or {}
    answers = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(answers, dict) or not all(isinstance(a, str) and a.strip() for a in answers.values()):
        raise ValueError(f"{path}: expected a mapping of query to non-empty answer under 'answers'")
    unanswered, unknown = sorted(set(queries) - set(answers)), sorted(set(answers) - set(queries))
    if unanswered or unknown:
        raise ValueError(f"{path}: answers do not match the set's queries (no answer: {unanswered}; "
                         f"not a query of the set: {unknown})")
    return {query: answers[query].strip() for query in queries}


Hits = dict[str, list[list]]  # retriever name -> per query its top-k hits (retrievers.types.Hit)


def run_retriever_hits(config, run_dir: str | Path, texts: list[str], k: int, progress: bool = False) -> Hits:
    """The query texts through the run config's own retrievers (its dataset as the repository, its
    chunking, embedder, index backend and retrieval methods; tasks.retrieval_stages.retrieve_texts), the
    index stages of `run_dir` reused when the run built them."""
    from retrievers.config import RetrievalSpec
    from tasks.retrieval_stages import retrieve_texts

    return retrieve_texts(Path(run_dir), RetrievalSpec.of(config), texts, k, progress)


def topicality_asks(sets: list[QuerySet], hits: Hits) -> list[Ask]:
    """One ask per (retriever, query): its top-k hits as the passages; query ids "<set>/<i>"."""
    queries = [(qs.name, i, text, truth) for qs in sets
               for i, (text, truth) in enumerate(zip(qs.texts, qs.ground_truths))]
    asks = []
    for retriever, rows in hits.items():
        if len(rows) != len(queries):
            raise ValueError(f"retriever {retriever}: {len(rows)} hit lists for {len(queries)} queries")
        asks += [Ask(f"{name}/{i}", name, retriever, text, truth, tuple(h.text for h in row),
                     tuple(h.chunk_id for h in row))
                 for (name, i, text, truth), row in zip(queries, rows)]
    return asks


def hit_score_frame(sets: list[QuerySet], hits: Hits) -> pd.DataFrame:
    """The cosine method (ours, no LLM): per (dense retriever, query) the mean score of its top-k hits
    (the cosine of normalized embeddings), in the judged scores' long format (metric COSINE_METRIC)."""
    names = [(qs.name, i) for qs in sets for i in range(len(qs.texts))]
    order = {qs.name: i for i, qs in enumerate(sets)}
    rows = [{"query_id": f"{name}/{i}", "query_set": name, "set_order": order[name], "system": retriever,
             "metric": COSINE_METRIC, "score": float(np.mean([h.score for h in row])) if row else None,
             "status": "ok" if row else "failed", "reason": None if row else "no hit"}
            for retriever, per_query in hits.items() for (name, i), row in zip(names, per_query)]
    return pd.DataFrame(rows)


def topicality_report(scores: pd.DataFrame, b: int = 500, n: Size = None, seed: int = 0,
                      confidence: float = 0.95, sets: list[QuerySet] | None = None, **meta) -> dict:
    """VERA section 3.4 / 5.2 on judged (or hit) scores: per retriever and metric the query sets compared
    (compare_sets_from_scores); `sets` describes where each set's queries came from."""
    order = set_order(scores)
    described = {qs.name: {"topic": qs.topic, "source": qs.source} for qs in sets or []}
    counts = scores.groupby("query_set")["query_id"].nunique()
    return {"b": b, **sample_size_fields(n), "seed": seed, "confidence": confidence, **meta,
            "sets": [{"name": name, "n_queries": int(counts.get(name, 0)), **described.get(name, {})}
                     for name in order],
            "systems": compare_sets_from_scores(scores, b, n, seed, confidence)}
