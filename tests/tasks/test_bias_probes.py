"""Bias probes through a judge session with the fake client: one row per judged (variant,
metric), the paired-shift report on a hand-made frame, the outputs, the run's probe stage (keyed, reused),
the verdict's section and the MLflow logging."""
import json
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest

from judges.bias_probes import CLEAN, ProbeOptions, ProbeSample, ProbesConfig, build_probes
from judges.config import CcrsOptions, ClientConfig, JudgeConfig
from tasks.runtime import judge_session as judge_stage
from tasks.bias_probes import (
    PROBE_COLUMNS,
    ProbeSelectionError,
    build_probe_report,
    run_probe_stage,
    run_probes,
)
from pipelines.reporting.probes import plot_probe_shifts, probe_table, probes_markdown
from tasks.runtime.layout import PROBE_FILES, RunLayout
from tests.conftest import bioasq_questions, write_bioasq_inputs
from tests.fakes import FakeLLMClient

METRICS = ["CC", "QR", "ID", "AC", "IR"]


def _samples(n: int = 4) -> list[ProbeSample]:
    return [ProbeSample(q["id"], q["body"], q["ideal_answer"][0], q["ideal_answer"][0],
                        tuple(s["text"] for s in q["snippets"][:3])) for q in bioasq_questions(n)]


def _frame(rows):
    """rows: (query_id, kind, variant, metric, mark or None); the rest filled like a probe frame."""
    records = [{"query_id": q, "kind": k, "variant": v, "changes": None if v == CLEAN else "response",
                "metric": m, "mark": mark, "score": mark, "status": "failed" if mark is None else "ok"}
               for q, k, v, m, mark in rows]
    return pd.DataFrame(records).reindex(columns=PROBE_COLUMNS).astype({"mark": float, "score": float})


def test_report_pairs_clean_and_probed_per_question_by_hand():
    frame = _frame([
        ("q1", CLEAN, CLEAN, "ID", 0.5), ("q2", CLEAN, CLEAN, "ID", 0.6), ("q3", CLEAN, CLEAN, "ID", 0.7),
        ("q1", "verbosity", "verbosity", "ID", 0.3), ("q2", "verbosity", "verbosity", "ID", 0.6),
        ("q3", "verbosity", "verbosity", "ID", None),
        ("q1", CLEAN, CLEAN, "IR", 0.8), ("q2", CLEAN, CLEAN, "IR", None), ("q3", CLEAN, CLEAN, "IR", 0.8),
        ("q1", "verbosity", "verbosity", "IR", 0.82), ("q2", "verbosity", "verbosity", "IR", 0.5),
        ("q3", "verbosity", "verbosity", "IR", 0.8),
    ])
    probes = ProbesConfig(kinds=["verbosity"], tolerance=0.05, b=500)
    judge = JudgeConfig(ccrs=CcrsOptions(metrics=["ID", "IR"]))
    report = build_probe_report(frame, _samples(3), probes, judge, "sample", 1.0)
    id_cell, ir_cell = report.cells
    assert (id_cell.metric, id_cell.expected, ir_cell.expected) == ("ID", "down", "stable")
    # ID: pairs q1 (-0.2), q2 (0.0); q3's probed judgment failed
    assert (id_cell.n, id_cell.n_pairs, id_cell.failures_probed, id_cell.failures_clean) == (3, 2, 1, 0)
    assert id_cell.mean_clean == 0.6 and id_cell.mean_probed == 0.45 and id_cell.shift == -0.1
    assert -0.2 <= id_cell.ci_low <= -0.1 <= id_cell.ci_high <= 0.0
    assert id_cell.flagged and not id_cell.ci_beyond_tolerance
    # IR: pairs q1 (+0.02), q3 (0.0); q2's clean judgment failed
    assert ir_cell.n_pairs == 2 and ir_cell.failures_clean == 1 and ir_cell.shift == 0.01
    assert not ir_cell.flagged
    assert report.flagged == ["verbosity/verbosity/ID"] and report.probed_questions == {"verbosity": 3}
    assert report.status_counts == {"ok": 10, "failed": 2} and report.judgments == 12


def test_a_cell_without_pairs_has_no_shift_and_no_flag():
    frame = _frame([("q1", CLEAN, CLEAN, "QR", None), ("q1", "verbosity", "verbosity", "QR", 0.9)])
    report = build_probe_report(frame, _samples(1), ProbesConfig(kinds=["verbosity"]),
                                JudgeConfig(ccrs=CcrsOptions(metrics=["QR"])), "sample", 0.0)
    (cell,) = report.cells
    assert cell.n_pairs == 0 and cell.shift is None and cell.ci_low is None and not cell.flagged
    row = probe_table(asdict(report))[2]
    assert row.startswith("verbosity") and row.count("n/a") == 3  # clean mean, shift, CI


