"""The judge stage's sequential mode without a judge: the looks of a seeded order, the stopping rule reading
judged parts (between systems, and a night against its baseline), and stats.json's merged record."""
import json

import numpy as np
import pandas as pd

from stats.sequential import seeded_order
from tasks.runtime.sequential_judging import merged_sequential
from tasks.runtime.sequential_judging import SequentialOptions, StoppingRule, sequential_looks
from tests.conftest import bioasq_questions

QUESTIONS = [question["id"] for question in bioasq_questions(20)]


def _generations(path, systems=("A", "B")):
    rows = [{"query_id": q, "system": s, "answer": "x"} for q in QUESTIONS for s in systems]
    pd.DataFrame(rows).to_parquet(path)
    return path


def _part(path, query_ids, scores: dict[str, float], metric="CC"):
    """A judged part: every question of `query_ids` scored `scores[system]`, one failed judgment of B."""
    rows = [{"query_id": q, "system": s, "metric": metric, "score": value, "status": "ok"}
            for q in query_ids for s, value in scores.items()]
    rows.append({"query_id": query_ids[0], "system": "B", "metric": "QR", "score": None, "status": "failed"})
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_looks_follow_the_seeded_order_and_stop_at_max_questions(tmp_path):
    generations = _generations(tmp_path / "generations.parquet")
    looks = sequential_looks(generations, SequentialOptions(look_every=6, seed=3, max_questions=14))
    assert [len(look) for look in looks] == [6, 6, 2]
    assert sum(looks, []) == seeded_order(QUESTIONS, 3)[:14]


def _rule(target: str = "population", **kwargs) -> StoppingRule:
    options = SequentialOptions(look_every=5, margin=0.05, seed=0, target=target)
    return StoppingRule(options, ("A", "B"), ("CC",), family_size=1, n_questions=len(QUESTIONS), **kwargs)


def test_a_large_difference_stops_the_stage_before_the_last_question(tmp_path):
    rule, order, parts = _rule(), seeded_order(QUESTIONS, 0), []
    for look in range(4):
        batch = order[5 * look:5 * look + 5]
        parts.append(_part(tmp_path / f"part-{look}.parquet", batch, {"A": 1.0, "B": 0.0}))
        if rule.after_look(parts, order[:5 * look + 5]):
            break
    (decision,) = rule.decisions
    assert (decision.metric, decision.a, decision.b, decision.decision) == ("CC", "A", "B", "different")
    assert decision.interval[0] > 0 and rule.looks[-1].n_questions < len(QUESTIONS)
    record = rule.record(rule.looks[-1].n_questions, 0)
    assert record["stopped_at"] == rule.looks[-1].n_questions and record["n_questions"] == 20
    assert record["decisions"][0]["decision"] == "different" and "baseline_run" not in record
    assert record["finite_population"] is False  # target population: about questions beyond these


def test_a_night_is_settled_against_its_baseline_cell_by_cell(tmp_path):
    baseline = pd.DataFrame([{"query_id": q, "system": s, "metric": "CC", "score": 1.0}
                             for q in QUESTIONS for s in ("A", "B")])
    rule, order = _rule("questions", baseline_run="run-1", baseline=baseline), seeded_order(QUESTIONS, 0)
    part = _part(tmp_path / "part.parquet", order, {"A": 0.0, "B": 1.0})
    assert rule.after_look([part], order)  # every one of the N questions: A regressed by 1, B unchanged
    decided = {decision.a: decision for decision in rule.decisions}
    assert decided["A"].b == "A@baseline" and decided["A"].decision == "different"
    assert decided["A"].interval[1] < 0
    assert decided["B"].decision == "equivalent" and np.allclose(decided["B"].interval, 0.0)
    assert rule.record(20, 0)["baseline_run"] == "run-1"


def test_stats_json_merges_the_stages_records(tmp_path):
    paths = []
    for suite, stopped in (("judge_ccrs", 10), ("judge_vera", 15)):
        (tmp_path / suite).mkdir()
        record = {"stopped_at": stopped, "n_questions": 20, "settled": True, "looks": [], "alpha": 0.05,
                  "decisions": [{"metric": suite, "a": "A", "b": "B", "decision": "different",
                                 "interval": [0.1, 0.3]}], "judge_calls_not_sent": 20 - stopped,
                  "judge_calls_total": 20}
        paths.append(tmp_path / suite / "sequential.json")
        paths[-1].write_text(json.dumps(record))
    merged = merged_sequential(paths)
    assert merged["stopped_at"] == 15 and len(merged["decisions"]) == 2
    assert merged["judge_calls_not_sent"] == 15 and merged["judge_calls_saved_share"] == 15 / 40
    assert set(merged["stages"]) == {"judge_ccrs", "judge_vera"}
    assert merged_sequential([tmp_path / "none" / "sequential.json"]) is None
