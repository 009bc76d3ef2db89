"""Judge bias probes: each clean sample and its probed variants (judges/bias_probes.py) judged by the CCRS
suite through a judge session (tasks/judge.py `JudgeSession`), and per (kind, variant, metric) the paired
shift probed - clean of the judge's mark with its bootstrap CI (stats/shift.py), flagged over a tolerance.

The mark is the judge's own mark on the 0-1 scale: `llm_score_expected` with `judge.scoring: expected`,
else the integer `llm_score`, normalized by the metric's scale. For AC that is the LLM part; the final
score (AC with its exact-match part) moves apart, reported as `shift_final`. A variant is judged on the
metrics that read the input it changes; the others would see the clean prompt again. With the injection
kind the report also holds the injection detector's flag rates (judges/injection.py `injection_markers`):
on the clean responses and chunks, and on the text that carries each injection.

Used by `ccrs probe` (pipelines/probe_cmd.py) and, with `probes:` in a run config, by the run's probe
stage (`run_probe_stage`, after the judge stage, keyed and resumable like it); the verdict's "Judge bias
probes" section reads the stage's probe_report.json (`probes_markdown`).
"""
from __future__ import annotations

import json
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infra.readiness import endpoint_identity
from judges import ccrs
from judges.bias_probes import CLEAN, PROBES, ProbedVariant, ProbesConfig, ProbeSample, build_probes
from judges.ccrs import CCRS_METRICS
from judges.config import ClientConfig, JudgeConfig
from judges.injection import injection_markers
from judges.suite import Judgment, Sample
from judges.templates import PROMPTS_ROOT
from stats.shift import paired_shift
from tasks.runtime.fanout import progress_bar
from tasks.runtime.judge_session import JUDGE_ENDPOINT_FIELDS, JudgeSession, load_samples
from tasks.runtime.layout import PROBE_FILES, PROBES_STAGE, RunLayout
from tasks.runtime.stage import (
    StageCheckpoint,
    StageResult,
    code_version,
    file_fingerprint,
    run_stage,
    stage_key,
)

EXPERIMENT = "ccrs-probes"
# the plot of the shifts (report, path) -> path, drawn by the caller's reporting
DrawShifts = Callable[["ProbeReport", Path], Path]
CONFIDENCE = 0.95
PROBE_COLUMNS = [
    "query_id", "kind", "variant", "changes", "detail", "metric", "mark", "score", "llm_score",
    "llm_score_expected", "scoring", "em", "status", "reason", "raw", "attempts", "prompt_tokens",
    "completion_tokens", "prompt_version", "judge_model", "n_context_chunks", "n_context_truncated",
]


# --- judging ------------------------------------------------------------------------------------------

def judge_sample(variant) -> Sample:
    """`system` carries the variant id, so a judgment names the variant it judged."""
    s = variant.sample
    return Sample(s.query_id, variant.variant, s.question, variant.response, s.ground_truth,
                  list(variant.context), list(s.exact_answers))


