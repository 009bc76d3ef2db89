"""The judge stage's loop policy (tasks/runtime/judge_loop.py): the default judges every question in bounded
batches, never stops, records nothing and adds nothing to the stage's key; a policy's key settings merge
into the key's config key by key; the sequential policy keys its options and baseline as the stage always
did."""
import pandas as pd

from tasks.runtime.judge_loop import BOUNDED_BATCHES, Baseline, merged_settings
from tasks.runtime.sequential_judging import SequentialJudging, SequentialOptions


def test_the_default_policy_judges_every_question_in_batches_and_never_stops(tmp_path):
    generations = tmp_path / "generations.parquet"
    frame = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q3"], "system": ["A", "B", "A", "A"]})
    frame.to_parquet(generations)
    looks = BOUNDED_BATCHES.looks(generations, 2)
    assert sorted(question for look in looks for question in look) == ["q1", "q2", "q3"]
    assert not BOUNDED_BATCHES.stop_after([], ["q1", "q2", "q3"])
    assert BOUNDED_BATCHES.record(tmp_path, 3) == {} and BOUNDED_BATCHES.key_settings() == {}


def test_key_settings_merge_into_the_keys_config_key_by_key():
    base = {"judge": {"model": "m", "scoring": "integer"}, "seed": 0}
    merged = merged_settings(base, {"judge": {"sequential": {"margin": 0.1}}, "sequential_baseline": "r"})
    assert merged == {"judge": {"model": "m", "scoring": "integer", "sequential": {"margin": 0.1}}, "seed": 0,
                      "sequential_baseline": "r"}
    assert base == {"judge": {"model": "m", "scoring": "integer"}, "seed": 0}  # not changed in place


def test_the_sequential_policy_keys_the_judge_block_and_the_baseline_as_before():
    from pipelines.config import load_config

    options = SequentialOptions(margin=0.1)
    config = load_config(None, {"judge.sequential": {"margin": 0.1}})
    alone = SequentialJudging(options, ["CC"]).key_settings()
    assert alone == {"judge": {"sequential": config.model_dump(mode="json")["judge"]["sequential"]}}
    against = SequentialJudging(options, ["CC"], baseline=Baseline("run-1", pd.DataFrame())).key_settings()
    assert against == {**alone, "sequential_baseline": "run-1"}
