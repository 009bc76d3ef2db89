from judges.cache import JudgmentCache
from judges.config import CcrsOptions, JudgeConfig
from judges.suite import Sample, get_suite


def _sample(**changes) -> Sample:
    base = {"query_id": "q1", "system": "A", "question": "Which gene?", "response": "BRCA1",
            "ground_truth": "BRCA1 is mutated.", "context": ["chunk about BRCA1"], "exact_answers": ["BRCA1"]}
    return Sample(**{**base, **changes})


def _key(sample=None, seed=0, ccrs=None, **judge) -> str:
    judge_cfg = JudgeConfig(ccrs=CcrsOptions(metrics=["AC"], **(ccrs or {})), **judge)
    units = get_suite("ccrs").plan(sample or _sample(), judge_cfg, seed, len)
    return units[0].key


def test_unit_key_is_stable_and_sensitive_to_every_part():
    key = _key()
    assert key == _key()
    variants = [
        _key(model="other"),
        _key(_sample(ground_truth="BRCA2 is mutated.")),
        _key(_sample(context=["another chunk"])),
        _key(_sample(exact_answers=["BRCA2"])),  # AC's exact match reads the synonyms
        _key(ccrs={"max_tokens": 9}),
        _key(structured_output=True),
        _key(ccrs={"prompt_version": "v1", "shared_prefix": True}),
        _key(seed=1),
        _key(max_reasks=1),
        _key(ccrs={"ac_lambda": 0.5}),
        _key(ccrs={"lenient_parse": True}),  # it changes which replies parse: a strict judgment is not one
    ]
    assert len(set(variants + [key])) == len(variants) + 1


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


def test_a_unit_sends_exactly_the_request_its_key_was_computed_from():
    """Units keep no rendered prompt; unit_request renders it again over the chunks the truncation
    policy kept: the same messages, so the same cache key."""
    from judges.ccrs import build_request, unit_request
    from judges.config import JudgeConfig

    chunks = [f"chunk {i} about BRCA1 " + "x" * 300 for i in range(6)]
    judge = JudgeConfig(context_window=700)  # room for a few chunks only: the context is truncated
    units = get_suite("ccrs").plan(_sample(context=chunks), judge, 0, lambda text: len(text) // 4)
    assert any(0 < u.n_context_chunks < len(chunks) for u in units)
    for unit in units:
        sent = unit_request(unit, judge)
        kept = chunks[: unit.n_context_chunks] if unit.metrics[0] != "QR" else []
        assert sent == build_request(get_suite("ccrs").metrics[unit.metrics[0]], unit.sample, kept, judge)
        assert unit.plan is None