def judge_variants(variants: Sequence, cfg: JudgeConfig, client: ClientConfig, base_url: str,
                   progress: bool = False, metrics_of: Callable[[Any], tuple[str, ...]] | None = None,
                   identity: dict[str, Any] | None = None, checkpoint: StageCheckpoint | None = None,
                   llm=None) -> list[tuple[Any, Judgment]]:
    """Every variant (anything with `sample`, `variant`, `response`, `context`) judged by a `JudgeSession`
    of the CCRS suite on `metrics_of(variant)` (default: cfg.ccrs.metrics): its plan gives
    one unit per metric (window policy: the lowest-ranked chunks dropped first), Ray tasks ask (or `llm`,
    in this process), the judgment cache serves what it holds when cfg.cache is on. In variant x metric
    order."""
    metrics_of = metrics_of or (lambda variant: tuple(cfg.ccrs.metrics))
    if identity is None and cfg.cache and llm is None:
        identity = endpoint_identity(base_url, cfg.model, client.api_key_env)
    groups: dict[tuple[str, ...], list] = {}
    for variant in variants:
        groups.setdefault(metrics_of(variant), []).append(variant)
    total = sum(len(metrics) * len(group) for metrics, group in groups.items())
    bar = progress_bar(total, "judge variants", "judgment") if progress else False
    by_key: dict[tuple[str, str, str], Judgment] = {}
    for metrics, group in groups.items():
        scoped = cfg.model_copy(update={"ccrs": cfg.ccrs.model_copy(update={"metrics": list(metrics)})})
        session = JudgeSession.of(ccrs.SUITE, scoped, client, base_url, llm, identity=identity)
        judgments, _ = session.judge_samples([judge_sample(v) for v in group], bar, checkpoint)
        by_key.update({(j.query_id, j.system, j.metric): j for j in judgments})
    if bar is not False:
        bar.close()
    return [(v, by_key[v.sample.query_id, v.variant, metric]) for v in variants for metric in metrics_of(v)]


def reading_metrics(variant: ProbedVariant, metrics: Sequence[str]) -> tuple[str, ...]:
    """The metrics whose prompt shows the input the variant changes (all of them for the clean one)."""
    if variant.changes is None:
        return tuple(metrics)
    return tuple(m for m in metrics if variant.changes in CCRS_METRICS[m].inputs)


def judge_mark(judgment: Judgment) -> float | None:
    """The judge's own mark on 0-1: the expected mark where it was scored so, else the integer."""
    if judgment.status != "ok":
        return None
    mark = judgment.llm_score_expected if judgment.scoring == "expected" else judgment.llm_score
    return CCRS_METRICS[judgment.metric].normalize(mark)


def variant_frame(judged: list[tuple[Any, Judgment]], columns: Sequence[str],
                  fields: Callable[[Any, Judgment], dict], floats: Sequence[str]) -> pd.DataFrame:
    """One row per (variant, judgment): the judgment's own fields among `columns`, then `fields(variant,
    judgment)`; `llm_score` nullable integer, `floats` float64."""
    rows = []
    for variant, judgment in judged:
        record = judgment.record()
        rows.append({**{k: record[k] for k in columns if k in record}, **fields(variant, judgment)})
    frame = pd.DataFrame(rows, columns=list(columns))
    frame["llm_score"] = frame["llm_score"].astype("Int64")
    return frame.astype({column: "float64" for column in floats})


def probe_frame(judged: list[tuple[ProbedVariant, Judgment]]) -> pd.DataFrame:
    return variant_frame(judged, PROBE_COLUMNS, lambda v, j: {
        "kind": v.kind, "variant": v.variant, "changes": v.changes, "detail": v.detail,
        "mark": judge_mark(j)}, ("mark", "score", "em", "llm_score_expected"))


# --- report --------------------------------------------------------------------------------------------

@dataclass
class ProbeCell:
    """One kind x variant x metric; marks on the 0-1 scale, shift = probed - clean over the pairs."""

    kind: str
    variant: str
    metric: str
    changes: str
    expected: str               # stable | down (the construct penalises the perturbation)
    n: int                      # questions with this variant
    n_pairs: int                # both the clean and the probed judgment succeeded
    mean_clean: float | None
    mean_probed: float | None
    shift: float | None
    ci_low: float | None
    ci_high: float | None
    flagged: bool               # |shift| > tolerance
    ci_beyond_tolerance: bool   # the whole CI outside [-tolerance, tolerance]
    failures_clean: int
    failures_probed: int
    shift_final: float | None   # paired shift of the final score (AC: with its exact-match part)


