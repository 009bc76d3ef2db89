"""`ccrs evaluate` and `ccrs_eval.evaluate` on the real CPU stack: the user's outputs judged by the real
SmolLM2 judge (the session's endpoint), logged to a real `mlflow server`, from the checkout, from another
directory and from a wheel install. Bad inputs (exit 2, one line) need no judge and run without it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from pipelines.cli import main
from tests.tasks.test_outputs import EXAMPLE, example_rows, grouse_file

REPO = Path(__file__).resolve().parents[2]
CCRS = ["CC", "QR", "ID", "AC", "IR"]
PACKAGED = ("pyproject.toml", "README.md", "ccrs_eval", "pipelines", "tasks", "judges", "retrievers", "stats",
            "infra", "configs", "data/bioasq-sample")


def integer_config(path: Path) -> Path:
    """The shipped demo config with integer marks and B = 1000 (CI time; the subject here is the path of
    the outputs through the stages, not the scoring mode)."""
    config = yaml.safe_load((REPO / "configs" / "cpu-demo.yaml").read_text())
    config["judge"]["scoring"] = "integer"
    config["stats"] = {**config["stats"], "b": 1000, "hypotheses": None}
    path.write_text(yaml.safe_dump(config))
    return path


def ccrs(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pipelines.cli", *args]
    return subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.llm
@pytest.mark.slow
def test_ragas_jsonl_of_two_systems_is_judged_logged_and_then_served_from_the_cache_through_the_api(
        llm_endpoint, mlflow_server, tmp_path, monkeypatch, capsys):
    """`ccrs evaluate` on the shipped RAGAS-named example (the command's own path, in this process on the
    session's Ray: the CLI in a process of its own is tested from a wheel install below), then the same
    outputs through `ccrs_eval.evaluate` from outside the repository (in this process too, its working
    directory there; a `python -c` of its own took 27 s of CI time, and a process of its own is the wheel
    install's `ccrs evaluate` below): every judgment comes from the judgment cache on disk."""
    config = integer_config(tmp_path / "config.yaml")
    # a judgment cache of its own: the first call's requests do not depend on the tests before it
    env = {"MLFLOW_TRACKING_URI": mlflow_server, "CCRS_JUDGE_CACHE": str(tmp_path / "cache")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("infra.ray_runtime.shutdown_ray", lambda: None)  # the session's Ray serves the model
    code = main(["evaluate", str(EXAMPLE), "--out", str(tmp_path / "one"), "--config", str(config),
                 "--limit", "2", "--llm-base-url", llm_endpoint.base_url, "--experiment", "evaluate-e2e"])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-3000:]
    verdict = printed.out
    assert "Verdict: evaluate-ragas-two-systems" in verdict
    assert "top1-sentence" in verdict and "top3-sentences" in verdict
    for metric in CCRS:
        assert any(line.strip().startswith(metric + " ") for line in verdict.splitlines()), metric
    assert "20 judgments: 20 new judge requests" in verdict
    scores = pd.read_parquet(tmp_path / "one" / "judge_ccrs" / "scores.parquet")
    assert {"query_id", "system", "metric", "score"} <= set(scores.columns)
    assert set(scores["system"]) == {"top1-sentence", "top3-sentences"} and set(scores["metric"]) <= set(CCRS)

    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("evaluate-e2e")
    (parent,) = [r for r in client.search_runs([experiment.experiment_id]) if r.data.tags.get("ccrs.kind")]
    assert "samples" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    table = json.loads(Path(client.download_artifacts(parent.info.run_id, "samples/per_sample.json"))
                       .read_text())
    assert len(table["data"]) == 4 and {"question", "system", "answer", *CCRS} <= set(table["columns"])

    from ccrs_eval import evaluate

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    r = evaluate(str(EXAMPLE), config=str(config), limit=2, llm_base_url=llm_endpoint.base_url, out="two",
                 experiment="evaluate-e2e")
    assert "20 judgments: 0 new judge requests, 20 from the judgment cache" in capsys.readouterr().out
    assert sorted(r.scores["system"].unique()) == r.stats["systems"] == ["top1-sentence", "top3-sentences"]
    assert list(r.scores.columns)[:4] == ["question_id", "system", "metric", "score"]
    assert len(r.judgments) == 20 and r.new_judge_requests == 0
    assert r.verdict.splitlines()[0] == "# Verdict: evaluate-ragas-two-systems"
    assert r.run_dir == outside / "two" and r.mlflow_run_id != parent.info.run_id
    again = pd.read_parquet(outside / "two" / "judge_ccrs" / "scores.parquet")
    pd.testing.assert_frame_equal(again, scores)


def test_bad_inputs_exit_2_with_one_line_before_any_work(tmp_path, capsys):
    rows = example_rows()
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({"user_input": r["user_input"], "response": r["response"],
                                        "system": r["system"]}) + "\n" for r in rows))
    hypotheses = tmp_path / "h.yaml"
    cases = {
        "no answer": ([str(tmp_path / "q.jsonl")], "no answer column"),
        "needs contexts": ([str(bare)], "metric(s) CC, ID, AC, IR need contexts and reference"),
        "unknown type": ([str(REPO / "README.md")], "unknown file type '.md'"),
        "hypotheses on one system": ([str(tmp_path / "one.jsonl"), "--hypotheses", str(hypotheses)],
                                     "hypotheses compare systems, and the scores hold one (top1-sentence): "
                                     "H1 cannot be tested"),
        "answered twice": ([str(tmp_path / "twice.jsonl")], "answers question"),
        "contexts not a list": ([str(tmp_path / "flat.jsonl")],
                                "retrieved_contexts must be a list of strings"),
    }
    (tmp_path / "twice.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows + rows[:1]))
    (tmp_path / "flat.jsonl").write_text("".join(json.dumps({**r, "retrieved_contexts": "one passage"}) + "\n"
                                                 for r in rows))
    (tmp_path / "q.jsonl").write_text(json.dumps({"user_input": "What is X?"}) + "\n")
    (tmp_path / "one.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["system"] ==
                                                "top1-sentence"))
    hypotheses.write_text("hypotheses:\n  - {name: H1, pairs: [[top1-sentence, top3-sentences]], "
                          "metrics: [CC]}\n")
    for name, (args, expected) in cases.items():
        assert main(["evaluate", *args, "--out", str(tmp_path / "run")]) == 2, name
        error = capsys.readouterr().err.strip()
        assert expected in error and "\n" not in error, (name, error)
    assert main(["evaluate", str(bare), "--metrics", "QR", "--hypotheses", str(REPO / "configs" / "hypotheses"
                                                                               / "cpu-demo.yaml")]) == 2
    assert "unknown system(s)" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing was started


