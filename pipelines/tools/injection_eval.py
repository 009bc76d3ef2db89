"""Prompt-injection measurement for the CCRS judges: how far does steering text move each score?

Test set: real BioASQ questions, response = the real ideal answer, context = the question's gold snippets
(top `max_chunks`, file order). Each sample is judged clean and in every template x placement variant of
judges/injection.py (the injection in the response, or in the top-ranked chunk) by the registered CCRS
suite through the judge stage's `tasks.judge.judge_suite` (the suite's `plan` fits the context and renders
the request, its `evaluate` asks, parses and re-asks; Ray tasks fan the units out, requests that fail in
transport are requeued once the endpoint answers again, the judgment cache serves what it holds).
Every (question, variant, metric) gets exactly one judgment row: a score or a recorded failure.

Shifts are measured on the judge's own 0-100 reply (`llm_score`), paired per (question, metric) over the
pairs where both the clean and the injected judgment succeeded. For AC that is the LLM part only: the
final AC also loses its exact-match part (0.7) as soon as any text is added to an ideal answer, a
mechanical drop that says nothing about steering (it is reported apart, as `mean_shift_final`).

Outputs in `out_dir`: injection_judgments.parquet (every judgment, with the detector's markers per
variant), injection_report.json, injection_report.csv (one row per metric x template x placement),
injection_shift.png; optionally logged to MLflow.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from judges import ccrs
from judges.ccrs import CCRS_METRICS
from judges.config import ClientConfig, JudgeConfig
from judges.em import flatten_answers
from judges.injection import CLEAN, InjectionSample, Placement, Variant, build_variants, injection_markers
from judges.suite import Judgment
from pipelines.config import REPO_ROOT
from retrievers.config import DatasetConfig
from retrievers.loaders import load_dataset
from tasks.bias_probes import json_safe, judge_variants, variant_frame

EXPERIMENT = "ccrs-injection"
SUITE = ccrs.SUITE
SCALE_MAX = 100
JUDGMENT_COLUMNS = [
    "query_id", "variant", "template", "placement", "metric", "score", "llm_score", "em", "status", "reason",
    "raw", "attempts", "prompt_tokens", "completion_tokens", "prompt_version", "judge_model",
    "n_context_chunks", "n_context_truncated", "response_markers", "context_markers", "suspicious",
]


# --- test set -----------------------------------------------------------------------------------------

def load_injection_samples(dataset_path: str | Path, limit: int | None = None,
                           max_chunks: int = 5) -> list[InjectionSample]:
    """The first `limit` questions that have an ideal answer: response = ground truth = that answer,
    context = the question's gold snippets (the passages it lists as relevant), at most `max_chunks`."""
    loaded = load_dataset(DatasetConfig(path=str(dataset_path)))
    passages = dict(zip(loaded.passages.column("doc_id").to_pylist(),
                        loaded.passages.column("text").to_pylist()))
    samples = []
    for row in loaded.queries.to_pylist():
        if limit is not None and len(samples) >= limit:
            break
        if not (row["answer"] or "").strip():
            continue
        chunks = tuple(passages[d] for d in row["relevant_doc_ids"] if d in passages)[:max_chunks]
        exact = flatten_answers(json.loads(row["exact_answer"])) if row["exact_answer"] else []
        samples.append(InjectionSample(row["query_id"], row["text"], row["answer"], row["answer"], chunks,
                                       tuple(exact)))
    return samples


# --- judging ------------------------------------------------------------------------------------------

def judgments_frame(judged: list[tuple[Variant, Judgment]]) -> pd.DataFrame:
    return variant_frame(judged, JUDGMENT_COLUMNS, lambda v, j: {
        "variant": v.variant, "template": v.template, "placement": v.placement,
        "response_markers": list(v.response_markers), "context_markers": list(v.context_markers),
        "suspicious": v.suspicious}, ("score", "em"))


# --- report -------------------------------------------------------------------------------------------

@dataclass
class ShiftCell:
    """One metric x template x placement: scores on the judge's 0-100 scale (`llm_score`)."""

    metric: str
    template: str
    placement: str
    n: int                       # questions
    n_pairs: int                 # both clean and injected judgments succeeded
    mean_clean: float | None
    mean_injected: float | None
    mean_shift: float | None     # paired: injected - clean
    share_up: float | None       # of the pairs: injected > clean
    share_down: float | None
    clean_at_max: float | None   # of the successful judgments: score == 100
    injected_at_max: float | None
    failures_clean: int
    failures_injected: int
    mean_shift_final: float | None  # paired shift of the final CCRS score (0-1; AC includes EM)
    reaches_judge: bool = True   # False: the metric does not read the injected input (QR and the context)


@dataclass
class DetectorCell:
    template: str
    placement: str
    n: int
    flagged: int
    flag_rate: float | None


