import json

import pandas as pd

from pipelines import cli
from pipelines.config import REPO_ROOT
from tests.stats.conftest import make_repeated_scores

PILOT = REPO_ROOT / "data" / "bioasq-sample-pilot"  # real BioASQ 12b sample pilots (see its README)


def test_plan_power_on_a_real_pilot_scores_file(tmp_path, capsys):
    out, plot = tmp_path / "power_plan.json", tmp_path / "power.png"
    code = cli.main(["plan", "power", "--pilot", str(PILOT / "extractive_scores.parquet"), "--delta", "0.2",
                     "--replicates", "20", "--b", "200", "--out", str(tmp_path)])
    assert code == 0
    plan = json.loads(out.read_text())
    assert set(plan["n_questions"]) == {"token_f1", "token_recall"}
    for metric, entry in plan["per_metric"].items():
        assert entry["n_pilot"] == 32 and entry["residual_sd"] > 0
        needed = [r["n_questions"] for r in entry["requirements"].values()]
        assert plan["n_questions"][metric] == max(needed) >= 2
        for requirement in entry["requirements"].values():
            assert requirement["n_questions"] >= requirement["parametric_n"]
            assert requirement["parametric_power"] >= 0.8
            assert 0.0 <= requirement["simulated_power"] <= 1.0
    assert plot.stat().st_size > 0
    printed = capsys.readouterr().out
    assert "| token_f1 |" in printed and '"n_questions"' in printed


