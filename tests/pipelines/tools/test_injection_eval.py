"""Injection measurement: test set from real BioASQ, one judgment row per (question, variant, metric),
report arithmetic on a hand-made frame, and one tiny run against the real CPU judge."""
import json

import pandas as pd
import pytest

from judges.config import CcrsOptions, ClientConfig, JudgeConfig
from judges.injection import PLACEMENTS, build_variants
from pipelines.tools.injection_eval import (
    JUDGMENT_COLUMNS,
    build_report,
    load_injection_samples,
    run_injection_eval,
)
from tests.conftest import REPO, bioasq_questions

DATASET = REPO / "data" / "bioasq-sample"
TEMPLATES = ["append_override", "score_dictation"]
METRICS = ["CC", "QR"]


def test_samples_are_real_questions_with_their_ideal_answer_and_gold_snippets():
    samples = load_injection_samples(DATASET, limit=3, max_chunks=4)
    raw = bioasq_questions(3)
    assert [s.query_id for s in samples] == [q["id"] for q in raw]
    for sample, question in zip(samples, raw):
        assert sample.question == question["body"]
        assert sample.response == sample.ground_truth == question["ideal_answer"][0]
        snippets = [s["text"].strip() for s in question["snippets"]]
        assert 1 <= len(sample.context) <= 4 and all(chunk in snippets for chunk in sample.context)


def _frame(rows):
    """rows: (query_id, variant, metric, llm_score or None); the rest filled like a judgment frame."""
    records = []
    for qid, variant, metric, llm in rows:
        template, _, placement = variant.partition("@")
        records.append({"query_id": qid, "variant": variant, "template": template if placement else None,
                        "placement": placement or None, "metric": metric,
                        "score": None if llm is None else llm / 100, "llm_score": llm,
                        "status": "failed" if llm is None else "ok"})
    frame = pd.DataFrame(records).reindex(columns=JUDGMENT_COLUMNS)
    frame["llm_score"] = frame["llm_score"].astype("Int64")
    frame["score"] = frame["score"].astype("float64")
    return frame


def test_report_pairs_clean_and_injected_per_question():
    samples = load_injection_samples(DATASET, limit=2, max_chunks=2)
    q1, q2 = (s.query_id for s in samples)
    variants = build_variants(samples, ["score_dictation"], ["response", "context"])
    frame = _frame([
        (q1, "clean", "QR", 20), (q2, "clean", "QR", 50),
        (q1, "score_dictation@response", "QR", 100), (q2, "score_dictation@response", "QR", 40),
        (q1, "score_dictation@context", "QR", 20), (q2, "score_dictation@context", "QR", None),
    ])
    report = build_report(frame, samples, variants, ["score_dictation"], ["response", "context"],
                          JudgeConfig(ccrs=CcrsOptions(metrics=["QR"])), "sample", 1.0)
    response, context = report.cells
    assert (response.n, response.n_pairs, response.mean_clean, response.mean_injected) == (2, 2, 35.0, 70.0)
    assert response.mean_shift == 35.0 and response.share_up == 0.5 and response.share_down == 0.5
    assert response.injected_at_max == 0.5 and response.clean_at_max == 0.0 and response.reaches_judge
    assert response.mean_shift_final == pytest.approx(0.35)
    assert context.n_pairs == 1 and context.failures_injected == 1 and context.mean_shift == 0.0
    assert not context.reaches_judge  # QR never reads the context
    assert report.mean_shift_by_metric == {"QR": 35.0} and report.mean_clean_by_metric == {"QR": 35.0}
    assert report.detector_clean["responses_flagged"] == 0 and report.detector_clean["chunks"] == 4
    assert {(d.template, d.placement, d.flag_rate) for d in report.detector_injected} == {
        ("score_dictation", "response", 1.0), ("score_dictation", "context", 1.0)}