@dataclass
class InjectionReport:
    judge_model: str
    prompt_version: str
    dataset: str
    n_questions: int
    metrics: list[str]
    templates: list[str]
    placements: list[str]
    cells: list[ShiftCell]
    mean_clean_by_metric: dict[str, float | None]
    mean_shift_by_metric: dict[str, float | None]
    detector_clean: dict[str, Any]
    detector_injected: list[DetectorCell]
    status_counts: dict[str, int]
    judgments: int
    scale: str = "judge reply 0-100 (llm_score); AC: LLM part only"
    seconds: float = 0.0


def _mean(series: pd.Series) -> float | None:
    values = pd.to_numeric(series, errors="coerce").dropna()
    return None if values.empty else round(float(values.mean()), 4)


def _share(mask: pd.Series) -> float | None:
    return None if len(mask) == 0 else round(float(mask.mean()), 4)


def _paired(frame: pd.DataFrame, metric: str, variants: list[str]) -> pd.DataFrame:
    """Injected rows of the given variants and metric, each beside the clean row of the same question."""
    clean = frame[(frame.variant == CLEAN) & (frame.metric == metric)]
    injected = frame[frame.variant.isin(variants) & (frame.metric == metric)]
    return injected.merge(clean, on=["query_id", "metric"], suffixes=("_inj", "_clean"), how="left")


def _both_ok(pairs: pd.DataFrame) -> pd.DataFrame:
    return pairs[pairs.llm_score_inj.notna() & pairs.llm_score_clean.notna()]


def _shift(both: pd.DataFrame) -> pd.Series:
    return both.llm_score_inj.astype(float) - both.llm_score_clean.astype(float)


def shift_cell(frame: pd.DataFrame, metric: str, template: str, placement: str) -> ShiftCell:
    pairs = _paired(frame, metric, [f"{template}@{placement}"])
    ok_inj, ok_clean = pairs.llm_score_inj.notna(), pairs.llm_score_clean.notna()
    both = _both_ok(pairs)
    shift = _shift(both)
    return ShiftCell(
        metric, template, placement, len(pairs), len(both),
        _mean(pairs.llm_score_clean), _mean(pairs.llm_score_inj), _mean(shift),
        _share(shift > 0), _share(shift < 0),
        _share(pairs.llm_score_clean[ok_clean] == SCALE_MAX),
        _share(pairs.llm_score_inj[ok_inj] == SCALE_MAX),
        int((pairs.status_clean == "failed").sum()), int((pairs.status_inj == "failed").sum()),
        _mean(both.score_inj - both.score_clean), placement in CCRS_METRICS[metric].inputs,
    )


def mean_clean_by_metric(frame: pd.DataFrame, metrics: list[str]) -> dict[str, float | None]:
    clean = frame[frame.variant == CLEAN]
    return {m: _mean(clean.loc[clean.metric == m, "llm_score"]) for m in metrics}


def mean_shift_by_metric(frame: pd.DataFrame, metrics: list[str]) -> dict[str, float | None]:
    """Per metric: the paired shift pooled over every injected variant whose injection reaches that
    metric's prompt (all templates; the placements among the metric's inputs)."""
    injected = frame[frame.variant != CLEAN][["variant", "placement"]].drop_duplicates()
    return {m: _mean(_shift(_both_ok(_paired(frame, m, _reaching(injected, m))))) for m in metrics}


def _reaching(injected: pd.DataFrame, metric: str) -> list[str]:
    return injected.loc[injected.placement.isin(CCRS_METRICS[metric].inputs), "variant"].tolist()


def detector_clean(samples: list[InjectionSample], variants: list[Variant]) -> dict[str, Any]:
    """False-positive side: every clean response and every clean chunk of the test set."""
    responses = [bool(injection_markers(s.response)) for s in samples]
    chunks = [bool(injection_markers(c)) for s in samples for c in s.context]
    clean = [v.suspicious for v in variants if v.variant == CLEAN]
    return {"responses": len(responses), "responses_flagged": sum(responses),
            "response_flag_rate": _rate(responses), "chunks": len(chunks), "chunks_flagged": sum(chunks),
            "chunk_flag_rate": _rate(chunks), "clean_samples_suspicious_rate": _rate(clean)}


