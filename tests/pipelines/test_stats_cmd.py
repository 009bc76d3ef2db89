import json
from contextlib import nullcontext
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.reporting.plots import BackgroundPlots
from tests.stats.conftest import make_repeated_scores, make_scores

PAPER_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "hypotheses" / "paper-h1-h3.yaml"


@pytest.fixture
def paper_like_scores(tmp_path) -> Path:
    scores = make_scores(
        n_queries=60,
        systems=tuple("ABCDEF"),
        metrics=("CC", "QR", "ID", "AC", "IR"),
        effects={"A": 0.2, "B": 0.25, "D": 0.05, "F": 0.05},
        seed=1,
    )
    path = tmp_path / "scores.parquet"
    scores.to_parquet(path)
    return path


def test_stats_command_writes_outputs(tmp_path, paper_like_scores, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "stats",
            str(paper_like_scores),
            "--out",
            str(out),
            "--hypotheses",
            str(PAPER_CONFIG),
            "--b",
            "300",
            "--seed",
            "2",
            "--alpha",
            "0.05",
            "--no-progress",
        ]
    )
    assert code == 0
    result = json.loads((out / "stats.json").read_text())
    assert result["systems"] == list("ABCDEF") and result["b"] == 300 and result["seed"] == 2
    assert set(result["hypotheses"]) == {"H1", "H2", "H3"}
    assert result["hypotheses"]["H1"]["significant"]
    assert (out / "plots" / "asl_curves.png").is_file() and (out / "tables" / "hypotheses.md").is_file()
    assert result["per_metric"]["QR"]["population"]["A"]["iqr"] is not None
    rows = result["discriminative_power_comparison"]
    # the user's scores: no judge suite is attached to their metric names, even to registered ones
    assert [(row["suite"], row["rank"]) for row in rows] == [(None, rank) for rank in range(1, 6)]
    assert (out / "tables" / "discriminative_power_comparison.md").is_file()
    printed = capsys.readouterr().out
    assert "H1" in printed and "discriminative power, your metrics: " in printed


def test_the_plot_process_started_first_writes_the_same_files_as_drawing_here(tmp_path, paper_like_scores,
                                                                               monkeypatch):
    """A fresh `ccrs stats` starts its plot process before it imports the statistics; drawn here or there,
    the same 21 files, byte for byte."""
    options = ["--hypotheses", str(PAPER_CONFIG), "--b", "200", "--no-progress"]
    for where, started in (("here", lambda cls: nullcontext()), ("there", lambda cls: cls.start())):
        monkeypatch.setattr(BackgroundPlots, "for_a_fresh_process", classmethod(started))
        assert main(["stats", str(paper_like_scores), "--out", str(tmp_path / where), *options]) == 0
    here, there = ({path.relative_to(out).as_posix(): path.read_bytes() for path in out.rglob("*")
                    if path.is_file()} for out in (tmp_path / "here", tmp_path / "there"))
    assert here == there and len(here) == 21


def test_same_seed_same_stats_json(tmp_path, paper_like_scores):
    for name in ("one", "two"):
        assert (
            main(
                [
                    "stats",
                    str(paper_like_scores),
                    "--out",
                    str(tmp_path / name),
                    "--b",
                    "100",
                    "--no-progress",
                ]
            )
            == 0
        )
    assert (tmp_path / "one" / "stats.json").read_bytes() == (tmp_path / "two" / "stats.json").read_bytes()