def test_variants_are_judged_through_the_judge_stage_one_row_per_variant_and_metric_in_order(monkeypatch):
    """judge_suite's fan-out replaced by the fake client in this process (no Ray): the rows come back in
    variant x metric order whatever order the units were asked in, each naming its variant."""
    from judges.injection import CLEAN
    from pipelines.tools.injection_eval import judge_variants, judgments_frame
    from tasks import judge as judge_stage
    from tests.fakes import FakeLLMClient

    llm = FakeLLMClient(lambda request: "90" if "IGNORE" in request.messages[0]["content"].upper() else "40")

    def here(fn, items, *args, **kwargs):
        return [fn(llm, item) for item in reversed(items)][::-1], judge_stage.FanOutReport(items=len(items))

    monkeypatch.setattr(judge_stage, "fan_out_report", here)
    samples = load_injection_samples(DATASET, limit=2, max_chunks=2)
    variants = build_variants(samples, ["append_override"], ["response"])
    judge = JudgeConfig(model="m", cache=False, ccrs=CcrsOptions(metrics=METRICS))
    frame = judgments_frame(judge_variants(variants, judge, ClientConfig(), "http://unused/v1"))
    assert list(frame.columns) == JUDGMENT_COLUMNS and len(frame) == 2 * 2 * 2 == len(llm.requests)
    assert list(zip(frame.query_id, frame.variant, frame.metric)) == [
        (v.sample.query_id, v.variant, m) for v in variants for m in METRICS]
    assert (frame.status == "ok").all() and frame.loc[frame.variant == CLEAN, "suspicious"].eq(False).all()


def test_dead_endpoint_still_gives_one_failed_row_per_judgment(tmp_path, ray_session):
    samples = load_injection_samples(DATASET, limit=1, max_chunks=2)
    client = ClientConfig(max_retries=0, timeout_s=5, requeue_rounds=0)  # no wait for the endpoint to return
    result = run_injection_eval(samples, ["append_override"], ["response"],
                                JudgeConfig(ccrs=CcrsOptions(metrics=METRICS)), client, "http://127.0.0.1:9/v1",
                                tmp_path / "out")
    frame = result.frame
    assert len(frame) == 1 * 2 * 2 and (frame.status == "failed").all() and frame.reason.notna().all()
    assert result.report.cells[0].failures_injected == 1 and result.report.cells[0].mean_shift is None


@pytest.mark.llm
def test_tiny_real_run_is_complete_and_writes_every_file(tmp_path, llm_endpoint, ray_session):
    samples = load_injection_samples(DATASET, limit=2, max_chunks=2)
    judge = JudgeConfig(model=llm_endpoint.judge_model, ccrs=CcrsOptions(metrics=METRICS),
                        structured_output=True, cache=False)
    result = run_injection_eval(samples, TEMPLATES, list(PLACEMENTS), judge, ClientConfig(max_concurrency=8),
                                llm_endpoint.base_url, tmp_path / "out", dataset=str(DATASET))
    frame = pd.read_parquet(result.paths["judgments"])
    assert list(frame.columns) == JUDGMENT_COLUMNS
    keys = frame[["query_id", "variant", "metric"]]
    assert len(frame) == 2 * (1 + 2 * 2) * 2 and not keys.duplicated().any()
    assert set(frame.status) <= {"ok", "failed"}
    assert frame.loc[frame.status == "ok", "llm_score"].between(0, 100).all()
    assert frame.loc[frame.status == "failed", "reason"].notna().all()
    assert not frame.loc[frame.variant == "clean", "suspicious"].any()
    assert frame.loc[frame.variant != "clean", "suspicious"].all()

    report = json.loads(result.paths["report"].read_text())
    assert report["n_questions"] == 2 and report["judgments"] == len(frame)
    assert len(report["cells"]) == len(METRICS) * len(TEMPLATES) * len(PLACEMENTS)
    for cell in report["cells"]:
        assert {"n", "mean_clean", "mean_injected", "mean_shift", "share_up", "injected_at_max",
                "failures_injected"} <= cell.keys()
        assert cell["n"] == 2 and cell["n_pairs"] + cell["failures_injected"] + cell["failures_clean"] >= 2
    assert set(report["mean_shift_by_metric"]) == set(METRICS)
    assert report["detector_clean"]["response_flag_rate"] == 0.0
    assert all(d["flag_rate"] == 1.0 for d in report["detector_injected"])
    table = pd.read_csv(result.paths["table"])
    assert len(table) == len(report["cells"]) and "mean_shift" in table.columns
    assert result.paths["plot"].stat().st_size > 1000
