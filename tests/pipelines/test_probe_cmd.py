"""`ccrs probe` (and `ccrs injection-eval`, its alias for one release): argument handling, errors, the
test set, and one tiny real run of the injection and verbosity kinds logged to MLflow."""
import argparse
import json

import pytest

from pipelines.cli import main
from tests.conftest import REPO, bioasq_questions

DATASET = REPO / "data" / "bioasq-sample"


def _parsed(*flags: str, name: str = "probe") -> argparse.Namespace:
    from pipelines.probe_cmd import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser, name)
    return parser.parse_args(list(flags))


def test_help_lists_probe_and_the_alias(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "probe" in out and "injection-eval" in out and "deprecated alias" in out


@pytest.mark.parametrize("argv,message", [
    (["probe"], "--kind"),                                  # a kind must be named
    (["probe", "--kind", "nope"], "invalid choice"),
    (["probe", "--kind", "order", "--templates", "nope"], "invalid choice"),
    (["probe", "--kind", "order", "--metrics", "NOPE"], "invalid choice"),
    (["injection-eval", "--templates", "nope"], "invalid choice"),
])
def test_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_metric_choices_are_the_registered_ccrs_metrics(capsys):
    from judges.suite import get_suite

    with pytest.raises(SystemExit):
        main(["probe", "--kind", "order", "--metrics", "NOPE"])
    err = capsys.readouterr().err
    assert all(repr(name) in err for name in get_suite("ccrs").metrics)


@pytest.mark.parametrize("option,value", [("--tolerance", "0"), ("--tolerance", "1.5"), ("--sentences", "0"),
                                          ("--b", "10")])
def test_out_of_range_settings_are_one_line(option, value, tmp_path, capsys):
    assert main(["probe", "--kind", "verbosity", option, value, "--out", str(tmp_path)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ccrs probe")]
    assert len(errors) == 1 and errors[0].startswith(f"ccrs probe: error: {option}")


def test_kinds_accumulate_in_order_once_each():
    args = _parsed("--kind", "order", "verbosity", "--kind", "order", "injection")
    assert list(dict.fromkeys(args.kinds)) == ["order", "verbosity", "injection"]
    assert str(args.out) == "runs/probes"


def test_the_alias_is_the_injection_kind_and_says_so_in_one_line(tmp_path, capsys):
    assert _parsed(name="injection-eval").kinds == ["injection"]
    argv = ["injection-eval", "--dataset", str(tmp_path / "none"), "--llm-base-url", "http://127.0.0.1:9/v1",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 2  # it runs the probe, which stops at the missing dataset
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ccrs injection-eval")]
    assert err[0] == ("ccrs injection-eval is now `ccrs probe --kind injection` (this alias goes in the next "
                      "release)")
    assert err[1].startswith("ccrs injection-eval: error:") and "does not exist" in err[1] and len(err) == 2


def test_options_reach_the_run_config():
    from pipelines.config import load_config
    from pipelines.probe_cmd import _overrides

    for scoring in ("integer", "expected"):
        args = _parsed("--kind", "order", "--scoring", scoring)
        assert load_config(None, _overrides(args)).judge.scoring == scoring
    args = _parsed("--kind", "order", "--metrics", "QR", "--judge-model", "m", "--limit", "3",
                   "--judge-base-url", "http://judge:8000/v1/")
    config = load_config(None, _overrides(args))
    assert (config.judge.ccrs.metrics, config.judge.model, config.judge.base_url) == (
        ["QR"], "m", "http://judge:8000/v1")
    assert config.dataset.limit == 3 and "judge.scoring" not in _overrides(_parsed("--kind", "order"))


def test_the_judge_settings_in_use_are_named_with_the_option_that_gives_the_papers():
    from pipelines.config import load_config
    from pipelines.probe_cmd import _overrides, settings_named

    args = _parsed("--kind", "order")
    assert settings_named(args, load_config(None, _overrides(args))) == (
        "judge settings of configs/cpu-demo.yaml (CCRS prompts v1, expected marks, structured output on); "
        "the paper's: --config configs/paper-bioasq.yaml")
    paper = _parsed("--kind", "order", "--config", "configs/paper-bioasq.yaml")
    assert settings_named(paper, load_config(paper.config, _overrides(paper))) == (
        "judge settings of configs/paper-bioasq.yaml (CCRS prompts paper, integer marks, structured output "
        "off)")


def test_missing_dataset_is_an_error(tmp_path, capsys):
    argv = ["probe", "--kind", "order", "--dataset", str(tmp_path / "none"), "--llm-base-url",
            "http://127.0.0.1:9/v1", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert "ccrs probe: error:" in capsys.readouterr().err


def test_samples_are_real_questions_with_their_ideal_answer_and_gold_snippets():
    from pipelines.tools.probe_set import load_probe_samples

    samples = load_probe_samples(DATASET, limit=3, max_chunks=4)
    raw = bioasq_questions(3)
    assert [s.query_id for s in samples] == [q["id"] for q in raw]
    for sample, question in zip(samples, raw):
        assert sample.question == question["body"]
        assert sample.response == sample.ground_truth == question["ideal_answer"][0]
        snippets = [s["text"].strip() for s in question["snippets"]]
        assert 1 <= len(sample.context) <= 4 and all(chunk in snippets for chunk in sample.context)


@pytest.mark.llm
def test_tiny_real_run_of_the_injection_and_verbosity_probes_prints_and_logs_to_mlflow(tmp_path, llm_endpoint,
                                                                                     capsys, mlflow_db):
    """`ccrs probe --kind injection verbosity` on the real CPU judge (2 questions, QR and ID, one injection
    template in the response): the table with CIs, the detector's flag rates, every file, the MLflow run."""
    import mlflow

    uri = mlflow_db  # tmp_path/mlflow.db, a copy of the session's empty store
    out = tmp_path / "probe"
    args = ["probe", "--kind", "injection", "verbosity", "--limit", "2", "--templates", "score_dictation",
            "--placements", "response", "--metrics", "QR,ID", "--max-chunks", "1", "--b", "200",
            "--llm-base-url", llm_endpoint.base_url, "--out", str(out), "--tracking-uri", uri,
            "--no-progress"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    for kind, variant in (("injection", "score_dictation@response"), ("verbosity", "verbosity")):
        rows = [line.split() for line in printed.splitlines() if line.startswith(f"{kind} ")]
        assert [(row[1], row[2]) for row in rows] == [(variant, "QR"), (variant, "ID")]
        assert all("[" in " ".join(row) for row in rows)
    assert "flagged where |shift| > 0.05" in printed and "MLflow run" in printed
    assert "detector (judges/injection.py injection_markers) flagged 0/2 clean responses" in printed
    assert "score_dictation@response 2/2" in printed
    report = json.loads((out / "probe_report.json").read_text())
    assert report["n_questions"] == 2 and report["judgments"] == 3 * 2 * 2  # clean, injected, padded
    assert all(c["n"] == 2 and c["n_pairs"] + c["failures_clean"] + c["failures_probed"] >= 2
               for c in report["cells"])
    assert report["detector"]["injected"] == [{"variant": "score_dictation@response", "n": 2, "flagged": 2,
                                               "flag_rate": 1.0}]
    assert {p.name for p in out.iterdir()} >= {"probe_judgments.parquet", "probe_report.json",
                                                "probe_report.csv", "probe_shift.png"}
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["ccrs-probes"], output_format="list")
    assert len(runs) == 1 and runs[0].data.tags["ccrs.kind"] == "probe"
    metrics = runs[0].data.metrics
    assert "probe/flagged_cells" in metrics
    assert metrics["probe/injection/detector/score_dictation.response/flag_rate"] == 1.0
