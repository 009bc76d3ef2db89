"""The reducer over a CCRS and a RAGChecker-style scores file (no LLM): the paper's Table 3 comparison."""
import json

import numpy as np
import pandas as pd

from judges.suite import metric_order, suite_membership
from tasks.runtime.layout import RunLayout
from tasks.reduce import run_reduce
from pipelines.reporting.report import write_reduce_reports
from tasks.runtime.stage import code_modules
from tests.conftest import BIOASQ_SAMPLE

CCRS = ("CC", "QR", "ID", "AC", "IR")
RAGCHECKER = ("rc_precision", "rc_recall", "rc_faithfulness")


def _scores(metrics, query_ids, seed) -> pd.DataFrame:
    """Scores on a 0.05 grid for systems A-F, the Mistral systems (A, B) planted 0.2 higher."""
    rng = np.random.default_rng(seed)
    rows = []
    for query_id in query_ids:
        difficulty = rng.random()
        for system in "ABCDEF":
            for metric in metrics:
                score = 0.5 * difficulty + 0.3 * rng.random() + (0.2 if system in "AB" else 0.0)
                rows.append((query_id, system, metric, round(min(score, 1.0) * 20) / 20))
    return pd.DataFrame(rows, columns=["query_id", "system", "metric", "score"])


def test_reduce_writes_the_comparison_of_ccrs_and_ragchecker(tmp_path):
    query_ids = [q["id"] for q in json.loads(BIOASQ_SAMPLE.read_text())["questions"]]
    layout = RunLayout(tmp_path / "run")
    for suite, metrics, seed in (("ccrs", CCRS, 0), ("ragchecker", RAGCHECKER, 1)):
        layout.judge_dir(suite).mkdir(parents=True)
        _scores(metrics, query_ids, seed).to_parquet(layout.scores(suite))

    result = run_reduce(layout.root, [layout.scores("ccrs"), layout.scores("ragchecker")], b=200, seed=0,
                        alpha=0.05, metric_order=metric_order(), suites=suite_membership())
    write_reduce_reports(json.loads(layout.stats_json.read_text()),
                         [layout.scores("ccrs"), layout.scores("ragchecker")], result.out_dir)

    stats = json.loads(layout.stats_json.read_text())
    rows = stats["discriminative_power_comparison"]
    assert [row["suite"] for row in rows] == ["ccrs"] * 5 + ["ragchecker"] * 3
    assert sorted(row["metric"] for row in rows[:5]) == sorted(CCRS)
    assert sorted(row["metric"] for row in rows[5:]) == sorted(RAGCHECKER)
    for row in rows:
        assert row["discriminative_power"] == stats["per_metric"][row["metric"]]["discriminative_power"]
        assert (row["pairs"], row["n_used"]) == (15, len(query_ids))
    table = pd.read_csv(result.out_dir / "tables" / "discriminative_power_comparison.csv")
    assert list(table["metric"]) == [row["metric"] for row in rows]
    markdown = (result.out_dir / "tables" / "discriminative_power_comparison.md").read_text()
    assert markdown.startswith("| suite | metric | rank |") and "rc_faithfulness" in markdown
    assert stats["per_metric"]["CC"]["population"]["A"]["iqr"] is not None


def test_suite_membership_is_the_registry():
    membership = suite_membership()
    assert list(membership["ccrs"]) == list(CCRS) and set(membership["ragchecker"]) == set(RAGCHECKER)


def test_reduce_of_a_suite_judged_three_times_beside_one_judged_once(tmp_path):
    query_ids = [q["id"] for q in json.loads(BIOASQ_SAMPLE.read_text())["questions"]]
    layout = RunLayout(tmp_path / "run")
    once = _scores(CCRS[:1], query_ids, 0)
    rng = np.random.default_rng(3)
    repeated = pd.concat([once.assign(score=np.clip(once["score"] + rng.normal(0, 0.05, len(once)), 0, 1),
                                      repeat=repeat) for repeat in range(3)], ignore_index=True)
    for suite, scores in (("ccrs", repeated), ("ragchecker", _scores(RAGCHECKER[:1], query_ids, 1))):
        layout.judge_dir(suite).mkdir(parents=True)
        scores.to_parquet(layout.scores(suite))

    run_reduce(layout.root, [layout.scores("ccrs"), layout.scores("ragchecker")], b=100, seed=0, alpha=0.05,
               metric_order=metric_order(), suites=suite_membership())

    stats = json.loads(layout.stats_json.read_text())
    assert stats["per_metric"]["CC"]["judge_noise"]["n_repeats"] == 3
    assert "judge_noise" not in stats["per_metric"]["rc_precision"]
    assert stats["per_metric"]["rc_precision"]["n_used"] == len(query_ids)


