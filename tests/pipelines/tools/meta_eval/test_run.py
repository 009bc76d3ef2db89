"""A judge's meta-evaluation (pipelines/tools/meta_eval/run.py, agreement.py): its outputs, the agreement of
two results, the GroUSE judging stage, and a small real run."""
import json

import pandas as pd
import pytest

from judges.config import ClientConfig, GrouseOptions, JudgeConfig, ReaderConfig
from judges.grouse import GROUSE_METRICS, METRIC_ORDER
from pipelines.tools.meta_eval.agreement import agreement_between
from pipelines.tools.meta_eval.run import MetaEvalResult, run_meta_eval, write_outputs
from tasks.calibration import check_test, pass_rates
from tests.tasks.test_calibration import PERFECT_T1, TRAIN, judgments_of


def result_of(tests, values_by_type):
    outcomes = [check_test(t, judgments_of(t, values_by_type.get(t.test_type, {}))) for t in tests]
    return MetaEvalResult("grouse", "m", "train.jsonl", len(tests), pass_rates(outcomes), outcomes)


def test_outputs_and_agreement_between_two_results(tmp_path):
    a = result_of(TRAIN[:2], {1: PERFECT_T1})
    b = result_of(TRAIN[:2], {1: {**PERFECT_T1, "completeness": 4}})
    paths_a = write_outputs(a, TRAIN, tmp_path / "a")
    paths_b = write_outputs(b, TRAIN, tmp_path / "b")
    assert paths_a["matrix"].read_bytes()[:4] == b"\x89PNG"
    failures = [json.loads(line) for line in paths_b["failures"].read_text().splitlines()]
    assert (failures[0]["test_id"], failures[0]["metric"]) == (TRAIN[0].test_id, "completeness")
    assert failures[0]["raw"] == "raw text"
    result = agreement_between(paths_a["results"], paths_b["results"])
    assert result["n_samples"] == 2 and result["faithfulness"]["macro_f1"] == 1.0


def test_grouse_stage_sends_no_empty_answer_and_records_failed_generations(tmp_path, bioasq_inputs,
                                                                           judge_cache_dir):
    from tasks.generate import run_generation
    from tasks.judge import run_judging

    readers = [ReaderConfig(name="extractive", kind="extractive", max_sentences=2)]
    gens_path = run_generation(tmp_path / "run", *bioasq_inputs, readers, ClientConfig(), "http://unused/v1",
                               top_k=2, progress=False).path
    gens = pd.read_parquet(gens_path).head(3)
    gens["answer"] = ""
    gens.loc[2, ["status", "error", "answer"]] = ["failed", "HTTP 500", None]
    gens.to_parquet(gens_path, index=False)
    out = run_judging(tmp_path / "run", "grouse", *bioasq_inputs, gens_path, JudgeConfig(), ClientConfig(),
                      "http://127.0.0.1:9/v1", top_k=2, progress=False)
    assert out.judgments_path.parent.name == "judge_grouse"
    frame = pd.read_parquet(out.judgments_path)
    assert len(frame) == 3 * 6 and (frame.status == "empty_response").sum() == 12
    assert set(frame.suite) == {"grouse"} and frame.score.isna().all()
    failed = frame[frame.status == "failed"]
    assert len(failed) == 6 and failed.reason.str.startswith("generation failed: HTTP 500").all()
    assert pd.read_parquet(out.scores_path).empty and out.summary["judge_calls"] == 0


# --- against the real CPU judge ---------------------------------------------------------------------------

SMALL_JUDGE = {"max_reasks": 0, "grouse": GrouseOptions(max_tokens=128, faithfulness_max_tokens=256),
               "structured_output": True,
               "cache": False}


@pytest.mark.llm
def test_real_ccrs_calibration_on_one_pair_of_variants(llm_endpoint):
    tests = [t for t in TRAIN if t.test_type in (1, 16)]
    judge = JudgeConfig(model=llm_endpoint.judge_model, cache=False)
    result = run_meta_eval(tests, "train", "ccrs", judge, ClientConfig(max_concurrency=8),
                           llm_endpoint.base_url)
    assert result.outcomes == [] and result.ccrs["judgments"] == 4
    pairs = result.ccrs["pairs"]
    assert [(p["test_type"], p["metric"]) for p in pairs] == [(16, "AC"), (16, "CC")]
    for pair in pairs:
        assert pair["passed"] == (pair["variant_score"] is not None and pair["correct_score"] is not None
                                  and pair["variant_score"] < pair["correct_score"])
    assert result.ccrs["pass_rate"] in (0.0, 0.5, 1.0)


@pytest.mark.llm
def test_grouse_judging_stage_writes_long_scores(tmp_path, bioasq_inputs, llm_endpoint):
    from tasks.generate import run_generation
    from tasks.judge import run_judging

    # the citing prompt (what `prompt: auto` gives readers when grouse judges): [i] after each sentence
    readers = [ReaderConfig(name="extractive", kind="extractive", max_sentences=2, prompt="citing")]
    gens_path = run_generation(tmp_path / "run", *bioasq_inputs, readers, ClientConfig(), "http://unused/v1",
                               top_k=2, progress=False).path
    gens = pd.read_parquet(gens_path).head(2)
    assert gens.answer.str.contains(r"\[[12]\]").all() and "[1]" in gens.loc[0, "prompt"]
    gens.loc[1, "answer"] = ""
    gens.to_parquet(gens_path, index=False)
    judge = JudgeConfig(model=llm_endpoint.judge_model, **SMALL_JUDGE)
    args = (tmp_path / "run", "grouse", *bioasq_inputs, gens_path, judge, ClientConfig(max_concurrency=8),
            llm_endpoint.base_url)
    out = run_judging(*args, top_k=2, progress=False)
    frame = pd.read_parquet(out.judgments_path)
    assert len(frame) == 2 * 6 and set(frame.metric) == set(METRIC_ORDER)
    assert (frame[frame.system == gens.loc[1, "system"]].query_id == gens.loc[1, "query_id"]).any()
    assert set(frame.status) <= {"ok", "skipped", "failed", "empty_response"}
    assert (frame.status == "empty_response").sum() == 6
    failed = frame[frame.status == "failed"]
    assert failed.reason.notna().all()
    assert set(frame.suite) == {"grouse"} and set(frame.prompt_version) == {GrouseOptions().prompt_version}
    marked = frame[frame.llm_score.notna()]
    assert all(s == GROUSE_METRICS[m].normalize(v)
               for m, v, s in zip(marked.metric, marked.llm_score, marked.score))
    judged = frame[frame.status != "empty_response"].merge(gens[["query_id", "system", "n_chunks_used"]])
    assert len(judged) == 6  # the chunks the reader saw, fitted to the judge window:
    assert (judged.n_context_chunks + judged.n_context_truncated == judged.n_chunks_used).all()
    scores = pd.read_parquet(out.scores_path)
    assert list(scores.columns) == ["query_id", "system", "metric", "score"]
    assert scores.score.between(0, 1).all() and scores.score.notna().all()
    assert run_judging(*args, top_k=2, progress=False).reused
