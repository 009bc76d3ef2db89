"""tasks/calibration.py: checking GroUSE unit tests (conditions, pass rates, failure modes), and the
calibration gate of a run (`judge.preflight`): its stage, the judgment cache, the decision, the planned calls
it stops before, the verdict section and MLflow."""
import json
from pathlib import Path

import pandas as pd
import pytest

from judges.config import ClientConfig, GrouseOptions, JudgeConfig, PreflightOptions, ReaderConfig
from judges.grouse import GROUSE_METRICS, METRIC_ORDER
from judges.grouse_unit_tests import FAILURE_MODES, load_unit_tests
from judges.suite import Judgment, Sample, Usage, detail_json
from pipelines.reporting.calibration import calibration_section, plot_matrix
from tasks.calibration import (
    Preflight,
    check_test,
    failure_mode_table,
    load_preflight_tests,
    pass_rates,
    planned_judge_calls,
    preflight_requests,
    read_preflight,
    run_grouse_tests,
    run_preflight,
)
from tasks.runtime.layout import RunLayout
from tests.fakes import FakeLLMClient

DATA = Path(__file__).resolve().parents[2] / "data" / "grouse-bioasq"
TRAIN = load_unit_tests(DATA / "train.jsonl")


def judgments_of(test, values: dict, failed=()):
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
    outcome = check_test(TRAIN[0], judgments_of(TRAIN[0], PERFECT_T1))
    assert outcome.passed and all(c["passed"] for c in outcome.checks.values())


def test_wrong_mark_and_failed_judgment_fail_their_condition():
    outcome = check_test(TRAIN[0], judgments_of(TRAIN[0], {**PERFECT_T1, "completeness": 4},
                                              failed=("faithfulness",)))
    assert not outcome.checks["completeness"]["passed"] and not outcome.checks["faithfulness"]["passed"]
    assert (outcome.checks["faithfulness"]["raw"] == "raw text"
            and outcome.checks["answer_relevancy"]["passed"])


def test_checks_hold_the_raw_mark_and_the_justification():
    outcome = check_test(TRAIN[0], judgments_of(TRAIN[0], {**PERFECT_T1, "completeness": 4}))
    check = outcome.checks["completeness"]
    assert (check["value"], check["condition"], check["status"]) == (4, "==5", "ok")  # the mark, not 0.75
    assert check["justification"] == "why completeness" and outcome.calls == 6


def test_refusal_test_needs_nulls_and_derived_acceptance():
    t2 = TRAIN[1]  # type 2: correct refusal, references without an answer
    ok = check_test(t2, judgments_of(t2, {"positive_acceptance": 1, "negative_rejection": 1}))
    assert ok.passed
    bad = check_test(t2, judgments_of(t2, {"answer_relevancy": 5, "negative_rejection": 0}))
    assert not bad.checks["answer_relevancy"]["passed"] and not bad.checks["negative_rejection"]["passed"]


def test_pass_rates_per_metric_and_overall():
    good = check_test(TRAIN[0], judgments_of(TRAIN[0], PERFECT_T1))
    bad = check_test(TRAIN[0], judgments_of(TRAIN[0], {**PERFECT_T1, "completeness": 4}))
    rates = pass_rates([good, bad])
    assert rates["completeness"] == 0.5 and rates["answer_relevancy"] == 1.0
    assert rates["overall"] == pytest.approx(11 / 12) and rates["tests_all_passed"] == 0.5


def block(prompt: str, tag: str) -> str:
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
    assert ((block(prompt, "answer_1"), block(prompt, "answer_2"))
            == (TRAIN[0].expected_answer, TRAIN[0].answer))
    assert prompt.index("<answer_1>") < prompt.index("<answer_2>")