def test_the_reduce_key_covers_the_statistics_and_their_inputs_only():
    """Editing a judge suite, the verdict, a table or a plot leaves every run's statistics reused."""
    covered = set(code_modules("tasks.reduce"))
    assert not {module for module in covered if module.split(".")[0] in ("judges", "pipelines")}
    assert "pipelines.reporting.plots" not in covered
    assert {"tasks.reduce", "stats.analysis", "tasks.reduce"} <= covered


def test_a_reused_reduce_stage_gets_its_tables_and_plots_again(tmp_path):
    query_ids = [q["id"] for q in json.loads(BIOASQ_SAMPLE.read_text())["questions"]]
    layout = RunLayout(tmp_path / "run")
    layout.judge_dir("ccrs").mkdir(parents=True)
    _scores(CCRS, query_ids, 0).to_parquet(layout.scores("ccrs"))
    registry = {"metric_order": metric_order(), "suites": suite_membership()}
    first = run_reduce(layout.root, [layout.scores("ccrs")], b=50, seed=0, alpha=0.05, **registry)
    stats = json.loads(layout.stats_json.read_text())
    written = write_reduce_reports(stats, [layout.scores("ccrs")], first.out_dir)
    tables = {path.name: path.read_bytes() for path in written if path.suffix != ".png"}

    again = run_reduce(layout.root, [layout.scores("ccrs")], b=50, seed=0, alpha=0.05, **registry)
    rewritten = write_reduce_reports(stats, [layout.scores("ccrs")], again.out_dir)

    assert again.reused and [path.name for path in rewritten] == [path.name for path in written]
    assert {path.name: path.read_bytes() for path in rewritten if path.suffix != ".png"} == tables


def test_the_reduce_stage_reruns_with_the_runs_labels_and_notes_labels_it_cannot_use(tmp_path):
    """`ccrs run --from-stage reduce` after `ccrs label`: labels/ enters the stage's key, so the stage reruns
    and stats.json gains human_calibrated; labels of a system the scores lack leave the judge-only statistics
    whole with a note."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(BIOASQ_SAMPLE.parents[1] / "bioasq-sample-pilot", run)
    layout = RunLayout(run)
    scores_path = layout.scores("ccrs")

    from pipelines.extensions import statistics_contributors

    def reduce() -> tuple[dict, bool]:  # as the pipeline calls it: with the extensions' contributors
        result = run_reduce(run, [scores_path], b=50, seed=0, alpha=0.05, metric_order=metric_order(),
                            suites=suite_membership(), contributors=statistics_contributors())
        return json.loads(layout.stats_json.read_text()), result.reused

    stats, _ = reduce()
    assert "human_calibrated" not in stats["per_metric"]["CC"]
    scores = pd.read_parquet(scores_path)
    cc = scores[scores["metric"] == "CC"]
    labels = pd.DataFrame({"question_id": cc["query_id"], "system": cc["system"], "metric": "CC",
                           "label": cc["score"], "annotator": "ann"})
    layout.labels_dir.mkdir()
    labels.to_json(layout.labels_file, orient="records", lines=True)
    stats, reused = reduce()
    assert not reused and stats["per_metric"]["CC"]["human_calibrated"]["n_labels"]["A"] == 8
    assert reduce()[1]  # unchanged labels: the stage is reused

    pd.concat([labels, labels.head(1).assign(system="Z")]).to_json(layout.labels_file, orient="records",
                                                                   lines=True)
    stats, reused = reduce()
    assert not reused and "human_calibrated" not in stats["per_metric"]["CC"]
    assert any(note.startswith("human labels not used: labels name 1 systems the scores lack: 'Z'")
               for note in stats["notes"])