def _padded_replies(samples, probes):
    """The fake judge marks every padded response 20 and everything else 80."""
    padded = [v.response for v in build_probes(samples, ["verbosity"], probes.options(),
                                                np.random.default_rng(probes.seed)) if v.kind == "verbosity"]
    return FakeLLMClient(lambda request: "20" if any(p in request.messages[-1]["content"] for p in padded)
                         else "80")


def test_run_probes_judges_each_variant_on_the_metrics_that_read_what_it_changes(tmp_path):
    samples = _samples(4)
    probes = ProbesConfig(kinds=["verbosity", "order"], b=300)
    llm = _padded_replies(samples, probes)
    judge = JudgeConfig(model="m", cache=False, ccrs=CcrsOptions(metrics=METRICS))
    result = run_probes(samples, probes, judge, ClientConfig(), "http://unused/v1", tmp_path / "out", llm=llm,
                        draw=plot_probe_shifts)
    frame = pd.read_parquet(result.paths["judgments"])
    assert list(frame.columns) == PROBE_COLUMNS and (frame.status == "ok").all()
    counts = frame.groupby("kind").size().to_dict()
    assert counts == {CLEAN: 4 * 5, "verbosity": 4 * 5, "order": 4 * 4} == {k: len(g) for k, g in
                                                                               frame.groupby("kind")}
    assert "QR" not in set(frame.loc[frame.kind == "order", "metric"])  # QR never reads the context
    assert len(llm.requests) == len(frame) and frame["mark"].isin([0.2, 0.8]).all()

    report = json.loads(result.paths["report"].read_text())
    verbosity = [c for c in report["cells"] if c["kind"] == "verbosity"]
    order = [c for c in report["cells"] if c["kind"] == "order"]
    assert [c["metric"] for c in verbosity] == METRICS
    assert [c["metric"] for c in order] == ["CC", "ID", "AC", "IR"]
    assert all(c["shift"] == -0.6 and (c["ci_low"], c["ci_high"]) == (-0.6, -0.6) and c["flagged"]
               and c["ci_beyond_tolerance"] for c in verbosity)
    assert all(c["shift"] == 0.0 and not c["flagged"] for c in order)
    assert report["flagged"] == [f"verbosity/verbosity/{m}" for m in METRICS]
    assert set(PROBE_FILES) == set(result.paths) and all(p.exists() for p in result.paths.values())
    assert len(pd.read_csv(result.paths["table"])) == len(report["cells"])
    assert result.paths["plot"].stat().st_size > 1000

    table = "\n".join(probe_table(report))
    assert "[-0.600, -0.600]" in table and ">tol (CI) !" in table  # IR and AC are expected to stay put
    rows = [line for line in table.splitlines() if line.startswith("verbosity ")]
    assert len(rows) == 5 and all(line.rstrip().endswith("(CI)") for line in rows if " down " in line)
    assert probes_markdown(report).startswith("## Judge bias probes\n")


def test_the_injection_kind_reports_the_detectors_flag_rates(tmp_path):
    """The detector on the clean texts (none flagged) and on each variant's injected text (all flagged);
    a report without the injection kind has no detector entry, as before."""
    from pipelines.reporting.probes import probe_metrics

    samples = _samples(2)
    probes = ProbesConfig(kinds=["injection"], templates=["score_dictation"], b=200)
    judge = JudgeConfig(model="m", cache=False, ccrs=CcrsOptions(metrics=["QR", "CC"]))
    result = run_probes(samples, probes, judge, ClientConfig(), "http://unused/v1", tmp_path / "out",
                        llm=FakeLLMClient("50"))
    report = json.loads(result.paths["report"].read_text())
    detector = report["detector"]
    assert detector["clean_responses"] == {"n": 2, "flagged": 0, "flag_rate": 0.0}
    assert detector["clean_chunks"]["n"] == sum(len(s.context) for s in samples)
    assert detector["injected"] == [{"variant": f"score_dictation@{where}", "n": 2, "flagged": 2,
                                     "flag_rate": 1.0} for where in ("response", "context")]
    assert probe_table(report)[-1].startswith("detector (judges/injection.py injection_markers) flagged 0/2 "
                                              "clean responses")
    assert "score_dictation@context 2/2." in probes_markdown(report)
    assert probe_metrics(report)["probe/injection/detector/score_dictation.context/flag_rate"] == 1.0
    without = run_probes(samples, ProbesConfig(kinds=["order"], b=200), judge, ClientConfig(),
                         "http://unused/v1", tmp_path / "order", llm=FakeLLMClient("50"))
    assert "detector" not in json.loads(without.paths["report"].read_text())


def _write_run_inputs(root):
    queries, retrieved = write_bioasq_inputs(root / "retrieve", limit=4, chunks_per_query=3)
    query_ids = pd.read_parquet(queries).query_id.tolist()
    rows = [{"query_id": q, "system": system, "retriever": "bm25", "reader": "extractive", "status": "ok",
             "answer": f"Answer {system} {i}. It is a short one.", "n_chunks_used": 3, "error": None}
            for system in ("B", "A") for i, q in enumerate(query_ids)]
    rows[4].update(status="failed", answer="", error="timeout")  # A's first answer failed
    generations = root / "generate" / "generations.parquet"
    generations.parent.mkdir()
    pd.DataFrame(rows).to_parquet(generations, index=False)
    return queries, retrieved, generations


