"""`ccrs vera` tools: the VERA suite over a run's generations plus the cross-encoder aggregate, bootstrap
statistics with a convergence report, repository topicality (N query sets through the run's own retrievers,
section 3.4 / 5.2) and the section 5.1 experiment (perfectly relevant vs irrelevant contexts from qrels).

Scoring goes through the judge session (tasks/judge.py `JudgeSession` with the registered
"vera" suite: cache, Ray fan-out, context fitted to the judge's window); `ccrs run` with
`judges: [..., vera]` computes the same four metrics as a stage of the run (RUN_DIR/judge_vera/).
Outputs (RunLayout(RUN_DIR).vera_dir): judgments.parquet (every metric of every (query, system) with
status/reason/usage, the tasks.judge judgments frame; aggregate rows carry logit, sigmoid and token
counts in `detail`), scores.parquet (long format query_id, system, metric, score of the scored rows:
vera_faithfulness, vera_retrieval_recall, vera_retrieval_precision, vera_answer_relevance, and, when a
trained cross-encoder is named, vera_aggregate (the logit, as the paper reports it) and
vera_aggregate_sigmoid) and bootstrap.json. Topicality and qrels write their report and the judged
scores into an output folder. The qrels, queries and corpus files are read by retrievers/trec.py.

Topicality and qrels answer with VERA's summarisation prompt (reader prompt `vera-summary`, temperature 0,
top_p 0.01, section 5.1) through the generate stage function, judge with the "vera" suite through the judge
stage function, and compare query sets with stats.vera.compare_query_sets.

The aggregate is OFF by default: no trained cross-encoder ships as a package here (the paper's
ms-marco-MiniLM-L-12-v2 lives on the model hub, which is not reachable), and an untrained head is noise.
It is the VERA suite's (judges/vera.py, judge.vera.cross_encoder), so `ccrs run`, `ccrs vera score`,
`topicality` and `qrels` compute it the same way; `cross_encoder=PATH` here sets that field.
UNTRAINED_DEMO_HEAD (demo / tests) writes DEMO_AGGREGATE instead, a metric no goal tree reads.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from judges.config import ClientConfig, JudgeConfig, ReaderConfig
from judges.suite import Sample, get_suite
from judges.vera import (  # noqa: F401 - AGGREGATE_SIGMOID, DEMO_AGGREGATE: the aggregate's columns, re-exported
    AGGREGATE,
    AGGREGATE_SIGMOID,
    DEMO_AGGREGATE,
    SUITE,
    VERA_METRICS,
    CrossEncoderAggregator,
    aggregate_names,
    cross_encoder_for,
)
from retrievers.config import DatasetConfig
from retrievers.trec import QrelsError
from stats.vera import SampleSize, bootstrap_metric, compare_query_sets, convergence, sample_size
from infra.models import default_tokenizer
from pipelines.config import RESOURCE_ROOT
from tasks import generate as generate_stage
from tasks import judge as judge_stage
from tasks.runtime import judge_session
from tasks.runtime.fanout import progress_bar
from tasks.runtime.layout import RunLayout

DEFAULT_NEGATIVE = RESOURCE_ROOT / "configs" / "vera" / "offtopic-queries.yaml"
# The paper's three query sets (section 5.2, Table 3) for the BioASQ sample repository, most topical first.
DEFAULT_SETS = RESOURCE_ROOT / "configs" / "vera" / "topicality-sets.yaml"
TOPICALITY_SYSTEM = "topicality"  # the system of a scores file written before the sets had retrievers
QRELS_SYSTEM = "qrels"
COSINE_METRIC = "mean_hit_cosine"
AGGREGATE_OFF = ("VERA aggregate off: no trained cross-encoder named (pass --cross-encoder PATH to a local "
                 "trained cross-encoder checkpoint, e.g. ms-marco-MiniLM-L-12-v2 as in the paper)")


CrossEncoder = str | CrossEncoderAggregator | None  # a model name / path, a loaded aggregator, or off
Size = int | SampleSize | None  # bootstrap sample size n: a number (refused above N), every value, or a rule


def cross_encoder_name(cross_encoder: CrossEncoder) -> str | None:
    if isinstance(cross_encoder, CrossEncoderAggregator):
        return cross_encoder.model_name
    return cross_encoder or None


def aggregate_metric(cross_encoder: CrossEncoder) -> str | None:
    """The column of the aggregate's logit: none when off, DEMO_AGGREGATE for the untrained head."""
    names = aggregate_names(cross_encoder_name(cross_encoder))
    return names[0] if names else None