def test_one_system_is_a_valid_run_and_a_config_copied_from_the_demo_names_no_hypotheses(tmp_path):
    """The checks before any work pass one system (a production system judged every night), with the
    default config and with a copy of it: the demo's hypotheses about A-F are not in it."""
    from pipelines.evaluate import prepare_evaluation

    one = tmp_path / "prod.jsonl"
    one.write_text("".join(json.dumps(r) + "\n" for r in example_rows() if r["system"] == "top1-sentence"))
    copy = tmp_path / "mine.yaml"
    copy.write_text((REPO / "configs" / "cpu-demo.yaml").read_text())
    for config in (None, copy):
        run_config, outputs = prepare_evaluation(one, config=config, out=tmp_path / "run")
        assert outputs.systems == ["top1-sentence"] and run_config.stats.hypotheses is None
    assert not (tmp_path / "run").exists()


@pytest.mark.llm
@pytest.mark.slow
def test_a_wheel_install_evaluates_from_any_directory(llm_endpoint, tmp_path, mlflow_db):
    wheels, site, source = tmp_path / "wheels", tmp_path / "site", tmp_path / "source"
    # pip builds in the source tree (build/, *.egg-info): a copy of what the wheel is made of, not the repo
    for part in PACKAGED:
        copy = shutil.copytree if (REPO / part).is_dir() else shutil.copy2
        (source / part).parent.mkdir(parents=True, exist_ok=True)
        copy(REPO / part, source / part, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                            if (REPO / part).is_dir() else {}))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(source)], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("ccrs_eval-*.whl")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                              str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-2000:]
    # the store: a copy of a new one (no migrations); the runs go next to it, in tmp_path/mlartifacts
    env = {"PYTHONPATH": str(site), "MLFLOW_TRACKING_URI": mlflow_db}
    where = ccrs("--help", cwd=tmp_path, env=env)
    assert "evaluate" in where.stdout
    config = integer_config(tmp_path / "config.yaml")
    # two GroUSE-format files (no system column): two systems named by their stems; the judge on its own
    # endpoint (--judge-base-url, --judge-model): no Serve app is deployed for it
    first, second = grouse_file(tmp_path / "type1.jsonl", 1), grouse_file(tmp_path / "type4.jsonl", 4)
    done = ccrs("evaluate", str(first), str(second), "--limit", "1", "--metrics", "QR", "--config",
                str(config), "--judge-base-url", llm_endpoint.base_url, "--judge-model",
                llm_endpoint.judge_model, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Verdict: evaluate-type1-and-1-more" in done.stdout and "serving:" not in done.stdout
    assert " type1 " in done.stdout and " type4 " in done.stdout
    assert f"({llm_endpoint.judge_model} at {llm_endpoint.base_url})" in done.stdout
    check = subprocess.run([sys.executable, "-c", "import ccrs_eval, pipelines.config as c; "
                            "print(ccrs_eval.__file__); print(c.DEFAULT_CONFIG)"],
                           cwd=tmp_path, env={**os.environ, **env}, capture_output=True, text=True)
    module, default_config = check.stdout.split()
    assert module.startswith(str(site)) and default_config.startswith(str(site))
    assert Path(default_config).is_file()  # the packaged demo config, not the checkout's
