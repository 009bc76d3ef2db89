"""`ccrs injection-eval`: argument handling, errors, and one tiny real run logged to MLflow."""
import json

import pytest

from infra.console import log_file_in
from pipelines.cli import main


def test_help_lists_injection_eval(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "injection-eval" in capsys.readouterr().out


def test_unknown_template_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["injection-eval", "--templates", "nope"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_metric_choices_are_the_registered_ccrs_metrics(capsys):
    from judges.suite import get_suite

    with pytest.raises(SystemExit) as exc:
        main(["injection-eval", "--metrics", "NOPE"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "invalid choice" in err
    assert all(repr(name) in err for name in get_suite("ccrs").metrics)


def test_scoring_overrides_the_configs_judge_scoring():
    import argparse

    from pipelines.config import load_config
    from pipelines.injection_cmd import _overrides, add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for scoring in ("integer", "expected"):
        args = parser.parse_args(["--scoring", scoring])
        assert load_config(None, _overrides(args)).judge.scoring == scoring
    assert "judge.scoring" not in _overrides(parser.parse_args([]))


def test_missing_dataset_is_an_error(tmp_path, capsys):
    args = ["injection-eval", "--dataset", str(tmp_path / "none"), "--llm-base-url", "http://127.0.0.1:9/v1"]
    assert main(args) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.llm
def test_tiny_real_runs_of_injection_eval_and_probe_print_tables_and_log_to_mlflow(tmp_path, llm_endpoint,
                                                                                   capsys):
    """Both commands on the real CPU judge, one MLflow store: `ccrs injection-eval` (1 question, QR) and
    `ccrs probe --kind verbosity` (2 questions, QR and ID)."""
    import mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    out = tmp_path / "out"
    args = ["injection-eval", "--limit", "1", "--templates", "score_dictation", "--placements", "response",
            "--metrics", "QR", "--max-chunks", "1", "--llm-base-url", llm_endpoint.base_url,
            "--out", str(out), "--tracking-uri", uri, "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert ("score_dictation@response" in printed and "clean (mean score)" in printed
            and "MLflow run" in printed)
    report = json.loads((out / "injection_report.json").read_text())
    assert report["judgments"] == 2 and report["templates"] == ["score_dictation"]
    written = {p.name for p in out.iterdir()} - {log_file_in(out).name}  # the log records, when any came
    assert written == {"injection_judgments.parquet", "injection_report.json", "injection_report.csv",
                       "injection_shift.png"}
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["ccrs-injection"], output_format="list")
    assert len(runs) == 1 and runs[0].data.tags["ccrs.kind"] == "injection-eval"
    assert "mean_shift_QR" in runs[0].data.metrics or report["mean_shift_by_metric"]["QR"] is None

    probe_out = tmp_path / "probe"
    args = ["probe", "--kind", "verbosity", "--limit", "2", "--metrics", "QR", "ID", "--max-chunks", "1",
            "--b", "200", "--llm-base-url", llm_endpoint.base_url, "--out", str(probe_out),
            "--tracking-uri", uri, "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    rows = [line.split() for line in printed.splitlines() if line.startswith("verbosity ")]
    assert [row[2] for row in rows] == ["QR", "ID"] and all("[" in " ".join(row) for row in rows)
    assert "flagged where |shift| > 0.05" in printed and "MLflow run" in printed
    probe_report = json.loads((probe_out / "probe_report.json").read_text())
    assert probe_report["n_questions"] == 2 and probe_report["judgments"] == 2 * 2 + 2 * 2
    assert all(c["n"] == 2 and c["n_pairs"] + c["failures_clean"] + c["failures_probed"] >= 2
               for c in probe_report["cells"])
    probe_runs = mlflow.search_runs(experiment_names=["ccrs-probes"], output_format="list")
    assert len(probe_runs) == 1 and probe_runs[0].data.tags["ccrs.kind"] == "probe"
    assert "probe/flagged_cells" in probe_runs[0].data.metrics
