import json
import numpy as np
import pandas as pd
import pytest

from pipelines.tools.regression import RegressionError, paired_table


def _scores(rng, shift_cell=None, shift=0.0):
    rows = []
    base = rng.uniform(0.2, 0.8, size=(60, 2, 2))
    for q in range(60):
        for s, system in enumerate("AB"):
            for m, metric in enumerate(["CC", "IR"]):
                score = base[q, s, m]
                if (system, metric) == shift_cell:
                    score = np.clip(score + shift, 0, 1)
                rows.append({"query_id": f"q{q}", "system": system, "metric": metric, "score": score})
    return pd.DataFrame(rows)


def test_planted_drop_is_a_regression_and_the_rest_unchanged():
    baseline = _scores(np.random.default_rng(0))
    noise = np.random.default_rng(1).normal(0, 0.01, size=len(baseline))
    current = _scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.15)
    current["score"] = np.clip(current["score"] + noise, 0, 1)
    table = paired_table(current, baseline, alpha=0.05, b=2000, seed=0).set_index(["system", "metric"])
    assert table.loc[("B", "IR"), "verdict"] == "regression"
    assert (table.drop(index=[("B", "IR")])["verdict"] == "same").all()
    assert table["n"].eq(60).all()


def test_runs_without_common_judgments_are_an_error():
    rng = np.random.default_rng(0)
    current = _scores(rng)
    baseline = current.assign(query_id=current["query_id"] + "-other")
    with pytest.raises(RegressionError, match="share no"):
        paired_table(current, baseline, alpha=0.05, b=100, seed=0)


def test_every_cell_reports_its_minimum_detectable_difference():
    baseline = _scores(np.random.default_rng(0))
    current = baseline.assign(score=np.clip(baseline["score"] + np.random.default_rng(2).normal(0, 0.05,
                                                                                               len(baseline)),
                                            0, 1))
    table = paired_table(current, baseline, alpha=0.05, b=500, seed=0)
    assert list(table.columns)[-1] == "mdd"
    # the noise sd is 0.05 per question: the MDD of 60 questions at alpha 0.05/4 and power 0.8 is about
    # (z_0.99375 + z_0.8) * 0.05 / sqrt(60) = 0.021
    assert table["mdd"].between(0.015, 0.03).all()
    small = paired_table(current[current["query_id"].isin(["q0", "q1", "q2", "q3"])],
                         baseline, alpha=0.05, b=500, seed=0)
    assert (small["mdd"] > 2 * table["mdd"].max()).all()  # a pass on a tiny subset says little


# --- the gate on runs logged to a real (local SQLite) MLflow store --------------------------------------

SETTINGS = {"ccrs.judge_model": "smollm2-135m-instruct", "ccrs.scoring": "expected",
            "ccrs.prompt_versions": '{"ccrs": "v1"}', "ccrs.metrics": "CC,IR", "ccrs.config_name": "nightly"}


class Store:
    """Pipeline runs logged the way tasks/tracking.py logs them: the parent run's tags and the judgments
    artifact the gate reads (samples/judgments.parquet)."""

    def __init__(self, root):
        from mlflow.tracking import MlflowClient

        self.uri = f"sqlite:///{root / 'mlflow.db'}"
        self.client = MlflowClient(self.uri)
        self.experiment_id = self.client.create_experiment("gate", artifact_location=(root / "art").as_uri())
        self.root = root

    def log(self, scores: pd.DataFrame, failed: int = 0, **tags) -> str:
        judgments = scores.assign(status="ok")
        if failed:
            judgments.loc[judgments.index[:failed], ["status", "score"]] = ["failed", None]
        run = self.client.create_run(self.experiment_id, tags={"ccrs.kind": "pipeline", **SETTINGS, **tags})
        path = self.root / f"{run.info.run_id}.parquet"
        judgments.to_parquet(path)
        folder = self.root / run.info.run_id
        folder.mkdir()
        (folder / "judgments.parquet").write_bytes(path.read_bytes())
        self.client.log_artifact(run.info.run_id, str(folder / "judgments.parquet"), "samples")
        self.client.set_terminated(run.info.run_id, "FINISHED")
        return run.info.run_id

    def tags(self, run_id: str) -> dict:
        return self.client.get_run(run_id).data.tags


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path)


def _gate(store, **options):
    from pipelines.tools.regression import GateOptions, gate

    return gate(store.uri, "gate", options.pop("run", "latest"), options.pop("baseline", "previous"),
                GateOptions(b=500, **options))


def test_night_one_is_the_baseline_a_drop_regresses_and_the_next_night_compares_with_night_one(store):
    good = _scores(np.random.default_rng(0))
    first = store.log(good)
    report = _gate(store)
    assert (report.status, report.exit_code, report.baseline_id) == ("baseline", 0, None)
    assert "this run is the baseline" in report.markdown
    assert store.tags(first)["regression.status"] == "baseline"

    bad = _scores(np.random.default_rng(0), shift_cell=("B", "IR"), shift=-0.3)
    second = store.log(bad)
    report = _gate(store)
    assert (report.status, report.exit_code, report.baseline_id) == ("regression", 3, first)
    assert report.regressed_cells()[0].startswith("B/IR (-0.")
    assert store.tags(second)["regression.baseline"] == first

    third = store.log(bad)  # the regressed night is no baseline: night three is checked against night one
    report = _gate(store)
    assert (report.run_id, report.baseline_id, report.status) == (third, first, "regression")