def test_all_calls_asks_what_the_pipeline_skips_and_a_mark_there_fails_a_none_condition():
    """Type 1 expects usefulness ==None: the pipeline never asks it (a response was given) and the
    condition holds without the judge; the paper's protocol asks, and a judge that gives a mark fails."""
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
    assert {t for t in range(1, 17) if t not in FAILURE_MODES} == set(range(1, 8))  # the highest-marks tests
    tests = [t for t in TRAIN if t.test_type in (8, 9, 10)]
    marks = {8: {"answer_relevancy": 4, "completeness": 5, "faithfulness": 1},     # all six hold
             9: {"answer_relevancy": 5, "faithfulness": 1, "negative_rejection": 0},  # relevancy wrong
             10: {"answer_relevancy": 5, "completeness": 4, "faithfulness": 1}}    # all six hold
    table = failure_mode_table([check_test(t, judgments_of(t, marks[t.test_type])) for t in tests])
    assert (table["FM1"]["tests"], table["FM1"]["tests_all_passed"]) == (2, 0.5)  # types 8 and 9
    assert table["FM1"]["checks_passed"] == pytest.approx(11 / 12)
    assert (table["FM2"]["tests"], table["FM2"]["tests_all_passed"]) == (1, 0.0)
    assert (table["FM3"]["tests"], table["FM3"]["tests_all_passed"]) == (1, 1.0)
    assert table["FM5"] == {**table["FM5"], "tests": 0, "tests_all_passed": None}


# --- the calibration gate ----------------------------------------------------------------------------------

PERFECT_T2 = {"answer_relevancy": None, "completeness": None, "usefulness": None, "faithfulness": None}
# a window wide enough for the whole reply budgets (the fake model's tokens are a character estimate)
GATE_JUDGE = JudgeConfig(model="m-preflight", context_window=8192,
                         grouse=GrouseOptions(max_tokens=200, faithfulness_max_tokens=700))


def _tests_file(tmp_path: Path, count: int = 2) -> Path:
    """The first `count` tests of the shipped training set (type 1, a correct answer; type 2, a correct
    refusal), as a GroUSE-format file of their own."""
    path = tmp_path / "preflight-tests.jsonl"
    path.write_text("".join((DATA / "train.jsonl").read_text().splitlines(keepends=True)[:count]))
    return path


def _type_1_judge() -> FakeLLMClient:
    """Marks every test as a correct answer: type 1 passes all six conditions, type 2 (a refusal) fails
    relevancy, completeness, faithfulness, PA and NR; usefulness (==None, null given) holds."""
    return fake_judge({"answer_relevancy": 5, "completeness": 5, "faithfulness": 1, "usefulness": None}, None)


def test_the_preflight_stage_records_pass_rates_and_a_second_run_sends_no_request(tmp_path):
    """`Cached per judge model + prompt version`: the judgment cache answers every preflight request of a
    second run (another run folder, the same judge), and a rerun in the same folder reuses the stage."""
    tests = _tests_file(tmp_path)
    identity = {"test": str(tmp_path)}  # keys of this test's own (the session's cache is shared)
    options = PreflightOptions(tests=str(tests), min_pass_rate=0.9)
    first = _type_1_judge()
    gate = run_preflight(tmp_path / "run1", options, tests, GATE_JUDGE, ClientConfig(), "", identity,
                         llm=first, draw=plot_matrix)
    summary = gate.summary
    assert len(first.requests) == 2 * 4 and summary["judge_calls"] == 8  # all-calls: four per test
    assert (summary["tests"], summary["cache_hits"], summary["judge_requests"]) == (2, 0, 2)
    assert summary["pass_rate_answer_relevancy"] == 0.5 and summary["pass_rate_usefulness"] == 1.0
    assert summary["pass_rate_overall"] == pytest.approx((1 + 1 / 6) / 2)  # 6/6 and 1/6 of the conditions
    assert set(summary["pass_rates"]) == {"all-calls", "pipeline"} and summary["protocol"] == "all-calls"
    assert (gate.passed, gate.status, gate.reused) == (False, "stop", False)
    folder = RunLayout(tmp_path / "run1").preflight_dir
    results = json.loads((folder / "results.json").read_text())
    assert [o["passed"] for o in results["outcomes"]] == [True, False]
    assert "FM7" in results["failure_modes"]["pipeline"]
    assert len((folder / "failures.jsonl").read_text().splitlines()) == 5
    assert (folder / "matrix.png").read_bytes()[:4] == b"\x89PNG"

    second = _type_1_judge()
    again = run_preflight(tmp_path / "run2", options, tests, GATE_JUDGE, ClientConfig(), "", identity,
                          llm=second)
    assert second.requests == [] and again.summary["cache_hits"] == 2 and again.summary["judge_calls"] == 0
    assert again.pass_rate == gate.pass_rate and not again.reused
    third = _type_1_judge()
    reused = run_preflight(tmp_path / "run2", options.model_copy(update={"min_pass_rate": 0.5}), tests,
                           GATE_JUDGE, ClientConfig(), "", identity, llm=third)
    assert third.requests == [] and reused.reused and reused.status == "pass"  # a threshold is not a key


