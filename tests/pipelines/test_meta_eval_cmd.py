"""`ccrs meta-eval`: argument handling, errors, agreement mode, and one small real run."""
import json
from pathlib import Path

import pytest

from pipelines.cli import main

DATA = Path(__file__).resolve().parents[2] / "data" / "grouse-bioasq"


def test_help_lists_meta_eval(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "meta-eval" in capsys.readouterr().out


def test_bad_unit_test_file_is_an_error_naming_the_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "q"}\n')
    assert main(["meta-eval", "--tests", str(bad), "--llm-base-url", "http://127.0.0.1:9/v1",
                 "--no-mlflow"]) == 2
    assert f"{bad}:1: missing key 'actual_output'" in capsys.readouterr().err


def test_no_selected_tests_is_an_error(capsys):
    args = ["meta-eval", "--tests", str(DATA / "train.jsonl"), "--sets", "nope", "--llm-base-url", "http://x/v1"]
    assert main(args) == 2 and "no tests selected" in capsys.readouterr().err


def test_grouse_reply_budget_below_its_minimum_is_an_error_before_any_call(capsys):
    args = ["meta-eval", "--tests", str(DATA / "train.jsonl"), "--max-tokens", "8", "--llm-base-url", "http://127.0.0.1:9/v1",
            "--no-mlflow"]
    assert main(args) == 2 and "--max-tokens" in capsys.readouterr().err


def _parsed(*flags: str):
    import argparse

    from pipelines.meta_eval_cmd import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(flags))


def test_grouse_prompt_version_and_reply_budgets_are_selectable():
    from judges.config import GrouseOptions
    from pipelines.meta_eval_cmd import _grouse_options

    # the paper's budgets are judge.grouse's defaults; the local CPU model's are its own
    assert _grouse_options(_parsed("--settings", "paper")) == GrouseOptions()
    assert _grouse_options(_parsed("--llm-base-url", "http://x/v1")) == GrouseOptions()  # an endpoint given
    local = _grouse_options(_parsed())
    assert (local.max_tokens, local.faithfulness_max_tokens) == (200, 200)
    assert local.model_copy(update={"max_tokens": 512, "faithfulness_max_tokens": 2048}) == GrouseOptions()
    assert _grouse_options(_parsed("--grouse-prompt-version", "v1")).prompt_version == "v1"
    assert _grouse_options(_parsed("--prompt-version", "paper")).prompt_version == "paper"  # older name
    chosen = _grouse_options(_parsed("--max-tokens", "300", "--faithfulness-max-tokens", "1200"))
    assert (chosen.max_tokens, chosen.faithfulness_max_tokens) == (300, 1200)


def test_the_settings_are_named_with_the_option_that_gives_the_others():
    """The local CPU model gets short, schema-constrained replies and one re-ask; an endpoint given (or
    --settings paper) GroUSE's own; each option replaces one setting, and the line says so."""
    from pipelines.meta_eval_cmd import resolved_settings, settings_line

    local = _parsed()
    assert tuple(resolved_settings(local))[:4] == (200, 200, True, 1)
    assert settings_line(local) == (
        "settings cpu: replies of 200 tokens, faithfulness 200, structured output on, at most 1 re-ask; "
        "paper's: --settings paper")
    endpoint = _parsed("--llm-base-url", "http://x/v1")
    assert tuple(resolved_settings(endpoint))[:4] == (512, 2048, False, 2)
    changed = _parsed("--settings", "paper", "--faithfulness-max-tokens", "1024", "--structured-output")
    assert settings_line(changed) == (
        "settings paper (changed by its options): replies of 512 tokens, faithfulness 1024, structured "
        "output on, at most 2 re-asks; cpu's: --settings cpu")
    assert resolved_settings(_parsed("--no-structured-output", "--max-reasks", "0"))[2:4] == (False, 0)


