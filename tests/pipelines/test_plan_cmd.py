import json

import numpy as np
import pandas as pd

from pipelines import cli
from pipelines.config import REPO_ROOT

PILOT = REPO_ROOT / "data" / "bioasq-sample-pilot"  # real CPU-demo judge scores (see its README)


def test_plan_power_on_a_real_pilot_run_directory(tmp_path, capsys):
    out, plot = tmp_path / "plan.json", tmp_path / "power.png"
    code = cli.main(["plan", "power", "--pilot", str(PILOT), "--metric", "CC", "--metric", "QR",
                     "--delta", "0.2", "--replicates", "20", "--b", "200", "--json", str(out),
                     "--plot", str(plot)])
    assert code == 0
    plan = json.loads(out.read_text())
    assert set(plan["n_questions"]) == {"CC", "QR"}
    for metric, entry in plan["per_metric"].items():
        needed = [r["n_questions"] for r in entry["requirements"].values()]
        assert plan["n_questions"][metric] == max(needed) >= 2
        for requirement in entry["requirements"].values():
            assert requirement["parametric_power"] >= 0.8
            assert 0.0 <= requirement["simulated_power"] <= 1.0
    assert plot.stat().st_size > 0
    printed = capsys.readouterr().out
    assert "| CC |" in printed and '"n_questions"' in printed


def test_plan_power_reads_a_scores_file_and_reports_bad_input(tmp_path, capsys):
    scores = pd.read_parquet(PILOT / "judge_ccrs" / "scores.parquet")
    path = tmp_path / "scores.csv"
    scores.to_csv(path, index=False)
    assert cli.main(["plan", "power", "--pilot", str(path), "--metric", "IR", "--replicates", "0"]) == 0
    assert cli.main(["plan", "power", "--pilot", str(path), "--metric", "XX"]) == 2
    assert "not in the pilot" in capsys.readouterr().err
    single = scores[scores["system"] == scores["system"].iloc[0]]
    single.to_csv(path, index=False)
    assert cli.main(["plan", "power", "--pilot", str(path)]) == 2
    assert np.isfinite(scores["score"]).all()