def test_another_prompt_version_or_model_is_asked_again(tmp_path):
    tests = _tests_file(tmp_path, 1)
    identity = {"test": str(tmp_path)}
    options = PreflightOptions(tests=str(tests))
    for n, judge in enumerate([GATE_JUDGE, GATE_JUDGE.model_copy(update={"model": "m-other"}),
                               GATE_JUDGE.model_copy(update={"grouse": GATE_JUDGE.grouse.model_copy(
                                   update={"prompt_version": "v1"})})]):
        client = _type_1_judge()
        run_preflight(tmp_path / f"run{n}", options, tests, judge, ClientConfig(), "", identity, llm=client)
        assert len(client.requests) == 4, judge


def test_the_pipeline_protocol_asks_only_figure_4s_calls(tmp_path):
    tests = _tests_file(tmp_path)
    client = _type_1_judge()
    gate = run_preflight(tmp_path / "run", PreflightOptions(tests=str(tests), protocol="pipeline"), tests,
                         GATE_JUDGE.model_copy(update={"cache": False}), ClientConfig(), "", llm=client)
    # relevancy 5 on both: usefulness never asked, faithfulness asked
    assert len(client.requests) == 2 * 3 and set(gate.summary["pass_rates"]) == {"pipeline"}


def _gate(rate: float, threshold: float, on_fail: str = "stop") -> Preflight:
    summary = {f"pass_rate_{m}": rate for m in (*METRIC_ORDER, "overall", "tests_all_passed")}
    summary.update(tests=112, tests_path="data/grouse-bioasq/test.jsonl", protocol="all-calls",
                   prompt_version="paper", judge_model="m", judge_calls=448, cache_hits=0)
    return Preflight(summary, PreflightOptions(min_pass_rate=threshold, on_fail=on_fail))


def test_the_decision_and_its_line():
    stopped = "judge calibration 0.34 < 0.60: stopped before 141,570 judge calls"
    assert _gate(0.34, 0.60).line(141_570) == stopped
    assert _gate(0.34, 0.60).line() == "judge calibration 0.34 < 0.60: stopped before the judge stage"
    assert _gate(0.34, 0.60, "warn").status == "warn"
    assert _gate(0.34, 0.60, "warn").line().startswith("judge calibration 0.34 < 0.60: judging anyway")
    assert _gate(0.60, 0.60).status == "pass"
    assert _gate(0.6, 0.6).line() == "judge calibration 0.60 >= 0.60: judging"
    measured = _gate(0.34, 0.6).measured()
    assert "overall 0.34" in measured and "448 judge requests" in measured


def test_the_verdict_section_warns_when_the_judge_failed_and_is_plain_when_it_passed():
    warned = calibration_section(_gate(0.34, 0.60, "warn"))
    assert warned.startswith("## Judge calibration\n\n**Warning: judge calibration 0.34 < 0.60")
    assert "| answer_relevancy | 0.34 |" in warned and "| overall | 0.34 |" in warned
    passed = calibration_section(_gate(0.8, 0.6))
    assert "Warning" not in passed and "judge calibration 0.80 >= 0.60: judging." in passed


def test_read_preflight_is_none_without_the_gate_or_its_stage(tmp_path):
    assert read_preflight(tmp_path, None) is None
    assert read_preflight(tmp_path, {"min_pass_rate": 0.5}) is None


@pytest.mark.parametrize(("name", "text", "message"), [
    ("missing.jsonl", None, "cannot read the unit tests .*missing.jsonl"),
    ("empty.jsonl", "\n", "empty.jsonl: no unit test"),
    ("bad.jsonl", '{"input": "q"}\n', r"bad.jsonl:1: missing key"),
])
def test_a_bad_or_empty_tests_file_is_one_error_naming_it(tmp_path, name, text, message):
    if text is not None:
        (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=message):
        load_preflight_tests(tmp_path / name)


