(
    """Meta-evaluation: condition checking, pass rates, CCRS pairs, outputs, agreement, MLflow; """
    """a small real run."""
)
import json
from pathlib import Path

import pandas as pd
import pytest

from judges.config import ClientConfig, GrouseOptions, JudgeConfig, ReaderConfig
from judges.grouse import GROUSE_METRICS, METRIC_ORDER
from judges.grouse_unit_tests import load_unit_tests
from judges.suite import Judgment, Sample, Usage, detail_json
from pipelines.tools.meta_eval import (
    MetaEvalResult,
    agreement_between,
    ccrs_pairs,
    check_test,
    log_meta_eval,
    pass_rates,
    run_meta_eval,
    write_outputs,
)
from tests.fakes import FakeLLMClient

DATA = Path(__file__).resolve().parents[3] / "data" / "grouse-bioasq"
TRAIN = load_unit_tests(DATA / "train.jsonl")


def _judgments(test, values: dict, failed=()):
    out = []
    for metric in METRIC_ORDER:
        status = "failed" if metric in failed else "ok"
        mark = values.get(metric)
        spec = GROUSE_METRICS[metric]
        out.append(Judgment.of(Sample(test.test_id, "unit-test", "", "", "", []), spec, status=status,
                               prompt_version="v1", judge_model="m", usage=Usage(attempts=1),
                               score=spec.normalize(mark), llm_score=mark,
                               reason="bad" if status == "failed" else None, raw="raw text",
                               detail=detail_json(justification=f"why {metric}")))
    return out


PERFECT_T1 = {"answer_relevancy": 5, "completeness": 5, "faithfulness": 1}


def test_perfect_marks_pass_every_condition():
    outcome = check_test(TRAIN[0], _judgments(TRAIN[0], PERFECT_T1))
    assert outcome.passed and all(c["passed"] for c in outcome.checks.values())


def test_wrong_mark_and_failed_judgment_fail_their_condition():
    outcome = check_test(TRAIN[0], _judgments(TRAIN[0], {**PERFECT_T1, "completeness": 4},
                                              failed=("faithfulness",)))
    assert not outcome.checks["completeness"]["passed"] and not outcome.checks["faithfulness"]["passed"]
    assert (outcome.checks["faithfulness"]["raw"] == "raw text"
            and outcome.checks["answer_relevancy"]["passed"])


def test_checks_hold_the_raw_mark_and_the_justification():
    outcome = check_test(TRAIN[0], _judgments(TRAIN[0], {**PERFECT_T1, "completeness": 4}))
    check = outcome.checks["completeness"]
    assert (check["value"], check["condition"], check["status"]) == (4, "==5", "ok")  # the mark, not 0.75
    assert check["justification"] == "why completeness" and outcome.calls == 6


def test_refusal_test_needs_nulls_and_derived_acceptance():
    t2 = TRAIN[1]  # type 2: correct refusal, references without an answer
    ok = check_test(t2, _judgments(t2, {"positive_acceptance": 1, "negative_rejection": 1}))
    assert ok.passed
    bad = check_test(t2, _judgments(t2, {"answer_relevancy": 5, "negative_rejection": 0}))
    assert not bad.checks["answer_relevancy"]["passed"] and not bad.checks["negative_rejection"]["passed"]


def test_pass_rates_per_metric_and_overall():
    good = check_test(TRAIN[0], _judgments(TRAIN[0], PERFECT_T1))
    bad = check_test(TRAIN[0], _judgments(TRAIN[0], {**PERFECT_T1, "completeness": 4}))
    rates = pass_rates([good, bad])
    assert rates["completeness"] == 0.5 and rates["answer_relevancy"] == 1.0
    assert rates["overall"] == pytest.approx(11 / 12) and rates["tests_all_passed"] == 0.5


def test_ccrs_pairs_compare_variants_with_the_correct_answer_of_their_set():
    pairs = ccrs_pairs(TRAIN)
    assert {(v.test_type, m) for _, v, m in pairs} == {(16, "AC"), (16, "CC"), (8, "QR"), (8, "ID"),
                                                        (10, "IR"), (11, "AC"), (11, "IR"), (11, "QR"),
                                                        (12, "AC"), (12, "IR")}
    assert all(b.test_type == 1 and b.references == v.references for b, v, _ in pairs)