def test_ad_hoc_runs_and_other_configs_are_never_the_previous_baseline(store):
    scores = _scores(np.random.default_rng(0))
    nightly = store.log(scores)
    store.log(scores, **{"ccrs.adhoc": "true"})
    store.log(scores, **{"ccrs.config_name": "someone-elses"})
    store.log(scores)
    assert _gate(store).baseline_id == nightly


def test_another_judge_is_incomparable_unless_allowed_and_failures_above_the_limit_exit_4(store):
    scores = _scores(np.random.default_rng(0))
    store.log(scores)
    store.log(scores, **{"ccrs.judge_model": "llama-3-70b-instruct", "ccrs.scoring": "integer"})
    report = _gate(store)
    assert (report.status, report.exit_code) == ("incomparable", 5)
    assert report.differing == {"judge model": ("smollm2-135m-instruct", "llama-3-70b-instruct"),
                                "scoring mode": ("expected", "integer")}
    assert "judge model: baseline 'smollm2-135m-instruct', run 'llama-3-70b-instruct'" in report.markdown
    allowed = _gate(store, allow_judge_change=True)  # passes: the new judge's run becomes the baseline
    assert allowed.status == "pass" and "--allow-judge-change" in allowed.markdown

    store.log(scores, failed=len(scores) // 10, **{"ccrs.judge_model": "llama-3-70b-instruct",
                                                   "ccrs.scoring": "integer"})  # 10% failed judgments
    report = _gate(store, max_failure_rate=0.05)
    assert (report.status, report.exit_code) == ("failure_rate", 4)
    assert report.failure_rate == pytest.approx(0.1)
    assert _gate(store, max_failure_rate=0.2).status == "pass"


def test_a_named_or_accepted_baseline_moves_it_on_purpose(store):
    from pipelines.tools.regression import mark_baseline

    good = _scores(np.random.default_rng(0))
    first = store.log(good)
    _gate(store)
    changed = store.log(good, **{"ccrs.judge_model": "llama-3-70b-instruct"})
    assert _gate(store).status == "incomparable"
    assert mark_baseline(store.uri, "gate", "latest", accept=True, name="judge-v2") == changed
    later = store.log(good, **{"ccrs.judge_model": "llama-3-70b-instruct"})
    assert _gate(store).baseline_id == changed  # the accepted run, not night one
    assert _gate(store, baseline="tag:judge-v2").baseline_id == changed
    assert _gate(store, run=later, baseline=first, allow_judge_change=True).baseline_id == first
    with pytest.raises(RegressionError, match="tagged ccrs.baseline='nope'"):
        _gate(store, baseline="tag:nope")


def test_the_alert_is_slack_compatible_and_machine_readable(store):
    from pipelines.tools.regression import alert_payload

    store.log(_scores(np.random.default_rng(0)))
    _gate(store)
    store.log(_scores(np.random.default_rng(0), shift_cell=("A", "CC"), shift=-0.3))
    payload = alert_payload(_gate(store))
    assert payload["text"].startswith("ccrs nightly [gate] REGRESSION (exit 3): regression in 1 cell(s): "
                                      "A/CC")
    assert payload["status"] == "regression" and payload["exit_code"] == 3
    assert {"system", "metric", "diff", "adjusted_p", "verdict"} <= set(payload["cells"][0])
    json.dumps(payload)


def test_a_run_with_repeats_pairs_each_samples_mean_with_a_run_without():
    from pipelines.tools.regression import scored

    baseline = _scores(np.random.default_rng(0)).assign(status="ok")
    repeats = [baseline.assign(repeat=r, score=(baseline["score"] + (r - 1) * 0.01).clip(0, 1))
               for r in range(3)]
    current = pd.concat(repeats, ignore_index=True)
    current.loc[current.index[:5], ["status", "score"]] = ["failed", None]  # a failed repeat is left out
    means = scored(current)
    assert list(means.columns) == ["query_id", "system", "metric", "score"] and len(means) == len(baseline)
    table = paired_table(means, scored(baseline), alpha=0.05, b=500, seed=0)
    assert table["n"].eq(60).all() and (table["verdict"] == "same").all()


def test_a_run_judged_with_repeats_is_incomparable_with_a_baseline_judged_once(store):
    """Sampled repeats average marks drawn at a temperature: not the greedy marks of a run judged once."""
    scores = _scores(np.random.default_rng(0))
    store.log(scores, **{"ccrs.judge_repeats": "1"})
    repeated = pd.concat([scores.assign(repeat=r) for r in range(3)], ignore_index=True)
    store.log(repeated, **{"ccrs.judge_repeats": "3 x sample (temperature 0.7)"})
    report = _gate(store)
    assert (report.status, report.differing) == (
        "incomparable", {"judge repeats": ("1", "3 x sample (temperature 0.7)")})
    assert _gate(store, allow_judge_change=True).status == "pass"  # each sample's mean pairs with its score
