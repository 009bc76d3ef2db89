from judges.cache import JudgmentCache
from judges.config import JudgeConfig
from judges.suite import Sample, get_suite


def _sample(**changes) -> Sample:
    base = {"query_id": "q1", "system": "A", "question": "Which gene?", "response": "BRCA1",
            "ground_truth": "BRCA1 is mutated.", "context": ["chunk about BRCA1"], "exact_answers": ["BRCA1"]}
    return Sample(**{**base, **changes})


def test_cache_round_trip_through_parquet(tmp_path):
    cache = JudgmentCache(tmp_path)
    cache.put("k1", "ccrs", [{"metric": "CC", "llm_score": 70, "status": "ok", "raw": "70", "attempts": 1}])
    cache.put("k2", "grouse", [
        {"metric": "completeness", "llm_score": None, "status": "failed", "raw": "good"},
        {"metric": "usefulness", "llm_score": None, "status": "skipped", "raw": None},
    ])
    assert cache.flush() == 2
    reloaded = JudgmentCache(tmp_path)
    assert len(reloaded) == 2
    assert reloaded.get("k1")[0]["llm_score"] == 70
    assert [r["status"] for r in reloaded.get("k2")] == ["failed", "skipped"]
    assert reloaded.get("missing") is None


def test_judgment_record_is_the_dataclass_as_a_dict():
    from dataclasses import asdict

    from judges.suite import Judgment

    from judges.ccrs import CCRS_METRICS
    from judges.suite import Usage

    j = Judgment.of(_sample(), CCRS_METRICS["AC"], status="ok", prompt_version="v1", judge_model="m",
                    usage=Usage(1, 812, 2), score=0.79, llm_score=70, em=1.0, raw="70", n_context_chunks=3,
                    cached=True, detail='{"k": 1}')
    assert j.record() == asdict(j)
    assert set(j.record()) <= set(Judgment.COLUMNS)


def test_a_unit_sends_exactly_the_request_it_was_planned_with():
    """Units keep no rendered prompt; unit_request renders it again over the chunks the truncation
    policy kept: the same messages as planned."""
    from judges.ccrs import build_request, unit_request

    chunks = [f"chunk {i} about BRCA1 " + "x" * 300 for i in range(6)]
    judge = JudgeConfig(context_window=700)  # room for a few chunks only: the context is truncated
    units = get_suite("ccrs").plan(_sample(context=chunks), judge, 0, lambda text: len(text) // 4)
    assert any(0 < u.n_context_chunks < len(chunks) for u in units)
    for unit in units:
        sent = unit_request(unit, judge)
        kept = chunks[: unit.n_context_chunks] if unit.metrics[0] != "QR" else []
        assert sent == build_request(get_suite("ccrs").metrics[unit.metrics[0]], unit.sample, kept, judge)
        assert unit.plan is None