@pytest.fixture
def fake_fan_out(monkeypatch):
    """The judge session's Ray fan-out replaced by the fake client in this process."""
    llm = FakeLLMClient("55")

    def here(fn, items, *args, **kwargs):
        return [fn(llm, item) for item in items], judge_stage.FanOutReport(items=len(items))

    monkeypatch.setattr(judge_stage, "fan_out_report", here)
    return llm


def test_run_probe_stage_probes_one_systems_answers_and_is_reused(tmp_path, fake_fan_out):
    inputs = _write_run_inputs(tmp_path)
    probes = ProbesConfig(kinds=["verbosity", "order"], questions=2, b=200)
    judge = JudgeConfig(model="m", cache=False, ccrs=CcrsOptions(metrics=["QR", "CC"]))
    first = run_probe_stage(tmp_path, inputs, 3, probes, judge, ClientConfig(), "http://unused/v1",
                            progress=False)
    assert not first.reused and first.summary["system"] == "A" and first.summary["questions"] == 2
    frame = pd.read_parquet(tmp_path / "probes" / PROBE_FILES["judgments"])
    query_ids = pd.read_parquet(inputs[0]).query_id.tolist()
    assert sorted(set(frame.query_id)) == sorted(query_ids[1:3])  # A's answered questions, in order
    clean = frame[frame.kind == CLEAN]
    assert len(clean) == 2 * 2 and len(frame) == 2 * 2 + 2 * 2 + 2 * 1  # order: CC only
    assert RunLayout(tmp_path).probe_report.exists()
    asked = len(fake_fan_out.requests)
    again = run_probe_stage(tmp_path, inputs, 3, probes, judge, ClientConfig(), "http://unused/v1",
                            progress=False)
    assert again.reused and len(fake_fan_out.requests) == asked
    other = run_probe_stage(tmp_path, inputs, 3, probes.model_copy(update={"system": "B"}), judge,
                            ClientConfig(), "http://unused/v1", progress=False)
    assert not other.reused and other.summary["system"] == "B"
    with pytest.raises(ProbeSelectionError, match="'Z' is not a system of this run"):
        run_probe_stage(tmp_path, inputs, 3, probes.model_copy(update={"system": "Z"}), judge,
                        ClientConfig(), "http://unused/v1", progress=False)


def test_verdict_shows_the_probes_of_a_run_that_asked_for_them(tmp_path, fake_fan_out):
    from pipelines.extensions import verdict_sections
    from pipelines.reporting.verdict import build_summary
    from tests.pipelines.reporting.test_verdict import make_judged_run

    layout = make_judged_run(tmp_path / "run")
    inputs = _write_run_inputs(tmp_path / "inputs")
    probes = ProbesConfig(kinds=["order"], questions=2, b=200)
    run_probe_stage(layout.root, inputs, 3, probes, JudgeConfig(model="m", cache=False,
                    ccrs=CcrsOptions(metrics=["CC"])), ClientConfig(), "http://unused/v1", progress=False)
    assert "Judge bias probes" not in build_summary(layout.root, verdict_sections())  # not asked for
    config = json.loads(layout.config_json.read_text())
    layout.config_json.write_text(json.dumps({**config, "probes": probes.model_dump()}))
    text = build_summary(layout.root, verdict_sections())
    assert "## Judge bias probes" in text and "| order | order | CC | stable | 2 |" in text


def test_probes_are_logged_into_the_given_mlflow_run(tmp_path, mlflow_db, fake_fan_out):
    import mlflow

    from pipelines.reporting.probes import log_probes
    from tasks.bias_probes import logged_probe_files

    inputs = _write_run_inputs(tmp_path)
    run_probe_stage(tmp_path, inputs, 3, ProbesConfig(kinds=["verbosity"], questions=2, b=200),
                    JudgeConfig(model="m", cache=False, ccrs=CcrsOptions(metrics=["ID"])), ClientConfig(),
                    "http://unused/v1", progress=False, draw=plot_probe_shifts)
    report, files = logged_probe_files(tmp_path)
    uri = mlflow_db
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("probes-test", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    log_probes(report, files, uri, run_id)
    metrics = client.get_run(run_id).data.metrics
    assert metrics["probe/verbosity/verbosity/ID/shift"] == 0.0 and metrics["probe/flagged_cells"] == 0.0
    logged = {f.path for f in client.list_artifacts(run_id, "probes")}
    assert logged == {f"probes/{name}" for name in PROBE_FILES.values()}
    assert logged_probe_files(tmp_path / "none") == (None, [])


def test_options_reach_the_variants():
    probes = ProbesConfig(kinds=["verbosity"], sentences=1)
    assert probes.options() == ProbeOptions(sentences=1)