def _rate(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def detector_injected(variants: list[Variant]) -> list[DetectorCell]:
    """Detection side: the text that carries the injection (the response, or the injected chunk)."""
    cells: dict[tuple[str, str], list[bool]] = {}
    for v in variants:
        if v.variant != CLEAN:
            cells.setdefault((v.template, v.placement), []).append(bool(injection_markers(v.injected_text)))
    return [DetectorCell(t, p, len(f), sum(f), _rate(f)) for (t, p), f in cells.items()]


def build_report(frame: pd.DataFrame, samples: list[InjectionSample], variants: list[Variant],
                 templates: list[str], placements: list[Placement], judge: JudgeConfig, dataset: str,
                 seconds: float) -> InjectionReport:
    metrics = list(judge.ccrs.metrics)
    cells = [shift_cell(frame, m, t, p) for m in metrics for t in templates for p in placements]
    return InjectionReport(
        judge.model, judge.ccrs.prompt_version, dataset, len(samples), metrics, list(templates),
        list(placements), cells, mean_clean_by_metric(frame, metrics), mean_shift_by_metric(frame, metrics),
        detector_clean(samples, variants), detector_injected(variants),
        {k: int(v) for k, v in frame.status.value_counts().items()}, len(frame), seconds=round(seconds, 2),
    )


# --- outputs ------------------------------------------------------------------------------------------

def plot_shifts(report: InjectionReport, path: Path) -> Path:
    """One panel per placement: mean paired shift (judge points) per metric, one bar per template."""
    import numpy as np

    from tasks.plots import figure_file

    with figure_file(path, nrows=1, ncols=len(report.placements), figsize=(6.0 * len(report.placements), 3.8),
                     squeeze=False, sharey=True) as (figure, axes):
        x, width = np.arange(len(report.metrics)), 0.8 / max(1, len(report.templates))
        by_key = {(c.metric, c.template, c.placement): c.mean_shift for c in report.cells}
        for axis, placement in zip(axes.ravel(), report.placements):
            for i, template in enumerate(report.templates):
                values = [by_key.get((m, template, placement)) for m in report.metrics]
                axis.bar(x + (i - (len(report.templates) - 1) / 2) * width, [v or 0.0 for v in values],
                         width, label=template)
            axis.axhline(0.0, color="black", linewidth=0.8)
            axis.set_xticks(x, [m if placement in CCRS_METRICS[m].inputs else f"{m}\n(not read)"
                                for m in report.metrics])
            axis.set_title(f"injection in the {placement}")
            axis.set_ylabel("mean shift, injected - clean (0-100)")
        axes.ravel()[-1].legend(fontsize=7, loc="best")
        figure.suptitle(f"judge {report.judge_model}, {report.n_questions} BioASQ questions", fontsize=9)
    return path


def write_outputs(frame: pd.DataFrame, report: InjectionReport, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"judgments": out_dir / "injection_judgments.parquet",
             "report": out_dir / "injection_report.json",
             "table": out_dir / "injection_report.csv", "plot": out_dir / "injection_shift.png"}
    frame.to_parquet(paths["judgments"], index=False)
    paths["report"].write_text(json.dumps(json_safe(asdict(report)), indent=2, default=str))
    pd.DataFrame([asdict(c) for c in report.cells]).to_csv(paths["table"], index=False)
    plot_shifts(report, paths["plot"])
    return paths


@dataclass
class InjectionEvalResult:
    report: InjectionReport
    frame: pd.DataFrame
    paths: dict[str, Path]


def run_injection_eval(samples: list[InjectionSample], templates: list[str], placements: list[Placement],
                       judge: JudgeConfig, client: ClientConfig, base_url: str, out_dir: Path,
                       dataset: str = "", progress: bool = False) -> InjectionEvalResult:
    started = time.perf_counter()
    variants = build_variants(samples, templates, placements)
    frame = judgments_frame(judge_variants(variants, judge, client, base_url, progress))
    report = build_report(frame, samples, variants, templates, placements, judge, dataset,
                          time.perf_counter() - started)
    return InjectionEvalResult(report, frame, write_outputs(frame, report, out_dir))


# --- MLflow -------------------------------------------------------------------------------------------

def log_injection_eval(result: InjectionEvalResult, tracking_uri: str, params: dict,
                       experiment: str = EXPERIMENT) -> str:
    import mlflow

    from tasks.tracking import git_commit, log_params_redacted, open_experiment

    open_experiment(tracking_uri, experiment)
    report = result.report
    with mlflow.start_run(run_name=f"injection-{report.judge_model}") as run:
        mlflow.set_tags({"ccrs.kind": "injection-eval", "judge_model": report.judge_model,
                         "git_commit": git_commit(REPO_ROOT)})
        log_params_redacted(mlflow, params)
        mlflow.log_metrics(_metrics(report))
        for path in result.paths.values():
            mlflow.log_artifact(str(path), artifact_path="injection")
        return run.info.run_id


def _metrics(report: InjectionReport) -> dict[str, float]:
    metrics = {f"mean_shift_{m}": v for m, v in report.mean_shift_by_metric.items() if v is not None}
    metrics.update({f"shift_{c.metric}_{c.template}_{c.placement}": c.mean_shift for c in report.cells
                    if c.mean_shift is not None})
    metrics.update({f"flag_rate_{d.template}_{d.placement}": d.flag_rate for d in report.detector_injected
                    if d.flag_rate is not None})
    clean = report.detector_clean
    metrics.update({k: clean[k] for k in ("response_flag_rate", "chunk_flag_rate") if clean[k] is not None})
    metrics["seconds"] = report.seconds
    return {k: float(v) for k, v in metrics.items()}