def test_a_pilot_run_whose_scores_all_tie_has_nothing_to_plan_from(tmp_path, capsys):
    # the CPU demo's 135M judge gave every answer 0 on these questions: no noise, no plan, said so
    out = tmp_path / "plan.json"
    assert cli.main(["plan", "power", "--pilot", str(PILOT), "--replicates", "0", "--json", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert set(plan["n_questions"]) == {"CC", "QR", "ID", "AC", "IR"}
    assert all(n is None for n in plan["n_questions"].values())
    assert "every score ties" in capsys.readouterr().out


def test_plan_power_reports_bad_input(tmp_path, capsys):
    scores = pd.read_parquet(PILOT / "extractive_scores.parquet")
    path = tmp_path / "scores.csv"
    scores.to_csv(path, index=False)
    assert cli.main(["plan", "power", "--pilot", str(path), "--metric", "XX"]) == 2
    assert "not in the pilot" in capsys.readouterr().err
    scores[scores["system"] == "A"].to_csv(path, index=False)
    assert cli.main(["plan", "power", "--pilot", str(path)]) == 2
    line = "ccrs plan power: power planning compares systems: the pilot holds one (A)"
    assert capsys.readouterr().err.splitlines() == [line]
    assert cli.main(["plan", "power", "--pilot", str(tmp_path / "missing.parquet")]) == 2


def test_ccrs_run_prints_the_cost_plan_or_why_not_before_a_cluster_run(capsys):
    from pipelines.config import load_config
    from pipelines.tools.run_outcome import print_cost_plan

    # the paper config's dataset lives on the cluster (/mnt/ccrs): the run goes on with a note
    print_cost_plan(load_config(REPO_ROOT / "configs" / "paper-bioasq.yaml"))
    assert "no cost plan" in capsys.readouterr().out
    print_cost_plan(load_config(None, {"dataset.path": str(REPO_ROOT / "data" / "bioasq-sample"),
                                       "dataset.limit": 3}))
    printed = capsys.readouterr().out
    assert "Cost plan of ccrs-cpu-demo: 3 questions x 6 systems" in printed
    # the demo scores expected marks: 90 judgments, each a reply and one batched continuation request
    assert "| judge_ccrs | smollm2-135m-instruct | 180 |" in printed


def test_a_pilot_with_repeated_judgments_gets_a_decision_study(tmp_path, capsys):
    """Three systems judged three times with a noisy judge, 60 questions available: the study weighs
    repeats against questions (three systems: each new n costs a studentized range quantile, ~0.5 s)."""
    pilot, out = tmp_path / "pilot.parquet", tmp_path / "plan" / "power_plan.json"
    make_repeated_scores(n_queries=30, judge_sd=0.15, seed=2).to_parquet(pilot)
    code = cli.main(["plan", "power", "--pilot", str(pilot), "--delta", "0.15", "--replicates", "40",
                     "--b", "200", "--max-repeats", "3", "--questions", "60", "--out", str(out.parent)])
    assert code == 0
    plan = json.loads(out.read_text())
    rows = plan["decision_study"]
    assert {"metric", "n_questions", "n_repeats", "power", "judge_calls"} <= set(rows[0])
    assert all(row["judge_calls"] == row["n_questions"] * 3 * row["n_repeats"] for row in rows)
    assert {row["n_repeats"] for row in rows} == {1, 2, 3} and max(r["n_questions"] for r in rows) <= 60
    decision = plan["per_metric"]["CC"]["decision"]
    best = decision["recommended"]
    chosen = [row for row in rows if row["recommended"]]
    assert [(row["n_questions"], row["n_repeats"]) for row in chosen] == [
        (best["parametric_n_questions"], best["n_repeats"])]
    assert 0.0 <= best["simulated_power"] <= 1.0 and 0.0 <= decision["reliability"] <= 1.0
    printed = capsys.readouterr().out
    assert "Decision study" in printed and "**recommended**" in printed


def test_plan_power_simulates_a_sequential_run_of_the_planned_questions(tmp_path, capsys):
    """Systems 0.3 apart on a 60-question pilot: the planned run, judged sequentially, stops early."""
    from tests.stats.conftest import make_scores

    pilot = tmp_path / "pilot.parquet"
    make_scores(n_queries=60, systems=("A", "B", "C"), metrics=("CC",), effects={"A": 0.3, "B": 0.6},
                seed=3).to_parquet(pilot)
    code = cli.main(["plan", "power", "--pilot", str(pilot), "--delta", "0.05", "--replicates", "0",
                     "--sequential", "--margin", "0.05", "--sequential-replicates", "5", "--json"])
    assert code == 0
    printed = capsys.readouterr().out
    plan = json.loads(printed)  # --json: the plan as JSON on stdout, nothing else
    sequential = plan["sequential"]
    assert sequential["n_questions"] == plan["n_questions"]["CC"]
    assert sequential["mean_stop"] < sequential["n_questions"] and sequential["settled_share"] == 1.0
    assert sequential["judge_calls_expected"] < sequential["judge_calls_fixed"]
    code = cli.main(["plan", "power", "--pilot", str(pilot), "--delta", "0.05", "--replicates", "0",
                     "--sequential", "--margin", "0.05", "--sequential-replicates", "5"])
    assert code == 0 and "Sequential (judge.sequential: margin 0.05" in capsys.readouterr().out


def test_plan_labels_design_active_forecasts_the_labels_an_active_design_needs(tmp_path, capsys):
    from tests.pipelines.tools.active_run import METRIC, write_active_run

    run = write_active_run(tmp_path / "run", questions=120)
    code = cli.main(["plan", "labels", "--pilot", str(run.root), "--delta", "0.1", "--design", "active",
                     "--replicates", "0", "--out", str(tmp_path / "plan")])
    out = capsys.readouterr().out
    assert code == 0 and "Active design (`ccrs label --design active`)" in out
    active = json.loads((tmp_path / "plan" / "labels_plan.json").read_text())["active"]["per_metric"][METRIC]
    assert active["uncertainty"] == "systems' disagreement" and active["source"] == "assumed"
    assert active["labels"]["0"]["active"] == active["labels"]["0"]["uniform"]  # rho 0: nothing to save
    for figure in active["labels"].values():
        assert figure["active"] <= figure["uniform"]
    assert cli.main(["plan", "labels", "--pilot", str(run.root), "--delta", "0.1", "--replicates", "0",
                     "--out", str(tmp_path / "uniform")]) == 0
    assert "active" not in json.loads((tmp_path / "uniform" / "labels_plan.json").read_text())