def test_bad_input_is_one_line_error_and_exit_2(tmp_path, capsys):
    path = tmp_path / "scores.csv"
    path.write_text("query_id,system,metric,score\nq1,A,CC,0.5\nq1,B,CC,1.7\n")
    assert main(["stats", str(path), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        "ccrs stats: error: score outside [0, 1] in row(s) 1 (1.7) (rows counted from 0, header excluded); "
        "scores on another scale need it named (ccrs stats --scale MIN MAX, e.g. --scale 1 5)"
    )


def test_unknown_hypothesis_system_exit_2(tmp_path, paper_like_scores, capsys):
    hypotheses = tmp_path / "h.yaml"
    hypotheses.write_text("hypotheses:\n  - {name: H9, pairs: [[A, Q]], metrics: [CC]}\n")
    code = main(
        ["stats", str(paper_like_scores), "--out", str(tmp_path / "out"), "--hypotheses", str(hypotheses)]
    )
    assert code == 2
    assert "unknown system(s) ['Q']" in capsys.readouterr().err


@pytest.fixture
def likert_wide_csv(tmp_path) -> Path:
    """1-5 marks, one column per metric (the wide table of a team's own judge): the paper-like scores
    rounded onto the 5-point scale."""
    scores = make_scores(n_queries=30, systems=("base", "rerank", "hyde"), metrics=("faithfulness", "CC"),
                         effects={"rerank": 0.3}, seed=3)
    scores["score"] = (scores["score"] * 4).round().astype(int) + 1
    wide = scores.pivot_table(index=["query_id", "system"], columns="metric", values="score").reset_index()
    path = tmp_path / "likert.csv"
    wide.rename(columns={"query_id": "question_id"}).to_csv(path, index=False)
    return path


def test_wide_likert_table_with_scale_prints_the_verdict_and_show_prints_it_again(tmp_path, likert_wide_csv,
                                                                                  capsys):
    out = tmp_path / "out"
    args = ["stats", str(likert_wide_csv), "--out", str(out), "--b", "300", "--no-progress", "--markdown"]
    assert main([*args, "--scale", "1", "5"]) == 0
    printed = capsys.readouterr().out
    assert "## Means, 95% CIs and HSD groups" in printed
    row = next(line for line in printed.splitlines() if line.startswith("| faithfulness |"))
    assert row.count("[") == 3 and " a" in row  # a mean, a CI and letters for each of the 3 systems
    assert "(grouse)" not in printed and "grouse:" not in printed  # the user's metric, not GroUSE's
    assert "discriminative power, your metrics: " in printed
    stats = json.loads((out / "stats.json").read_text())
    assert stats["systems"] == ["base", "hyde", "rerank"] and set(stats["metrics"]) == {"CC", "faithfulness"}
    assert all(0 <= m <= 1 for block in stats["per_metric"].values() for m in block["means"].values())
    assert main(["show", str(out), "--markdown"]) == 0
    assert capsys.readouterr().out.strip() == (out / "summary.md").read_text().strip()
    assert main([*args, "--scale", "1-5"]) == 0  # the dash form
    assert json.loads((out / "stats.json").read_text()) == stats


def test_a_mark_outside_the_named_scale_or_no_scale_is_one_line_and_exit_2(tmp_path, likert_wide_csv, capsys):
    out = str(tmp_path / "out")
    assert main(["stats", str(likert_wide_csv), "--out", out, "--no-progress"]) == 2
    assert "scores on another scale need it named (ccrs stats --scale MIN MAX" in capsys.readouterr().err
    assert main(["stats", str(likert_wide_csv), "--out", out, "--scale", "0", "3", "--no-progress"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("ccrs stats: error: score outside the scale 0-3 in row(s)") and "\n" not in error


def test_repeated_judgments_add_judge_noise_to_stats_json_and_the_verdict(tmp_path, capsys):
    path, out = tmp_path / "repeated.csv", tmp_path / "out"
    make_repeated_scores(n_queries=30, effects={"C": 0.06}, judge_sd=0.15, seed=0).to_csv(path, index=False)
    assert main(["stats", str(path), "--out", str(out), "--b", "300", "--no-progress", "--markdown"]) == 0
    noise = json.loads((out / "stats.json").read_text())["per_metric"]["CC"]["judge_noise"]
    assert set(noise["components"]) == {"system", "question", "system_x_question", "residual"}
    assert 0.0 <= noise["reliability"] <= 1.0 and noise["flaky_pairs"] == [["A", "C"]]
    printed = capsys.readouterr().out
    assert "## Judge noise" in printed and "judge noise (3 repeats): reliability" in printed
    assert "**Flaky:** A vs C (CC)" in (out / "summary.md").read_text()


def test_a_repeat_that_is_no_integer_is_one_line_and_exit_2(tmp_path, capsys):
    path = tmp_path / "repeated.csv"
    make_repeated_scores(n_queries=4).assign(repeat=lambda f: f["repeat"] + 0.5).to_csv(path, index=False)
    assert main(["stats", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "repeat must be an integer" in err


def test_one_system_csv_gives_means_cis_and_one_line_for_what_needs_two(tmp_path, capsys):
    """A team's one production system, three questions, 1-5 marks: exit 0, the verdict's means and CIs, the
    one line about the HSD and hypotheses, the too-few-questions line; stats.json in its layout; hypotheses
    about it are one line and exit 2."""
    path = tmp_path / "prod.csv"
    path.write_text("question_id,system,faithfulness\nq1,prod,4\nq2,prod,2\nq3,prod,5\n")
    out = tmp_path / "out"
    args = ["stats", str(path), "--out", str(out), "--scale", "1-5", "--b", "300", "--no-progress",
            "--markdown"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "3 questions, 1 system (prod); 95% bootstrap CIs from B = 300 resamples." in printed
    assert ("One system (prod): the HSD groups, discriminative power and hypotheses compare systems and need "
            "two or more.") in printed
    assert "| faithfulness | 0.67 [" in printed and "**Too few questions:** faithfulness (3)" in printed
    result = json.loads((out / "stats.json").read_text())
    entry = result["per_metric"]["faithfulness"]
    assert (result["systems"], entry["pairwise"], entry["discriminative_power"]) == (["prod"], [], None)
    assert entry["means"]["prod"] == pytest.approx(2 / 3) and (out / "summary.md").read_text() in printed
    assert (out / "tables" / "means.csv").is_file() and (out / "plots" / "boxplots.png").is_file()

    hypotheses = tmp_path / "h.yaml"
    hypotheses.write_text("hypotheses:\n  - {name: H1, pairs: [[prod, old]], metrics: [faithfulness]}\n")
    assert main([*args, "--hypotheses", str(hypotheses)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("ccrs stats: error: hypotheses compare systems, and the scores hold one (prod)")


PILOT = Path(__file__).resolve().parents[2] / "data" / "bioasq-sample-pilot"


def _pilot_labels(path: Path, systems=tuple("ABCDEF"), extra: dict | None = None) -> Path:
    """A 0/1 human metric `acceptable` on the real extractive pilot: token_f1 above 0.4, one annotator."""
    import pandas as pd

    scores = pd.read_parquet(PILOT / "extractive_scores.parquet")
    f1 = scores[(scores["metric"] == "token_f1") & scores["system"].isin(systems)]
    labels = pd.DataFrame({"question_id": f1["query_id"], "system": f1["system"], "metric": "acceptable",
                           "label": (f1["score"] > 0.4).astype(int), "annotator": "ann"})
    if extra:
        labels = pd.concat([labels, pd.DataFrame([extra])], ignore_index=True)
    labels.to_json(path, orient="records", lines=True)
    return path


def test_stats_with_labels_writes_the_human_calibrated_contract_and_verdict(tmp_path, capsys):
    out = tmp_path / "out"
    labels = _pilot_labels(tmp_path / "labels.jsonl")
    code = main(["stats", str(PILOT / "extractive_scores.parquet"), "--labels", str(labels), "--predicted-by",
                 "acceptable=token_f1", "--out", str(out), "--b", "200", "--no-progress", "--markdown"])
    assert code == 0
    entry = json.loads((out / "stats.json").read_text())["per_metric"]["token_f1"]["human_calibrated"]
    assert entry["n_labels"] == {system: 32 for system in "ABCDEF"}
    assert set(entry["means"]) == set("ABCDEF") and all(len(ci) == 2 for ci in entry["ci95"].values())
    assert entry["judge_bias"] == {} and len(entry["pairwise"]) == 15  # another construct than token_f1
    contract = {"a", "b", "diff", "ci95", "p_value", "significant"}
    assert all(set(pair) >= contract for pair in entry["pairwise"])
    printed = capsys.readouterr().out
    assert "## Human-calibrated (PPI++)" in printed
    assert "acceptable (a human metric, predicted by token_f1)" in printed
    assert "human-calibrated (acceptable): 192 labels" in printed
    assert "## Human-calibrated" in (out / "summary.md").read_text()


@pytest.mark.parametrize("extra, options, message", [
    ({"question_id": "nope", "system": "A", "metric": "acceptable", "label": 1}, [],
     "questions the scores lack"),
    ({"question_id": "65cfad2d1930410b13000014", "system": "Z", "metric": "acceptable", "label": 1}, [],
     "systems the scores lack: 'Z'"),
    ({"question_id": "65cfad2d1930410b13000014", "system": "A", "metric": "acceptable", "label": 3}, [],
     "outside their scale"),
    (None, ["--predicted-by", "acceptable"], "--predicted-by takes HUMAN=JUDGE"),
])
def test_bad_labels_are_one_line_and_exit_2(tmp_path, capsys, extra, options, message):
    labels = _pilot_labels(tmp_path / "labels.jsonl", extra=extra)
    options = options or ["--predicted-by", "acceptable=token_f1"]
    code = main(["stats", str(PILOT / "extractive_scores.parquet"), "--labels", str(labels), *options,
                 "--out", str(tmp_path / "out"), "--b", "50", "--no-progress"])
    error = capsys.readouterr().err
    assert code == 2 and message in error and len(error.strip().splitlines()) == 1


def test_unknown_label_metric_is_one_line(tmp_path, capsys):
    labels = _pilot_labels(tmp_path / "labels.jsonl")
    code = main(["stats", str(PILOT / "extractive_scores.parquet"), "--labels", str(labels), "--out",
                 str(tmp_path / "out"), "--b", "50", "--no-progress"])
    assert code == 2 and "the scores have no metric 'acceptable'" in capsys.readouterr().err


def test_stats_of_a_run_dir_picks_up_its_labels_and_names_too_few(tmp_path, capsys):
    """The recorded pilot run (8 questions): its own labels/ (as `ccrs label` writes them) on CC's 0-1
    scale; 8 labels per system are below the floor, so the verdict names the gap and claims no interval."""
    import shutil

    import pandas as pd

    from tasks.runtime.layout import RunLayout

    run = tmp_path / "run"
    shutil.copytree(PILOT, run)
    layout = RunLayout(run)
    scores = pd.read_parquet(layout.scores("ccrs"))
    cc = scores[scores["metric"] == "CC"]
    layout.labels_dir.mkdir()
    pd.DataFrame({"question_id": cc["query_id"], "system": cc["system"], "metric": "CC",
                  "label": (cc["score"] >= 0.5).astype(int) * 4 + 1, "annotator": "ann"}).to_json(
        layout.labels_file, orient="records", lines=True)
    layout.labels_metrics.write_text(json.dumps({"CC": {"scale": [1, 5], "predicted_by": "CC"}}))
    code = main(["stats", str(run), "--out", str(tmp_path / "out"), "--b", "50", "--no-progress",
                 "--markdown"])
    assert code == 0
    entry = json.loads((tmp_path / "out" / "stats.json").read_text())["per_metric"]["CC"]["human_calibrated"]
    assert entry["n_labels"] == {system: 8 for system in "ABCDEF"} and entry["means"] == {}
    assert entry["too_few_labels"] == list("ABCDEF") and set(entry["judge_bias"]) == set("ABCDEF")
    printed = capsys.readouterr().out
    assert "**Too few labels:** A (8)" in printed and "fewer than 10 labels" in printed