def load_aggregator(cross_encoder: CrossEncoder, max_length: int = 512) -> CrossEncoderAggregator | None:
    """The named cross-encoder loaded in this process (the suite reuses it): a bad name fails here, before
    any LLM call."""
    if isinstance(cross_encoder, CrossEncoderAggregator) or not cross_encoder:
        return cross_encoder or None
    return cross_encoder_for(cross_encoder, max_length)


def with_cross_encoder(judge: JudgeConfig, cross_encoder: CrossEncoder) -> JudgeConfig:
    """The judge config whose VERA suite adds the aggregate of `cross_encoder` (None: the config's own)."""
    name = cross_encoder_name(cross_encoder)
    if name is None:
        return judge
    return judge.model_copy(update={"vera": judge.vera.model_copy(update={"cross_encoder": name})})


def first_queries(queries: pd.DataFrame, generations: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    """The generations of the first `limit` queries (in queries order); all of them without a limit."""
    if limit is None:
        return generations
    keep = set(queries["query_id"].astype(str).tolist()[:limit])
    return generations[generations["query_id"].astype(str).isin(keep)]


def load_samples(queries: pd.DataFrame, retrieved: pd.DataFrame, generations: pd.DataFrame, top_k: int,
                 limit: int | None = None) -> tuple[list[Sample], list[dict]]:
    """The judge stage's samples (tasks.judge.load_samples: the context the reader saw, ranked) and failed
    generations, for the first `limit` queries when given."""
    return judge_session.load_samples(queries, retrieved, first_queries(queries, generations, limit), top_k)


def score_samples(samples: list[Sample], failed: list[dict], judge: JudgeConfig, client_cfg: ClientConfig,
                  base_url: str, cross_encoder: CrossEncoder = None,
                  progress: bool = False) -> tuple[pd.DataFrame, dict]:
    """Every selected VERA metric of every sample through the judge stage function (failed generations as
    failed rows), plus the aggregate when a cross-encoder is named here or in judge.vera.cross_encoder:
    (judgments frame, stage stats). `progress`: a bar counting judgments (samples x metrics), as the judge
    stage moves it."""
    judge = with_cross_encoder(judge, cross_encoder)
    session = judge_session.JudgeSession.of(SUITE, judge, client_cfg, base_url)
    metrics = session.metrics()
    bar = progress_bar(len(samples) * len(metrics), f"judge {SUITE}", "judgment") if progress else None
    try:
        judgments, stats = session.judge_samples(samples, bar if bar is not None else False)
    finally:
        if bar is not None:
            bar.close()
    judgments += session.failed_generations(failed)
    frame = judge_stage.judgments_frame(judgments, judge_session.suspicious_texts(samples), metrics)
    return frame, stats


def scores_long(judgments: pd.DataFrame) -> pd.DataFrame:
    ok = judgments[judgments["score"].notna()]
    return ok[["query_id", "system", "metric", "score"]].reset_index(drop=True)


def sample_size_fields(n: Size) -> dict:
    """The report's n (as asked; None: every observation) and what an n above a set's N does."""
    rule = sample_size(n)
    ratio = rule.ratio_above_observations
    return {"n": rule.n, "n_above_observations": "refused" if ratio is None else
            f"drawn at the paper's ratio n/N = {ratio:g}"}


def bootstrap_report(scores: pd.DataFrame, b: int, seed: int, n: Size = None,
                     b_grid: tuple[int, ...] = (100, 200, 500, 1000, 2000, 5000), tol: float = 0.01,
                     confidence: float = 0.95) -> dict:
    """Per (system, metric): bootstrap mean/SE/interval with sample size n and B resamples, and the
    convergence of the SE as B grows. One seeded stream per (system, metric) via SeedSequence."""
    out: dict = {"b": b, **sample_size_fields(n), "seed": seed, "confidence": confidence,
                 "b_grid": list(b_grid), "tol": tol, "systems": {}}
    groups = sorted(scores.groupby(["system", "metric"]), key=lambda kv: kv[0])
    for i, ((system, metric), frame) in enumerate(groups):
        values = frame["score"].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        entry: dict = {"n_observed": int(values.size)}
        if values.size == 0:
            entry.update(computable=False, reason="no finite score")
        else:
            seq = np.random.SeedSequence([seed, i])
            rng_b, rng_c = (np.random.default_rng(s) for s in seq.spawn(2))
            stats = bootstrap_metric(values, b, rng_b, n, confidence)
            grid = sorted({g for g in b_grid if 2 <= g <= b} | {max(b, 2)})  # the grid ends at B
            conv = convergence(values, grid, rng_c, n, tol, confidence)
            entry.update(computable=True, **asdict(stats), convergence=asdict(conv))
            if values.size < 30:
                entry["note"] = f"only {values.size} observations; VERA recommends n >= 30 (ideally 50+)"
        out["systems"].setdefault(system, {})[metric] = entry
    return out


def run_vera(run_dir: str | Path, judge: JudgeConfig, client_cfg: ClientConfig, base_url: str, top_k: int = 5,
             cross_encoder: CrossEncoder = None, b: int = 1000, n: Size = None, seed: int = 0,
             limit: int | None = None, progress: bool = False) -> dict:
    """Score a run's generations with the VERA suite (+ aggregate), write the outputs under the run's
    vera_dir, bootstrap every (system, metric); returns a summary (calls: judge asks made now). The
    cross-encoder is loaded before any judge call, so a bad name fails fast."""
    started = time.perf_counter()
    judge = with_cross_encoder(judge, cross_encoder)
    load_aggregator(judge.vera.cross_encoder, judge.vera.cross_encoder_max_length)  # fails before any call
    layout = RunLayout(Path(run_dir))
    queries = pd.read_parquet(layout.queries)
    generations = first_queries(queries, pd.read_parquet(layout.generations), limit)
    samples, failed = load_samples(queries, pd.read_parquet(layout.retrieved), generations, top_k)
    frame, stats = score_samples(samples, failed, judge, client_cfg, base_url, None, progress)
    judge_stage.check_complete(frame, generations, get_suite(SUITE).selected_metrics(judge))
    out = layout.vera_dir
    out.mkdir(parents=True, exist_ok=True)
    judge_stage.write_judgments(frame, out)
    scores = scores_long(frame)
    report = bootstrap_report(scores, b, seed, n)
    (out / "bootstrap.json").write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    summary = judge_stage.judging_summary(frame, stats, time.perf_counter() - started, SUITE,
                                          judge.vera.prompt_version, judge.model)
    return {"n_samples": len(samples) + len(failed), "n_scores": len(scores),
            "n_failed": int((frame["status"] == "failed").sum()), "calls": summary["judge_calls"],
            "prompt_tokens": summary["prompt_tokens"], "completion_tokens": summary["completion_tokens"],
            "cache_hits": summary["cache_hits"],
            "context_truncated_judgments": summary["context_truncated_judgments"],
            "aggregate": aggregate_metric(judge.vera.cross_encoder) or AGGREGATE_OFF, "out_dir": str(out)}


# --- answering and judging query sets (topicality, the section 5.1 experiment) ------------------------

@dataclass(frozen=True)
class Ask:
    """One query to answer from given passages, in a named query set (a system: the retriever)."""

    query_id: str
    query_set: str
    system: str
    question: str
    ground_truth: str
    passages: tuple[str, ...]
    passage_ids: tuple[str, ...]


def vera_reader(model: str, max_tokens: int = 512, context_window: int = 2048) -> ReaderConfig:
    """The reader of VERA's experiments: its summarisation prompt (judges/readers.py `vera-summary`, top_p
    0.01) at temperature 0 (section 5.1)."""
    return ReaderConfig(name="vera-summary", model=model, prompt="vera-summary", temperature=0.0,
                        max_tokens=max_tokens, context_window=context_window)


def answer_asks(asks: list[Ask], reader: ReaderConfig, client_cfg: ClientConfig, base_url: str,
                progress: bool = False) -> tuple[list[Sample], list[dict]]:
    """Each ask answered by the reader (tasks.generate, its passages fitted to the reader's window): judge
    samples, and the failed generations as {query_id, system, error}."""
    budget = reader.context_window - reader.max_tokens
    tokenizer = reader.tokenizer or default_tokenizer(reader.model)
    items = [generate_stage.GenerationItem(a.query_id, a.system, a.system, reader, a.question,
                                           list(a.passages), list(a.passage_ids), budget, tokenizer)
             for a in asks]
    rows, _ = generate_stage.generate_all(items, client_cfg, base_url, progress)
    by_key = {(row["system"], row["query_id"]): row for row in rows}
    samples, failed = [], []
    for ask, item in zip(asks, items):
        row = by_key[(ask.system, ask.query_id)]
        if row["status"] != "ok":
            failed.append({"query_id": ask.query_id, "system": ask.system, "error": row["error"]})
            continue
        samples.append(Sample(ask.query_id, ask.system, ask.question, str(row["answer"] or ""),
                              ask.ground_truth, item.chunks[: row["n_chunks_used"]]))
    return samples, failed


def judged_set_scores(asks: list[Ask], samples: list[Sample], failed: list[dict], judge: JudgeConfig,
                      client_cfg: ClientConfig, base_url: str, progress: bool = False) -> pd.DataFrame:
    """The VERA metrics of the answered asks (the judge stage function), long format: query_id, query_set,
    set_order (the sets' order of first appearance in `asks`), system, metric, score (None where not
    computable), status, reason."""
    frame, _ = score_samples(samples, failed, judge, client_cfg, base_url, None, progress)
    sets = {a.query_id: a.query_set for a in asks}
    order = {name: i for i, name in enumerate(dict.fromkeys(a.query_set for a in asks))}
    frame = frame[["query_id", "system", "metric", "score", "status", "reason"]].copy()
    frame.insert(1, "query_set", frame["query_id"].map(sets))
    frame.insert(2, "set_order", frame["query_set"].map(order).astype(int))
    return frame.reset_index(drop=True)


def set_order(scores: pd.DataFrame) -> list[str]:
    """The query sets in their declared order (`set_order`), else in order of first appearance."""
    if "set_order" in scores:
        pairs = scores[["query_set", "set_order"]].drop_duplicates().sort_values("set_order", kind="stable")
        return pairs["query_set"].tolist()
    return list(dict.fromkeys(scores["query_set"]))


def compare_sets_from_scores(scores: pd.DataFrame, b: int = 500, n: Size = None, seed: int = 0,
                             confidence: float = 0.95) -> dict:
    """Per system and metric: every query set's bootstrap mean and interval, every pair's difference
    (earlier set minus later, interval, separated or not), the sets ranked by mean, and whether the means
    follow the declared order (`expected_order_holds`) with every neighbouring pair separated
    (`expected_order_separated`). A set without a finite score of a metric (e.g. retrieval recall of
    queries without ground truth) is listed under `sets_without_scores`; fewer than two sets with scores:
    not computable, with the reason. One seeded stream per (system, metric)."""
    order, metric_rank = set_order(scores), {m: i for i, m in enumerate(VERA_METRICS)}
    if "system" not in scores:
        scores = scores.assign(system=TOPICALITY_SYSTEM)
    out: dict = {}
    for s_index, (system, rows) in enumerate(sorted(scores.groupby("system"), key=lambda kv: kv[0])):
        metrics = sorted(set(rows["metric"]), key=lambda m: (metric_rank.get(m, len(metric_rank)), m))
        per_metric = {metric: _compare_metric(rows[rows["metric"] == metric], order, b, n, confidence,
                                              np.random.SeedSequence([seed, s_index, m_index]))
                      for m_index, metric in enumerate(metrics)}
        out[system] = {**_order_summary(per_metric), "metrics": per_metric}
    return out


def _compare_metric(rows: pd.DataFrame, order: list[str], b: int, n: Size, confidence: float,
                    seed: np.random.SeedSequence) -> dict:
    values = {name: _finite(rows.loc[rows["query_set"] == name, "score"]) for name in order}
    scored = {name: v for name, v in values.items() if v.size}
    entry: dict = {"n_scored": {name: int(v.size) for name, v in values.items()},
                   "sets_without_scores": [name for name in order if name not in scored]}
    if len(scored) < 2:
        scored_names = sorted(scored) or "none"
        return {**entry, "computable": False,
                "reason": f"fewer than two query sets have a finite score (scored: {scored_names})"}
    result = compare_query_sets(scored, b, np.random.default_rng(seed), n, confidence)
    return {**entry, "computable": True, "sets": {k: _jsonable(asdict(v)) for k, v in result.sets.items()},
            "pairs": [_jsonable(asdict(p)) for p in result.pairs], "ranking": list(result.ranking),
            "expected_order": list(scored), "expected_order_holds": result.expected_order_holds,
            "expected_order_separated": result.expected_order_separated}


def _order_summary(per_metric: dict) -> dict:
    computable = {m: e for m, e in per_metric.items() if e["computable"]}
    return {"order_holds": [m for m, e in computable.items() if e["expected_order_holds"]],
            "order_separated": [m for m, e in computable.items() if e["expected_order_separated"]],
            "order_broken": [m for m, e in computable.items() if not e["expected_order_holds"]],
            "not_computable": [m for m, e in per_metric.items() if not e["computable"]]}


def _finite(values: pd.Series) -> np.ndarray:
    array = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    return array[np.isfinite(array)]


def _jsonable(tree):
    if isinstance(tree, dict):
        return {k: _jsonable(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_jsonable(v) for v in tree]
    if isinstance(tree, float) and not math.isfinite(tree):
        return None
    return tree


# --- topicality (sections 3.4 and 5.2) -------------------------------------------------------------------

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


# --- the section 5.1 experiment: perfectly relevant vs irrelevant contexts from qrels ---------------------

PERFECTLY_RELEVANT, IRRELEVANT = "perfectly_relevant", "irrelevant"
QRELS_UNITS = ("pair", "query")


@dataclass(frozen=True)
class QrelsAsks:
    asks: list[Ask]
    relevant_grade: int
    dropped: dict[str, int]  # judgments left out, by reason (counted, never silent)


def qrels_asks(qrels: pd.DataFrame, queries: dict[str, tuple[str, str]], corpus: dict[str, str],
               unit: str = "pair", k: int = 5, limit: int | None = None, relevant_grade: int | None = None,
               seed: int = 0) -> QrelsAsks:
    """The section 5.1 contexts. "Perfectly relevant": judgments at `relevant_grade` (default: the file's
    highest grade; TREC DL's 3); "irrelevant": judgments at grade 0. unit `pair` (the paper's query-passage
    pairs): one ask per judgment, its one passage as the context; unit `query`: one ask per query and
    condition, its first k judged passages of that grade (qrels order). `limit`: at most that many asks
    per condition, drawn with a seeded generator (the paper sampled 500). Judgments whose query or passage
    text is missing are dropped and counted."""
    if unit not in QRELS_UNITS:
        raise ValueError(f"unit must be one of {QRELS_UNITS}, got {unit!r}")
    top = int(qrels["grade"].max()) if relevant_grade is None else relevant_grade
    if top <= 0:
        raise QrelsError(f"no relevant grade: the highest grade is {top}; the experiment needs grade > 0 "
                         "judgments for its perfectly relevant contexts")
    known = qrels["query_id"].isin(list(queries)) & qrels["doc_id"].isin(list(corpus))
    dropped = {"query text missing": int((~qrels["query_id"].isin(list(queries))).sum()),
               "passage text missing": int((qrels["query_id"].isin(list(queries))
                                            & ~qrels["doc_id"].isin(list(corpus))).sum())}
    usable = qrels[known]
    rng = np.random.default_rng(seed)
    asks = []
    for condition, grade in ((PERFECTLY_RELEVANT, top), (IRRELEVANT, 0)):
        rows = usable[usable["grade"] == grade]
        groups = ([((q, d), [d]) for q, d in zip(rows["query_id"], rows["doc_id"])] if unit == "pair" else
                  [((q,), list(g["doc_id"])[:k]) for q, g in rows.groupby("query_id", sort=False)])
        if limit is not None and len(groups) > limit:
            groups = [groups[i] for i in sorted(rng.choice(len(groups), size=limit, replace=False))]
        for key, docs in groups:
            text, truth = queries[key[0]]
            asks.append(Ask(f"{condition}/{'/'.join(key)}", condition, QRELS_SYSTEM, text, truth,
                            tuple(corpus[d] for d in docs), tuple(docs)))
    if not any(a.query_set == PERFECTLY_RELEVANT for a in asks):
        raise QrelsError(f"no usable judgment at grade {top} (dropped: {dropped})")
    return QrelsAsks(asks, top, {k: v for k, v in dropped.items() if v})


def qrels_report(scores: pd.DataFrame, b: int = 500, n: Size = None, seed: int = 0,
                 confidence: float = 0.95, **meta) -> dict:
    """Paper Tables 1-2: per metric the mean over the perfectly relevant and over the irrelevant contexts
    (with n), and the bootstrap difference between them (compare_sets_from_scores)."""
    compared = compare_sets_from_scores(scores, b, n, seed, confidence)[QRELS_SYSTEM]
    table = {}
    for metric, entry in compared["metrics"].items():
        rows = scores[scores["metric"] == metric]
        table[metric] = {condition: {"mean": _mean_or_none(rows.loc[rows["query_set"] == condition, "score"]),
                                     "n": entry["n_scored"].get(condition, 0)}
                         for condition in (PERFECTLY_RELEVANT, IRRELEVANT)}
        if entry["computable"]:
            table[metric]["difference"] = entry["pairs"][0]
    return {"b": b, **sample_size_fields(n), "seed": seed, "confidence": confidence, **meta,
            "n_asks": {c: int(scores.loc[scores["query_set"] == c, "query_id"].nunique())
                       for c in (PERFECTLY_RELEVANT, IRRELEVANT)},
            "metrics": table}


def _mean_or_none(values: pd.Series) -> float | None:
    finite = _finite(values)
    return float(finite.mean()) if finite.size else None
