"""Judge stage, one per registered judge suite (`judges: [ccrs, grouse, vera, ragchecker]`).

The suite (judges/suite.py) plans units of work per (query, system) sample; this stage does the rest the
same way for every suite: the judgment cache is consulted first, then this stage's checkpoint (a resumed
run), the rest is fanned out from Ray tasks against the judge endpoint, saved shard by shard, and the
stage refuses to land unless there is exactly one row per (query, system, metric), or where the judge
session asks each unit k > 1 times one per (query, system, metric, repeat) (judges/repeats.py).
Outputs in `RunLayout.judge_dir(suite)`: judgments.parquet (every judgment, failures with raw text and
reason) and scores.parquet (long format, successful judgments only: a failed one is absent, never a NaN
or a 0); both have an integer `repeat` column (0..k-1) when k > 1, and only then.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from judges.client import LLMClient, response_format_refusal
from judges.config import IF_ACCEPTED, ClientConfig, JudgeConfig
from judges.suite import Judgment, JudgeSuite, get_suite
from judges.templates import PROMPTS_ROOT
from tasks.runtime.fanout import FanOutReport, on_driver_node, progress_bar
from tasks.runtime.judge_session import (
    JudgeSession,
    keyed_judge_settings,
    load_samples,
    suspicious_texts,
)
from tasks.runtime.judge_batches import (
    BatchStore,
    concatenate,
    merge_summaries,
    scored_rows,
)
from tasks.runtime.judge_loop import BOUNDED_BATCHES, JudgeLoopPolicy, merged_settings
from tasks.runtime.layout import JUDGMENTS_FILE, SCORES_FILE, RunLayout
from stats.scores import REPEAT_COLUMN
from tasks.runtime.stage import (
    StageResult,
    code_version,
    file_fingerprint,
    run_stage,
    stage_key,
)

JUDGMENT_COLUMNS = [*Judgment.COLUMNS, "suspicious", "injection_markers"]
SCORE_COLUMNS = ["query_id", "system", "metric", "score"]


@dataclass
class JudgingOutputs:
    suite: str
    judgments_path: Path
    scores_path: Path
    summary: dict[str, Any]
    reused: bool = False


class IncompleteJudgingError(RuntimeError):
    """The judging stage did not end with exactly one row per (query, system, metric)."""


def judge_client_config(judge: JudgeConfig, client: ClientConfig) -> ClientConfig:
    """The client settings of the judge's requests: the run's, with the judge's own key when the judge has
    an endpoint of its own (judge.base_url)."""
    return client.model_copy(update={"api_key_env": judge.api_key_env}) if judge.base_url else client


def probe_judge(suites: list[str], judge: JudgeConfig, client: ClientConfig, base_url: str) -> None:
    """Before any judging: an endpoint that cannot give what the judge config asks of it fails now, with
    one clear line, not as a silent fallback on every judgment (`scoring: expected` needs token
    log-probabilities and vLLM's continue_final_message, or for `expected.continuation: batched` its
    return_prompt_text and completions with a list of prompts)."""
    reads_scoring = any(getattr(get_suite(name), "reads_scoring", False) for name in suites)
    if judge.scoring != "expected" or not reads_scoring:
        return
    from judges.scoring import probe_expected_support

    with LLMClient(client.model_copy(update={"max_retries": 1}), base_url) as llm:
        probe_expected_support(llm, judge.model, judge.expected.top_logprobs, judge.expected.continuation)


def fit_judge(suites: list[str], judge: JudgeConfig, client: ClientConfig,
              base_url: str) -> tuple[JudgeConfig, str | None]:
    """Before any judging, against the judge's endpoint: what `scoring: expected` needs is probed
    (probe_judge) and `structured_output: if_accepted` decided (one request with OpenAI's response_format).
    Returns the judge config to judge with and, where the endpoint decided a setting, the line that says
    which settings the judge got."""
    probe_judge(suites, judge, client, base_url)
    fitted, refusal = structured_output_fitted(judge, client, base_url)
    if fitted is judge:
        return judge, None
    return fitted, judge_settings_line(fitted, refusal)


def structured_output_fitted(judge: JudgeConfig, client: ClientConfig,
                             base_url: str) -> tuple[JudgeConfig, str | None]:
    """`structured_output: if_accepted` turned on or off by the endpoint's answer to one probe, and why it
    is off (None: on); any other setting is returned as it is."""
    if judge.structured_output != IF_ACCEPTED:
        return judge, None
    with LLMClient(client.model_copy(update={"max_retries": 1}), base_url) as probe:
        refusal = response_format_refusal(probe, judge.model)
    return judge.model_copy(update={"structured_output": refusal is None}), refusal


def judge_settings_line(judge: JudgeConfig, refusal: str | None) -> str:
    """`judge: settings for an OpenAI-compatible endpoint: integer marks, ...`: what a fitted judge got."""
    marks = ("integer marks, no vLLM-only request field" if judge.scoring == "integer"
             else "expected marks (token log-probabilities and vLLM's continue_final_message: available)")
    marks += f", a window of {judge.context_window:,} tokens"
    output = (f"free-text marks (the endpoint refused response_format: {refusal})" if refusal
              else "structured output through OpenAI's response_format (the endpoint accepts it)")
    return (f"judge: settings for an OpenAI-compatible endpoint: {marks}, {output}; --scoring or --config "
            "choose others")


def check_complete(frame: pd.DataFrame, generations: pd.DataFrame, metrics: tuple[str, ...],
                   repeats: int = 1) -> None:
    """Exactly one judgment or recorded failure per generated (query, system) and metric, and with
    `repeats` > 1 per repeat 0..repeats-1 too: no duplicate, none missing. Checked before the stage's
    output is written, so a broken run never lands."""
    keys = ["query_id", "system", "metric"] + ([REPEAT_COLUMN] if repeats > 1 else [])
    if repeats > 1 and REPEAT_COLUMN not in frame:
        raise IncompleteJudgingError(f"{repeats} repeats asked for, but the judgments have no "
                                     f"{REPEAT_COLUMN} column")
    duplicated = frame[frame.duplicated(keys, keep=False)]
    if not duplicated.empty:
        raise IncompleteJudgingError(f"{len(duplicated)} duplicate judgment rows, e.g. "
                                     f"{duplicated[keys].head(3).to_dict('records')}")
    expected = {
        (str(q), str(s), m, *extra) for q, s in zip(generations["query_id"], generations["system"])
        for m in metrics for extra in ([(r,) for r in range(repeats)] if repeats > 1 else [()])
    }
    columns = [frame["query_id"].astype(str), frame["system"].astype(str), frame["metric"]]
    present = set(zip(*columns, *([frame[REPEAT_COLUMN].astype(int)] if repeats > 1 else [])))
    if expected != present:
        missing, extra = sorted(expected - present), sorted(present - expected)
        raise IncompleteJudgingError(f"{len(missing)} judgments missing (e.g. {missing[:3]}), "
                                     f"{len(extra)} unexpected (e.g. {extra[:3]})")


def flag_suspicious(frame: pd.DataFrame, flags: dict[tuple[str, str], str]) -> pd.DataFrame:
    """Judgments of steering-looking inputs stay scored but are flagged, so a reader can filter them."""
    keys = list(zip(frame["query_id"].astype(str), frame["system"].astype(str)))
    frame["injection_markers"] = [flags.get(key, "") for key in keys]
    frame["suspicious"] = frame["injection_markers"] != ""
    return frame


def judgments_frame(judgments: list[Judgment], flags: dict[tuple[str, str], str] | None = None,
                    metric_order: tuple[str, ...] | None = None) -> pd.DataFrame:
    frame = pd.DataFrame([j.record() for j in judgments], columns=list(Judgment.COLUMNS))
    frame = flag_suspicious(frame, flags or {})[JUDGMENT_COLUMNS]
    frame["llm_score"] = frame["llm_score"].astype("Int64")
    frame["prefix_cached_tokens"] = frame["prefix_cached_tokens"].fillna(0).astype("int64")
    frame["score"] = frame["score"].astype("float64")
    frame["em"] = frame["em"].astype("float64")
    frame["llm_score_expected"] = frame["llm_score_expected"].astype("float64")
    frame["score_mass"] = frame["score_mass"].astype("float64")
    if frame[REPEAT_COLUMN].isna().all():  # k = 1: the files have the columns they always had
        frame = frame.drop(columns=REPEAT_COLUMN)
    else:
        frame[REPEAT_COLUMN] = frame[REPEAT_COLUMN].astype("int64")
    order = {m: i for i, m in enumerate(metric_order or sorted(frame["metric"].unique()))}
    frame["_order"] = frame["metric"].map(order)
    keys = ["system", "query_id", "_order"] + ([REPEAT_COLUMN] if REPEAT_COLUMN in frame else [])
    return frame.sort_values(keys).drop(columns="_order").reset_index(drop=True)


def score_columns(frame: pd.DataFrame) -> list[str]:
    """scores.parquet's columns: SCORE_COLUMNS, and `repeat` where the judgments have one."""
    return SCORE_COLUMNS + ([REPEAT_COLUMN] if REPEAT_COLUMN in frame.columns else [])


def judging_summary(frame: pd.DataFrame, stats: dict[str, Any], seconds: float, suite: str,
                    prompt_version: str, judge_model: str) -> dict:
    failed = frame[frame["status"] == "failed"]
    fresh = frame[~frame["cached"]]
    flagged = frame.loc[frame["suspicious"], ["query_id", "system"]].drop_duplicates()
    return {
        "suite": suite,
        "judgments": len(frame),
        "prompt_version": prompt_version,
        "judge_model": judge_model,
        "status_counts": {k: int(v) for k, v in frame["status"].value_counts().items()},
        "scoring_counts": {k: int(v) for k, v in frame.loc[frame["status"] == "ok", "scoring"]
                           .value_counts().sort_index().items()},
        "failures": {f"{m}/{s}": int(n) for (m, s), n in failed.groupby(["metric", "system"]).size().items()},
        "failure_reasons": {
            k: int(v) for k, v in failed["reason"].str.slice(0, 60).value_counts().head(10).items()
        },
        "judge_calls": int(fresh["attempts"].sum()),
        "prompt_tokens": int(fresh["prompt_tokens"].sum()),
        "completion_tokens": int(fresh["completion_tokens"].sum()),
        # of prompt_tokens, what the judge server's prefix cache served (vLLM's own count) and the rest
        "prefix_cached_prompt_tokens": int(fresh["prefix_cached_tokens"].sum()),
        "computed_prompt_tokens": int((fresh["prompt_tokens"] - fresh["prefix_cached_tokens"]).sum()),
        "cached_prompt_tokens": int(frame.loc[frame["cached"], "prompt_tokens"].sum()),
        "context_truncated_judgments": int((frame["n_context_truncated"] > 0).sum()),
        # chunks the judge-window fit left out of the judge prompts, summed over judgments (each metric's
        # prompt is fitted on its own, so a chunk left out of two metrics' prompts counts twice)
        "context_chunks_dropped": int(frame["n_context_truncated"].sum()),
        "context_chunks_dropped_by_metric": {
            k: int(v) for k, v in frame.groupby("metric")["n_context_truncated"].sum().items() if v > 0},
        "suspicious_samples": len(flagged),
        "suspicious_by_system": {k: int(v) for k, v in flagged["system"].value_counts().sort_index().items()},
        **stats,
        "seconds": round(seconds, 2),
    }


def write_judgments(frame: pd.DataFrame, out_dir: Path) -> None:
    """Every judgment (failures included) and, for the reducer, the long-format scores of the
    successful ones only: a failed judgment is absent there, never a NaN or a 0."""
    frame.to_parquet(out_dir / JUDGMENTS_FILE, index=False)
    frame.loc[frame["score"].notna(), score_columns(frame)].to_parquet(out_dir / SCORES_FILE, index=False)


def stage_code_version(suite: str) -> str:
    """This stage's code, the suite's module and its prompt templates."""
    return code_version(__name__, f"judges.{suite}", data_dirs=(PROMPTS_ROOT / suite,))


def run_judging(
    run_dir: Path,
    suite_name: str,
    queries_path: Path,
    retrieved_path: Path,
    generations_path: Path,
    judge: JudgeConfig,
    client: ClientConfig,
    base_url: str,
    top_k: int,
    force: bool = False,
    progress: bool = True,
    identity: dict[str, Any] | None = None,
    policy: JudgeLoopPolicy = BOUNDED_BATCHES,
) -> JudgingOutputs:
    """The judge stage, in bounded batches of whole questions (tasks/runtime/judge_batches.py,
    ClientConfig.batch_samples): each batch is planned, judged, checked complete and written as a part;
    the output files are the parts concatenated. A resumed run skips the written batches.

    `policy` (tasks/runtime/judge_loop.py) orders the questions into the batches (its looks) and may stop the
    stage after a look; it adds what it declares to the stage's key and what it records to its summary. The
    default judges every question; a run extension that turns another on hands it in (the pipeline asks the
    registry)."""
    suite = get_suite(suite_name)
    judge = run_bound_judge(suite, judge, run_dir, retrieved_path)
    stage = RunLayout.judge_stage(suite_name)
    key = judging_key(suite_name, (queries_path, retrieved_path, generations_path), judge, client, top_k,
                      identity, policy.key_settings())

    def compute(out_dir: Path) -> dict:
        started = time.perf_counter()
        store = BatchStore.of(run_dir, stage, key, client.batch_samples)
        batches = policy.looks(generations_path, client.batch_samples)
        on_driver_node(store.split_inputs, {"queries": queries_path, "retrieved": retrieved_path,
                                            "generations": generations_path}, batches, top_k)
        batch_judge = _BatchJudge(suite, judge, client, base_url, top_k, identity, store)
        bar = _judgments_bar(generations_path, batch_judge.session) if progress else None
        summaries = []
        for b in range(len(batches)):
            summaries.append(batch_judge(b, bar))
            if policy.stop_after(store.parts(b + 1), _judged_order(batches, b)):
                break
        if bar is not None:
            bar.close()
        done = len(summaries)
        if done:
            concatenate(store.parts(done), {out_dir / JUDGMENTS_FILE: None,
                                            out_dir / SCORES_FILE: scored_rows(score_columns)})
        else:  # nothing was generated: the stage's files exist, with their columns and no row
            write_judgments(judgments_frame([], metric_order=suite.selected_metrics(judge)), out_dir)
        summary = merge_summaries(summaries)
        summary.update(policy.record(out_dir, len(_judged_order(batches, done - 1)) if done else 0))
        if done < len(batches):  # stopped early: why the questions left have no judgment
            summary["not_judged"] = policy.not_judged
        return {**summary, "batches": done, "seconds": round(time.perf_counter() - started, 2)}

    return judging_outputs(suite_name, run_stage(run_dir, stage, key, compute, force=force))


def run_bound_judge(suite: JudgeSuite, judge: JudgeConfig, run_dir: Path,
                    retrieved_path: Path) -> JudgeConfig:
    """The judge config `suite` judges this run with: a run-level input of the suite (gqm_bertscore's idf
    corpus: the run's chunks, else its retrieved contexts) bound into its settings, so that the stage key
    and the judgments' keys cover it."""
    return suite.bind_run(judge, {"chunks": RunLayout(run_dir).chunks, "retrieved": Path(retrieved_path)})


@dataclass
class _BatchJudge:
    """Judges one batch of questions (or, for a batch a killed run had written, reads its summary)."""

    suite: JudgeSuite
    judge: JudgeConfig
    client: ClientConfig
    base_url: str
    top_k: int
    identity: dict[str, Any] | None
    store: BatchStore

    def __post_init__(self) -> None:
        self.session = JudgeSession.for_stage(self.suite, self.judge, self.client, self.base_url,
                                              self.identity)
        self.metrics = self.session.metrics()

    def __call__(self, batch: int, bar) -> dict[str, Any]:
        if self.store.finished(batch):
            return self._finished_before(batch, bar)
        started = time.perf_counter()
        inputs = self.store.read_inputs(batch)
        samples, failed = load_samples(inputs["queries"], inputs["retrieved"], inputs["generations"],
                                       self.top_k)
        judgments, stats = self.session.judge_samples(samples, bar, self.store.checkpoint(batch))
        judgments += self.session.failed_generations(failed)
        frame = judgments_frame(judgments, suspicious_texts(samples), self.metrics)
        check_complete(frame, inputs["generations"], self.metrics, self.session.copies)
        if bar is not None:
            bar.update(len(failed) * len(self.metrics) * self.session.copies)
        summary = judging_summary(frame, stats, time.perf_counter() - started, self.suite.name,
                                  self.suite.prompt_version(self.judge), self.judge.model)
        summary.update(self.session.summary_entries())
        self.store.write_part(batch, frame, summary)
        return summary

    def _finished_before(self, batch: int, bar) -> dict[str, Any]:
        """A batch a killed run had written: its judgments count as resumed units, not as requests of
        this run."""
        summary = self.store.read_summary(batch)
        units = summary["cache_hits"] + summary["resumed"] + summary["judge_requests"]
        summary.update(cache_hits=0, resumed=units, judge_requests=0,
                       requests=FanOutReport().as_dict(), resumed_batches=1)
        if bar is not None:
            bar.update(summary["judgments"])
        return summary


def _judgments_bar(generations_path: Path, session: JudgeSession):
    """One bar for the stage, in judgments (rows x metrics x the session's copies of each), moving as each
    judgment comes back."""
    rows = pq.ParquetFile(generations_path).metadata.num_rows
    return progress_bar(rows * len(session.metrics()) * session.copies, f"judge {session.suite.name}",
                        "judgment")


def _judged_order(batches: list[list[str]], last: int) -> list[str]:
    return [query_id for batch in batches[: last + 1] for query_id in batch]


def judging_key(suite_name: str, inputs: tuple[Path, Path, Path], judge: JudgeConfig, client: ClientConfig,
                top_k: int, identity: dict[str, Any] | None = None,
                policy_settings: dict[str, Any] | None = None) -> str:
    """The judge stage's key: its inputs (queries, retrieved, generations), the judge settings, the seed,
    top-k, the code, what the endpoint reports serving (`identity`) and what the stage's loop policy
    declares (`policy_settings`, JudgeLoopPolicy.key_settings). Where the judge is reached (base_url, its
    key) does not change a judgment."""
    config = {"judge": keyed_judge_settings(judge), "seed": client.seed, "top_k": top_k}
    if identity:
        config["endpoint"] = identity
    config = merged_settings(config, policy_settings or {})
    upstream = [file_fingerprint(path) for path in inputs]
    return stage_key(RunLayout.judge_stage(suite_name), config, upstream, stage_code_version(suite_name))


def judging_outputs(suite: str, result: StageResult) -> JudgingOutputs:
    return JudgingOutputs(suite, result.out_dir / JUDGMENTS_FILE, result.out_dir / SCORES_FILE,
                          result.summary, result.reused)