@dataclass
class ProbeReport:
    judge_model: str
    prompt_version: str
    scoring: str
    dataset: str
    n_questions: int
    kinds: list[str]
    metrics: list[str]
    tolerance: float
    confidence: float
    b: int
    seed: int
    options: dict[str, Any]
    probed_questions: dict[str, int]   # kind -> questions that got a variant
    cells: list[ProbeCell]
    flagged: list[str]                 # kind/variant/metric of the flagged cells
    status_counts: dict[str, int]
    judgments: int
    scale: str = "judge's mark 0-1 (expected mark or integer, by judge.scoring); AC: LLM part only"
    seconds: float = 0.0
    detector: dict[str, Any] | None = None  # the injection kind's detector flag rates (detector_report)


def _round(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else round(float(value), 4)


def _mean(series: pd.Series) -> float | None:
    values = pd.to_numeric(series, errors="coerce").dropna()
    return None if values.empty else _round(values.mean())


def cell_rng(seed: int, kind: str, variant: str, metric: str) -> np.random.Generator:
    """One generator per cell: a cell's CI does not depend on which other cells the report holds."""
    return np.random.default_rng([seed, zlib.crc32(f"{kind}/{variant}/{metric}".encode())])


def probe_cell(frame: pd.DataFrame, kind: str, variant: str, metric: str, probes: ProbesConfig) -> ProbeCell:
    clean = frame[(frame.variant == CLEAN) & (frame.metric == metric)]
    probed = frame[(frame.kind == kind) & (frame.variant == variant) & (frame.metric == metric)]
    pairs = probed.merge(clean, on=["query_id", "metric"], suffixes=("_probed", "_clean"), how="left")
    both = pairs[pairs.mark_probed.notna() & pairs.mark_clean.notna()]
    shift = None
    if len(both):
        shift = paired_shift(both.mark_probed.to_numpy(float), both.mark_clean.to_numpy(float),
                             probes.tolerance, probes.b, cell_rng(probes.seed, kind, variant, metric),
                             CONFIDENCE)
    return ProbeCell(
        kind, variant, metric, str(probed.changes.iloc[0]), PROBES[kind].expected(metric), len(pairs),
        len(both), _mean(pairs.mark_clean), _mean(pairs.mark_probed),
        _round(shift.mean) if shift else None, _round(shift.low) if shift else None,
        _round(shift.high) if shift else None, bool(shift and shift.flagged),
        bool(shift and shift.ci_beyond_tolerance), int((pairs.status_clean != "ok").sum()),
        int((pairs.status_probed != "ok").sum()), _mean(both.score_probed - both.score_clean),
    )


def _rate(flags: list[bool]) -> dict[str, Any]:
    return {"n": len(flags), "flagged": sum(flags), "flag_rate": _round(sum(flags) / len(flags)) if flags
            else None}


def detector_report(samples: Sequence[ProbeSample], variants: Sequence[ProbedVariant]) -> dict[str, Any]:
    """The injection detector on the clean responses and chunks (its false positives) and, per injection
    variant, on the text that carries the injection (the response, or the top-ranked chunk)."""
    injected: dict[str, list[bool]] = {}
    for v in variants:
        if v.kind == "injection":
            text = v.response if v.changes == "response" else v.context[0]
            injected.setdefault(v.variant, []).append(bool(injection_markers(text)))
    return {"clean_responses": _rate([bool(injection_markers(s.response)) for s in samples]),
            "clean_chunks": _rate([bool(injection_markers(c)) for s in samples for c in s.context]),
            "injected": [{"variant": name, **_rate(flags)} for name, flags in injected.items()]}


def build_probe_report(frame: pd.DataFrame, samples: Sequence[ProbeSample], probes: ProbesConfig,
                       judge: JudgeConfig, dataset: str, seconds: float,
                       detector: dict[str, Any] | None = None) -> ProbeReport:
    metrics = list(judge.ccrs.metrics)
    probed = frame[frame.variant != CLEAN]
    keys = probed[["kind", "variant", "metric"]].drop_duplicates()
    order = {m: i for i, m in enumerate(metrics)}
    keys = keys.assign(k=keys.kind.map(probes.kinds.index), m=keys.metric.map(order)).sort_values(
        ["k", "m"], kind="stable")
    cells = [probe_cell(frame, k.kind, k.variant, k.metric, probes) for k in keys.itertuples()]
    return ProbeReport(
        judge.model, judge.ccrs.prompt_version, judge.scoring, dataset, len(samples), list(probes.kinds),
        metrics, probes.tolerance, CONFIDENCE, probes.b, probes.seed,
        {"sentences": probes.sentences, "templates": list(probes.templates),
         "placements": list(probes.placements)},
        {kind: int(probed.loc[probed.kind == kind, "query_id"].nunique()) for kind in probes.kinds}, cells,
        [f"{c.kind}/{c.variant}/{c.metric}" for c in cells if c.flagged],
        {k: int(v) for k, v in frame.status.value_counts().items()}, len(frame), seconds=round(seconds, 2),
        detector=detector,
    )


# --- running ---------------------------------------------------------------------------------------------

@dataclass
class ProbeResult:
    report: ProbeReport
    frame: pd.DataFrame
    paths: dict[str, Path] = field(default_factory=dict)


def run_probes(samples: Sequence[ProbeSample], probes: ProbesConfig, judge: JudgeConfig, client: ClientConfig,
               base_url: str, out_dir: Path, dataset: str = "", progress: bool = False,
               identity: dict[str, Any] | None = None, checkpoint: StageCheckpoint | None = None,
               llm=None, draw: DrawShifts | None = None) -> ProbeResult:
    """Build the variants, judge them, report and write the outputs into `out_dir` (the plot where the
    caller gives it: `draw`, pipelines.reporting.probes.plot_probe_shifts)."""
    started = time.perf_counter()
    variants = build_probes(samples, probes.kinds, probes.options(), np.random.default_rng(probes.seed))
    metrics = list(judge.ccrs.metrics)
    judged = judge_variants(variants, judge, client, base_url, progress,
                            lambda v: reading_metrics(v, metrics), identity, checkpoint, llm)
    frame = probe_frame(judged)
    detector = detector_report(samples, variants) if "injection" in probes.kinds else None
    report = build_probe_report(frame, samples, probes, judge, dataset, time.perf_counter() - started,
                                detector)
    return ProbeResult(report, frame, write_probe_outputs(frame, report, out_dir, draw))


# --- outputs ---------------------------------------------------------------------------------------------

def json_safe(value: Any) -> Any:
    """NaN as null, in nested dicts and lists too."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def write_probe_outputs(frame: pd.DataFrame, report: ProbeReport, out_dir: Path,
                        draw: DrawShifts | None = None) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / filename for name, filename in PROBE_FILES.items()}
    frame.to_parquet(paths["judgments"], index=False)
    paths["report"].write_text(json.dumps(json_safe(report_dict(report)), indent=2, default=str))
    pd.DataFrame([asdict(c) for c in report.cells], columns=list(ProbeCell.__dataclass_fields__)).to_csv(
        paths["table"], index=False)
    if draw is not None:
        draw(report, paths["plot"])
    else:
        del paths["plot"]
    return paths


def report_dict(report: ProbeReport) -> dict[str, Any]:
    """The report as written: without a `detector` entry where no injection was probed."""
    data = asdict(report)
    if data["detector"] is None:
        del data["detector"]
    return data


def report_json(result: ProbeResult) -> dict:
    return json.loads(result.paths["report"].read_text())


# --- the run's probe stage -------------------------------------------------------------------------------

class ProbeSelectionError(ValueError):
    """`probes.system` names no system of the run."""


def run_probe_samples(queries_path: Path, retrieved_path: Path, generations_path: Path, top_k: int,
                      probes: ProbesConfig) -> tuple[list[ProbeSample], str | None]:
    """The first `probes.questions` questions (queries order) that `probes.system` answered (default: the
    first system by label with an answer), with the context its reader used and the reference answer."""
    generations = pd.read_parquet(generations_path)
    if probes.system is not None and probes.system not in set(generations.system):
        raise ProbeSelectionError(f"probes.system {probes.system!r} is not a system of this run; its "
                                  f"systems: {sorted(set(generations.system))}")
    answered = generations[(generations.status == "ok") & generations.answer.fillna("").str.strip().ne("")]
    system = probes.system or (min(answered.system) if len(answered) else None)
    queries = pd.read_parquet(queries_path)
    rank = {qid: i for i, qid in enumerate(queries.query_id.astype(str))}
    chosen = answered[answered.system == system]
    chosen = chosen.iloc[np.argsort(chosen.query_id.astype(str).map(rank).to_numpy(), kind="stable")]
    samples, _ = load_samples(queries, pd.read_parquet(retrieved_path), chosen.head(probes.questions), top_k)
    return [ProbeSample(s.query_id, s.question, s.response, s.ground_truth, tuple(s.context),
                        tuple(s.exact_answers)) for s in samples], system


def probe_stage_key(inputs: Sequence[Path], top_k: int, probes: ProbesConfig, judge: JudgeConfig,
                    client: ClientConfig, identity: dict[str, Any] | None,
                    draw: DrawShifts | None = None) -> str:
    """Like the judge stage's key: inputs, judge settings (not where it is reached), seed, top-k, the
    endpoint's identity, the probes' settings and this code with the CCRS templates (and `draw`'s module)."""
    config = {"probes": probes, "judge": judge.model_dump(mode="json", exclude=JUDGE_ENDPOINT_FIELDS),
              "seed": client.seed, "top_k": top_k, **({"endpoint": identity} if identity else {})}
    plot = (draw.__module__,) if draw is not None else ()
    code = code_version(__name__, f"judges.{ccrs.SUITE}", *plot, data_dirs=(PROMPTS_ROOT / ccrs.SUITE,))
    return stage_key(PROBES_STAGE, config, [file_fingerprint(path) for path in inputs], code)


def run_probe_stage(run_dir: Path, inputs: tuple[Path, Path, Path], top_k: int, probes: ProbesConfig,
                    judge: JudgeConfig, client: ClientConfig, base_url: str,
                    identity: dict[str, Any] | None = None, force: bool = False,
                    progress: bool = True, draw: DrawShifts | None = None) -> StageResult:
    """`inputs`: the run's queries, retrieved and generations files. Writes PROBE_FILES into
    run_dir/probes/; a killed run resumes from the stage's checkpoint, a finished one with the same key is
    reused."""
    key = probe_stage_key(inputs, top_k, probes, judge, client, identity, draw)

    def compute(out_dir: Path) -> dict:
        samples, system = run_probe_samples(*inputs, top_k, probes)
        result = run_probes(samples, probes, judge, client, base_url, out_dir,
                            dataset=f"the run's answers of system {system}", progress=progress,
                            identity=identity, checkpoint=StageCheckpoint(run_dir, PROBES_STAGE, key),
                            draw=draw)
        report = result.report
        return {"system": system, "questions": report.n_questions, "judgments": report.judgments,
                "status_counts": report.status_counts, "cells": len(report.cells), "flagged": report.flagged,
                "seconds": report.seconds}

    return run_stage(run_dir, PROBES_STAGE, key, compute, force=force)


def logged_probe_files(run_dir: Path) -> tuple[dict | None, list[Path]]:
    """The probe stage's report and files, for the track stage (None, [] where the run has none)."""
    layout = RunLayout(run_dir)
    if not layout.probe_report.exists():
        return None, []
    files = [layout.stage_dir(PROBES_STAGE) / name for name in PROBE_FILES.values()]
    return json.loads(layout.probe_report.read_text()), [f for f in files if f.exists()]
