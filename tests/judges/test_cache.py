from judges.cache import JudgmentCache, judgment_key
from judges.client import ChatRequest


def _request(**changes):
    base = {"model": "m", "messages": [{"role": "user", "content": "p"}], "temperature": 0.0, "max_tokens": 8}
    base.update(changes)
    return ChatRequest(**base)


def test_key_is_stable_and_sensitive_to_every_part():
    key = judgment_key(_request(), "v1", 0, 2)
    assert key == judgment_key(_request(), "v1", 0, 2)
    variants = [
        judgment_key(_request(model="other"), "v1", 0, 2),
        judgment_key(_request(messages=[{"role": "user", "content": "q"}]), "v1", 0, 2),
        judgment_key(_request(temperature=0.5), "v1", 0, 2),
        judgment_key(_request(max_tokens=9), "v1", 0, 2),
        judgment_key(_request(extra_body={"response_format": {"type": "json_object"}}), "v1", 0, 2),
        judgment_key(_request(), "v2", 0, 2),
        judgment_key(_request(), "v1", 1, 2),
        judgment_key(_request(), "v1", 0, 1),
    ]
    assert len(set(variants + [key])) == len(variants) + 1


def test_cache_round_trip_through_parquet(tmp_path):
    cache = JudgmentCache(tmp_path)
    cache.put("k1", {"llm_score": 70, "status": "ok", "reason": None, "raw": "70", "attempts": 1,
                     "prompt_tokens": 10, "completion_tokens": 2})
    cache.put("k2", {"llm_score": None, "status": "failed", "reason": "prose", "raw": "good", "attempts": 3,
                     "prompt_tokens": 30, "completion_tokens": 6})
    assert cache.flush() == 2
    reloaded = JudgmentCache(tmp_path)
    assert len(reloaded) == 2
    assert int(reloaded.get("k1")["llm_score"]) == 70
    assert reloaded.get("k2")["raw"] == "good"
    assert reloaded.get("missing") is None
