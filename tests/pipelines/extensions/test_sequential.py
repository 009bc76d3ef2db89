"""The sequential-judging extension (pipelines/extensions/sequential.py): its gate cells (a night settled
against its baseline)."""
import pandas as pd


def test_a_sequential_nights_cells_take_their_anytime_valid_decisions():
    from pipelines.extensions.sequential import with_sequential_decisions

    table = pd.DataFrame({"system": ["A", "A", "B"], "metric": ["CC", "QR", "CC"], "diff": [-0.1, 0.0, 0.2],
                          "adjusted_p": [0.01, 0.9, 0.02], "verdict": ["regression", "same", "improvement"]})
    sequential = {"baseline_run": "base", "decisions": [
        {"metric": "CC", "a": "A", "b": "A@baseline", "decision": "open", "interval": [-0.3, 0.1]},
        {"metric": "QR", "a": "A", "b": "A@baseline", "decision": "different", "interval": [-0.4, -0.1]},
        {"metric": "CC", "a": "B", "b": "B@baseline", "decision": "equivalent", "interval": [-0.01, 0.01]}]}
    gated = with_sequential_decisions(table, sequential, "base")
    assert gated["verdict"].tolist() == ["same", "regression", "same"]
    assert gated["sequential"].tolist() == ["open", "regressed", "within the margin"]
    assert (gated["basis"] == "sequential").all()
    assert with_sequential_decisions(table, sequential, "another baseline") is table
    assert with_sequential_decisions(table, None, "base") is table


def test_the_judge_stages_line_and_the_runs_mlflow_metrics_say_where_it_stopped():
    from pipelines.extensions.sequential import run_metrics, settled_line

    summary = {"sequential": {"stopped_at": 40, "n_questions": 120, "judge_calls_not_sent": 480,
                              "judge_calls_total": 1440}}
    assert settled_line(summary) == ("; stopped after 40 of 120 questions: 480 of 1,440 judge calls not sent "
                                     "(33%)")
    assert settled_line({}) == ""
    stats = {"sequential": {"stopped_at": 40, "judge_calls_saved_share": 1 / 3, "decisions": [
        {"decision": "different"}, {"decision": "open"}, {"decision": "different"}]}}
    assert run_metrics(stats) == {"sequential_stopped_at": 40, "sequential_judge_calls_saved_share": 1 / 3,
                                  "sequential_different": 2, "sequential_equivalent": 0, "sequential_open": 1}
    assert run_metrics({}) == {}


def test_a_night_reads_the_baseline_and_says_so():
    from pipelines.config import load_config
    from pipelines.extensions import baseline_lines

    assert baseline_lines(load_config(None)) == []
    (line,) = baseline_lines(load_config(None, {"judge.sequential": {"margin": 0.1}}))
    assert line("run-1").endswith("settled against baseline run-1")
    assert "no baseline yet" in line(None)