def test_the_planned_calls_are_each_suites_units_times_the_judged_answers(tmp_path, bioasq_inputs):
    from tasks.generate import run_generation

    readers = [ReaderConfig(name="extractive", kind="extractive", max_sentences=2)]
    generations = run_generation(tmp_path / "run", *bioasq_inputs, readers, ClientConfig(), "http://unused/v1",
                                 top_k=2, progress=False).path
    frame = pd.read_parquet(generations)
    assert len(frame) == 4 * 2  # 4 questions x 2 retrievers
    frame.loc[0, "answer"] = ""  # not sent to the judge
    frame.loc[1, ["status", "error", "answer"]] = ["failed", "HTTP 500", None]
    frame.to_parquet(generations, index=False)
    args = (*bioasq_inputs, generations, JudgeConfig(model="m"), 0, 2)  # "m": no tokenizer to load
    assert planned_judge_calls(["ccrs"], *args) == 6 * 5  # one CCRS unit per metric
    assert planned_judge_calls(["ccrs", "grouse"], *args) == 6 * (5 + 1)  # one GroUSE unit per answer


def test_the_requests_the_cost_plan_counts():
    tests = TRAIN[:2]
    assert [r.max_tokens for r in preflight_requests(tests, GATE_JUDGE, 0)] == [200, 200, 200, 700] * 2
    one_prompt = GATE_JUDGE.model_copy(update={"grouse": GrouseOptions(prompt_version="paper-one-prompt")})
    assert len(preflight_requests(tests, one_prompt, 0)) == 2


def test_a_stopped_run_is_a_failed_mlflow_run_with_the_pass_rates_and_files(tmp_path, mlflow_db):
    from mlflow.tracking import MlflowClient

    from pipelines.reporting.calibration import log_stopped_run

    tests = _tests_file(tmp_path)
    options = PreflightOptions(tests=str(tests))
    gate = run_preflight(tmp_path / "run", options, tests, GATE_JUDGE.model_copy(update={"cache": False}),
                         ClientConfig(), "", llm=_type_1_judge(), draw=plot_matrix)
    uri = mlflow_db
    line = gate.line(20)
    run_id = log_stopped_run(uri, "ccrs-preflight-test", "demo", line, gate, tmp_path / "run",
                             {"ccrs.config_name": "demo"})
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FAILED" and run.data.tags["ccrs.error"] == line
    assert run.data.tags["ccrs.judge_calibration"] == "stop" and run.data.tags["ccrs.config_name"] == "demo"
    assert run.data.metrics["preflight_pass_rate_overall"] == pytest.approx(gate.pass_rate)
    assert run.data.metrics["preflight_pass_rate_faithfulness"] == 0.5
    assert run.data.params["judge.preflight.min_pass_rate"] == "0.6"
    files = {f.path for f in client.list_artifacts(run_id, "preflight")}
    assert {"preflight/results.json", "preflight/failures.jsonl", "preflight/matrix.png"} <= files


def test_the_verdict_of_a_run_that_judged_anyway_opens_with_the_warning(tmp_path):
    from pipelines.extensions import verdict_sections
    from tasks.runtime.stage import MANIFEST
    from pipelines.reporting.verdict import build_summary
    from tests.pipelines.reporting.test_verdict import make_judged_run

    layout = make_judged_run(tmp_path / "run")
    config = json.loads(layout.config_json.read_text())
    assert "Judge calibration" not in build_summary(layout.root, verdict_sections())  # no gate in the config
    layout.preflight_dir.mkdir()
    (layout.preflight_dir / MANIFEST).write_text(json.dumps({"summary": _gate(0.34, 0.6).summary}))
    layout.config_json.write_text(json.dumps({**config, "judge": {"preflight": {"min_pass_rate": 0.6,
                                                                                "on_fail": "warn"}}}))
    sections = build_summary(layout.root, verdict_sections()).split("\n\n## ")
    assert sections[1].startswith("Judge calibration\n\n**Warning: judge calibration 0.34 < 0.60")