def _block(prompt: str, tag: str) -> str:
    return prompt.split(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def fake_judge(grouse_marks: dict[str, object], ccrs_score) -> FakeLLMClient:
    """The fake client as a judge: GroUSE replies by metric, CCRS replies by graded answer."""

    def judge(request) -> str:
        prompt = request.messages[0]["content"]
        if "<answer_2>" not in prompt:
            return str(ccrs_score(prompt))
        metric = next(m for m in grouse_marks if f"Metric: {m.replace('_', ' ').upper()}" in prompt)
        mark = grouse_marks[metric]
        # a per-sentence analysis, as the paper layout's faithfulness reply needs one with a mark
        analysis = [{"sentence": "s", "citation_follows": "yes", "citation_is_right": "yes",
                     "content_unchanged": "yes"}]
        return json.dumps({"answer_1": {"justification": "a", "score": mark},
                           "answer_2": {"justification": f"why {metric}", "score": mark,
                                        "sentence_analysis": analysis}})

    return FakeLLMClient(judge, prompt_tokens=3, completion_tokens=2)


class Bar:
    """A progress bar's `update`, counted."""

    def __init__(self):
        self.n = 0

    def update(self, n: int) -> None:
        self.n += n


@pytest.mark.parametrize("version", ["paper", "v1"])
def test_grouse_tests_run_the_figure_4_calls_and_check_the_conditions(version):
    from pipelines.tools.meta_eval import run_grouse_tests

    client = fake_judge({"answer_relevancy": 5, "completeness": 5, "faithfulness": 1, "usefulness": None},
                       None)
    # a window wide enough for the whole reply budgets (the fake model's tokens are a character estimate)
    grouse = GrouseOptions(prompt_version=version, max_tokens=200, faithfulness_max_tokens=700)
    judge = JudgeConfig(model="m", cache=False, context_window=8192, grouse=grouse)
    bar = Bar()
    outcomes = run_grouse_tests(TRAIN[:1], judge, client, progress=bar, protocol="pipeline")
    assert list(outcomes) == ["pipeline"]
    (outcome,) = outcomes["pipeline"]
    assert outcome.passed and bar.n == len(METRIC_ORDER) and outcome.calls == 3  # usefulness not asked
    assert outcome.checks["answer_relevancy"]["justification"] == "why answer_relevancy"
    assert [r.max_tokens for r in client.requests] == [200, 200, 700]
    prompt = client.requests[1].messages[0]["content"]  # completeness: the test's references, its two answers
    assert all(ref[:40] in prompt for ref in TRAIN[0].references)
    assert ((_block(prompt, "answer_1"), _block(prompt, "answer_2"))
            == (TRAIN[0].expected_answer, TRAIN[0].answer))
    assert prompt.index("<answer_1>") < prompt.index("<answer_2>")


def test_all_calls_asks_what_the_pipeline_skips_and_a_mark_there_fails_a_none_condition():
    """Type 1 expects usefulness ==None: the pipeline never asks it (a response was given) and the
    condition holds without the judge; the paper's protocol asks, and a judge that gives a mark fails."""
    from pipelines.tools.meta_eval import run_grouse_tests

    client = fake_judge({"answer_relevancy": 5, "completeness": 5, "faithfulness": 1, "usefulness": 1}, None)
    grouse = GrouseOptions(max_tokens=200, faithfulness_max_tokens=700)
    judge = JudgeConfig(model="m", cache=False, context_window=8192, grouse=grouse)
    outcomes = run_grouse_tests(TRAIN[:1], judge, client)
    assert list(outcomes) == ["all-calls", "pipeline"] and len(client.requests) == 4
    (asked,), (gated,) = outcomes["all-calls"], outcomes["pipeline"]
    assert asked.checks["usefulness"]["value"] == 1 and not asked.checks["usefulness"]["passed"]
    assert gated.checks["usefulness"]["status"] == "skipped" and gated.checks["usefulness"]["passed"]
    assert gated.passed and not asked.passed
    assert {m: c["value"] for m, c in asked.checks.items() if m != "usefulness"} == \
        {m: c["value"] for m, c in gated.checks.items() if m != "usefulness"}


def test_failure_mode_table_follows_table_6():
    from judges.grouse_unit_tests import FAILURE_MODES
    from pipelines.tools.meta_eval import failure_mode_table

    assert {t for t in range(1, 17) if t not in FAILURE_MODES} == set(range(1, 8))  # the highest-marks tests
    tests = [t for t in TRAIN if t.test_type in (8, 9, 10)]
    marks = {8: {"answer_relevancy": 4, "completeness": 5, "faithfulness": 1},     # all six hold
             9: {"answer_relevancy": 5, "faithfulness": 1, "negative_rejection": 0},  # relevancy wrong
             10: {"answer_relevancy": 5, "completeness": 4, "faithfulness": 1}}    # all six hold
    table = failure_mode_table([check_test(t, _judgments(t, marks[t.test_type])) for t in tests])
    assert (table["FM1"]["tests"], table["FM1"]["tests_all_passed"]) == (2, 0.5)  # types 8 and 9
    assert table["FM1"]["checks_passed"] == pytest.approx(11 / 12)
    assert (table["FM2"]["tests"], table["FM2"]["tests_all_passed"]) == (1, 0.0)
    assert (table["FM3"]["tests"], table["FM3"]["tests_all_passed"]) == (1, 1.0)
    assert table["FM5"] == {**table["FM5"], "tests": 0, "tests_all_passed": None}


def test_ccrs_calibration_scores_each_needed_judgment_once_against_the_correct_answer():
    from pipelines.tools.meta_eval import run_ccrs_calibration

    tests = [t for t in TRAIN if t.test_type in (1, 16)]
    base, variant = tests
    # the judge gives the correct answer 90 and the variant 40 (only CC is asked of the judge; AC adds EM)
    assert base.answer != variant.answer
    client = fake_judge({}, lambda prompt: 90 if _block(prompt, "response") == base.answer else 40)
    result = run_ccrs_calibration(tests, JudgeConfig(model="m", cache=False), client)
    assert result["judgments"] == 4 and result["judgments_failed"] == 0 and len(client.requests) == 4
    assert ([(p["test_type"], p["metric"], p["passed"]) for p in result["pairs"]]
            == [(16, "AC", True), (16, "CC", True)])
    cc = result["pairs"][1]
    assert ((cc["correct_score"], cc["variant_score"], cc["correct_raw"], cc["variant_raw"])
            == (0.9, 0.4, "90", "40"))
    ac = result["pairs"][0]  # AC = 0.7 EM + 0.3 LLM: the correct answer is the ground truth (EM 1)
    assert (ac["correct_score"] == pytest.approx(0.7 + 0.3 * 0.9)
            and ac["variant_score"] == pytest.approx(0.3 * 0.4))
    assert result["pass_rate"] == 1.0 and result["per_metric"] == {"AC": 1.0, "CC": 1.0}
    prompts = [r.messages[0]["content"] for r in client.requests]
    assert sorted(_block(p, "response") for p in prompts) == sorted([base.answer, variant.answer] * 2)
    # the AC asks
    assert [_block(p, "ground_truth") for p in prompts if "<ground_truth>" in p] == [base.answer] * 2
    assert all(_block(p, "context").count("<chunk rank=") == len(base.references) for p in prompts)


def _result(tests, values_by_type):
    outcomes = [check_test(t, _judgments(t, values_by_type.get(t.test_type, {}))) for t in tests]
    return MetaEvalResult("grouse", "m", "train.jsonl", len(tests), pass_rates(outcomes), outcomes)


def test_outputs_and_agreement_between_two_results(tmp_path):
    a = _result(TRAIN[:2], {1: PERFECT_T1})
    b = _result(TRAIN[:2], {1: {**PERFECT_T1, "completeness": 4}})
    paths_a = write_outputs(a, TRAIN, tmp_path / "a")
    paths_b = write_outputs(b, TRAIN, tmp_path / "b")
    assert paths_a["matrix"].read_bytes()[:4] == b"\x89PNG"
    failures = [json.loads(line) for line in paths_b["failures"].read_text().splitlines()]
    assert (failures[0]["test_id"], failures[0]["metric"]) == (TRAIN[0].test_id, "completeness")
    assert failures[0]["raw"] == "raw text"
    result = agreement_between(paths_a["results"], paths_b["results"])
    assert result["n_samples"] == 2 and result["faithfulness"]["macro_f1"] == 1.0


def test_mlflow_run_holds_pass_rates_and_artifacts(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.chdir(tmp_path)
    result = _result(TRAIN[:2], {1: PERFECT_T1, 2: {"positive_acceptance": 1, "negative_rejection": 1}})
    paths = write_outputs(result, TRAIN, tmp_path / "out")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    run_id = log_meta_eval(result, paths, uri, {"judge": "grouse"})
    run = mlflow.tracking.MlflowClient(uri).get_run(run_id)
    assert run.data.metrics["pass_rate_overall"] == pytest.approx(1.0)
    assert run.data.tags["ccrs.kind"] == "meta-eval"
    names = {f.path for f in mlflow.tracking.MlflowClient(uri).list_artifacts(run_id, "meta_eval")}
    assert {"meta_eval/results.json", "meta_eval/matrix.png", "meta_eval/failures.jsonl"} <= names


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