def test_unknown_grouse_prompt_version_is_an_error_before_any_call(capsys):
    args = ["meta-eval", "--tests", str(DATA / "train.jsonl"), "--grouse-prompt-version", "v9",
            "--llm-base-url", "http://127.0.0.1:9/v1", "--no-mlflow"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--grouse-prompt-version" in err and "unknown GroUSE prompt version 'v9'" in err and "paper" in err


def _results(path: Path, marks: dict[str, dict]) -> Path:
    outcomes = [{"test_id": tid, "checks": {m: {"value": v, "status": "ok"} for m, v in metrics.items()}}
                for tid, metrics in marks.items()]
    path.write_text(json.dumps({"outcomes": outcomes}))
    return path


def test_agreement_mode_prints_spearman_and_macro_f1(tmp_path, capsys):
    a = _results(tmp_path / "a.json", {"t1": {"answer_relevancy": 5, "faithfulness": 1},
                                       "t2": {"answer_relevancy": 2, "faithfulness": 0},
                                       "t3": {"answer_relevancy": 3, "faithfulness": None}})
    b = _results(tmp_path / "b.json", {"t1": {"answer_relevancy": 4, "faithfulness": 1},
                                       "t2": {"answer_relevancy": 1, "faithfulness": 1},
                                       "t3": {"answer_relevancy": 2, "faithfulness": None}})
    assert main(["meta-eval", "--agreement-of", str(a), str(b)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_samples"] == 3 and out["answer_relevancy"]["spearman"] == pytest.approx(1.0)
    # classes 0 (F1 0), 1 (tp1 fp1 -> 2/3), null (1.0)
    assert out["faithfulness"]["macro_f1"] == pytest.approx((0 + 2 / 3 + 1) / 3)


def test_agreement_mode_missing_file(tmp_path, capsys):
    assert main(["meta-eval", "--agreement-of", str(tmp_path / "x.json"), str(tmp_path / "y.json")]) == 2


@pytest.mark.llm
def test_real_run_reports_and_logs_to_mlflow(tmp_path, llm_endpoint, capsys, mlflow_db):
    import mlflow

    uri = mlflow_db  # tmp_path/mlflow.db, a copy of the session's empty store
    args = ["meta-eval", "--tests", str(DATA / "train.jsonl"), "--limit", "1",
            "--llm-base-url", llm_endpoint.base_url, "--judge-model", llm_endpoint.judge_model,
            "--structured-output", "--max-tokens", "128", "--faithfulness-max-tokens", "256",
            "--max-reasks", "0",
            "--context-window", "2048", "--out", str(tmp_path / "out"), "--tracking-uri", uri,
            "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "pass rate per metric" in out and "overall" in out and "MLflow run" in out
    assert "all-calls" in out and "pipeline" in out and "FM7" in out  # both protocols, the failure modes
    assert (tmp_path / "out" / "matrix.png").exists() and (tmp_path / "out" / "failures.jsonl").exists()
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["n_tests"] == 1 and len(results["outcomes"]) == 1 and results["protocol"] == "all-calls"
    assert set(results["protocol_pass_rates"]) == set(results["failure_modes"]) == {"all-calls", "pipeline"}
    assert sum(c["status"] == "skipped" for c in results["outcomes"][0]["checks"].values()) == 0  # all asked
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["ccrs-meta-eval"], output_format="list")
    assert len(runs) == 1 and "pass_rate_overall" in runs[0].data.metrics


def test_public_grouse_format_with_free_text_types_is_read(capsys):
    """The public shape (free-text metadata.test_type, no set id) loads; sets are named by question."""
    args = ["meta-eval", "--tests", str(DATA / "public-format-sample.jsonl"), "--sets", "nope",
            "--llm-base-url", "http://127.0.0.1:9/v1", "--no-mlflow"]
    assert main(args) == 2 and "no tests selected" in capsys.readouterr().err  # loaded, then filtered out


def test_public_format_without_a_readable_type_is_a_clear_error(tmp_path, capsys):
    lines = (DATA / "public-format-sample.jsonl").read_text().splitlines()[:15]
    bad = tmp_path / "public.jsonl"
    bad.write_text("".join(line.replace('"Highest marks 1"', '"warm-up"') + "\n" for line in lines))
    args = ["meta-eval", "--tests", str(bad), "--llm-base-url", "http://127.0.0.1:9/v1", "--no-mlflow"]
    assert main(args) == 2
    assert (f"{bad}:1: test type 'warm-up' names no GroUSE Table 6 test, and its question has 15 tests"
            in capsys.readouterr().err)


def test_ablation_flag_selects_the_paper_ablation_prompt_version():
    from pipelines.meta_eval_cmd import _grouse_options

    assert _grouse_options(_parsed("--ablation", "no-cot")).prompt_version == "paper-no-cot"
    assert _grouse_options(_parsed("--ablation", "one-prompt")).prompt_version == "paper-one-prompt"


def test_ablation_and_prompt_version_together_are_an_error_before_any_call(capsys):
    args = ["meta-eval", "--tests", str(DATA / "train.jsonl"), "--ablation", "no-cot",
            "--grouse-prompt-version", "v1", "--llm-base-url", "http://127.0.0.1:9/v1", "--no-mlflow"]
    assert main(args) == 2 and "give one" in capsys.readouterr().err
