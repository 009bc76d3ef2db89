"""judges/repeats.py and judge.repeats: every judgment asked k times (sampled or with the chunks reordered),
keyed per repeat, resumable, and nothing changed for k = 1."""
from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from judges.cache import JudgmentCache
from judges.caching import CachingJudge
from judges.client import ChatRequest, LLMClient, LLMRequestError
from judges.config import CcrsOptions, ClientConfig, JudgeConfig, RepeatOptions
from judges.repeats import chunk_order, plan_units, repeat_seed, shown
from judges.suite import Sample, get_suite, suites
from tasks.runtime.stage import StageCheckpoint
from tests.conftest import bioasq_questions, sample_field
from tests.fakes import FakeLLMClient


def _samples(n: int, chunks: int = 3) -> list[Sample]:
    """Real BioASQ questions, the ideal answer as response and ground truth, gold snippets as context."""
    out = []
    for question in bioasq_questions(n):
        ideal = sample_field(question["ideal_answer"])
        answer = ideal[0] if isinstance(ideal, list) else str(ideal)
        snippets = [s["text"] for s in sample_field(question["snippets"])][:chunks]
        out.append(Sample(question["id"], "bm25+reader", question["body"], answer, answer, snippets))
    return out


SAMPLE = _samples(1)[0]
ALL_CONTEXT = ["CC", "QR"]  # CC reads the context, QR does not


def _judge(**repeats) -> JudgeConfig:
    return JudgeConfig(model="m", cache=False, ccrs=CcrsOptions(metrics=ALL_CONTEXT), repeats=repeats or 1)


def _keys(units, judge) -> list[str]:
    caching = CachingJudge(get_suite("ccrs"), judge, 0)
    return [caching.key(unit) for unit in units]


# --- the config ----------------------------------------------------------------------------------------

def test_the_repeats_block_its_shorthand_and_its_errors():
    assert JudgeConfig().repeats == RepeatOptions(k=1, mode="sample", temperature=None)
    three = JudgeConfig(repeats=3).repeats
    assert three.k == 3 and three.mode == "sample" and three.sampling_temperature == 0.7
    perturb = JudgeConfig.model_validate({"repeats": {"k": 2, "mode": "perturb"}})
    assert JudgeConfig.model_validate(perturb.model_dump()) == perturb  # a dumped config loads again
    for bad, says in [({"k": 0}, "greater than or equal to 1"), ({"mode": "x"}, "'sample' or 'perturb'"),
                      ({"temperature": 0}, "greater than 0"), ({"k": 2, "n": 1}, "Extra inputs"),
                      ({"k": 2, "mode": "perturb", "temperature": 0.5}, "mode sample only"),
                      (True, "dictionary")]:
        with pytest.raises(ValidationError, match=says):
            JudgeConfig.model_validate({"repeats": bad})


# --- planning -----------------------------------------------------------------------------------------

def test_k_1_plans_the_suites_own_units_with_their_keys():
    for name, suite in suites().items():
        judge = JudgeConfig()
        plain = suite.plan(SAMPLE, judge, 0, len)
        for repeats in (None, RepeatOptions(), RepeatOptions(k=1, mode="perturb")):
            units = plan_units(suite, SAMPLE, judge, 0, len, repeats)
            assert [u.id for u in units] == [u.id for u in plain], name
            assert all(u.repeat is None for u in units), name
            caching = CachingJudge(suite, judge, 0)
            assert [caching.key(u) for u in units] == [caching.key(u) for u in plain], name


def test_sampled_repeats_are_the_same_prompt_with_a_seed_and_key_each():
    judge = _judge(k=3, temperature=0.5)
    units = plan_units(get_suite("ccrs"), SAMPLE, judge, 7, len, judge.repeats)
    assert [(u.metrics, u.repeat.index) for u in units] == [(("CC",), 0), (("CC",), 1), (("CC",), 2),
                                                            (("QR",), 0), (("QR",), 1), (("QR",), 2)]
    assert {u.repeat.temperature for u in units} == {0.5}
    cc_shows = shown(get_suite("ccrs"), units[0])
    assert cc_shows == [["CC"], {"context": SAMPLE.context, "response": SAMPLE.response}]  # what CC reads
    assert [u.repeat.seed for u in units[:3]] == [repeat_seed(7, r, cc_shows) for r in range(3)]
    # a seed per repeat and per prompt: repeat r of one sample draws independently of repeat r of another
    assert len({u.repeat.seed for u in units}) == 6
    other = replace(SAMPLE, response="Another answer.")
    (first_of_other, *_) = plan_units(get_suite("ccrs"), other, judge, 7, len, judge.repeats)
    assert first_of_other.repeat.seed != units[0].repeat.seed
    assert len(set(_keys(units, judge))) == 6 and len({u.id for u in units}) == 6
    assert all(u.sample is SAMPLE for u in units)


def test_perturbed_repeats_show_the_kept_chunks_in_another_order():
    judge = _judge(k=4, mode="perturb")
    units = plan_units(get_suite("ccrs"), SAMPLE, judge, 0, len, judge.repeats)
    cc = [u for u in units if u.metrics == ("CC",)]
    assert cc[0].sample.context == SAMPLE.context  # repeat 0: the retriever's order, the ordinary unit
    for unit in cc[1:]:
        assert unit.sample.context != SAMPLE.context and sorted(unit.sample.context) == sorted(SAMPLE.context)
        assert unit.n_context_chunks == 3
    plain = get_suite("ccrs").plan(SAMPLE, judge, 0, len)
    assert _keys(cc[:1], judge) == _keys(plain[:1], judge)  # repeat 0 shares the one judgment's key
    qr = [u for u in units if u.metrics == ("QR",)]
    assert len(set(_keys(qr, judge))) == 1  # QR reads no context: every repeat is the same prompt
    assert chunk_order(3, 0, 1, "q") == chunk_order(3, 0, 1, "q") != [0, 1, 2]
    assert chunk_order(1, 0, 1, "q") == [0] and chunk_order(3, 0, 0, "q") == [0, 1, 2]


def test_a_perturbed_repeat_reorders_only_the_chunks_the_window_kept():
    """A window that drops the last chunk: every repeat shows the same two chunks, never the dropped one."""
    from judges.ccrs import CCRS_METRICS, render_prompt, sample_values
    from judges.suite import WINDOW_MARGIN

    suite = get_suite("ccrs")
    base = JudgeConfig(model="m", ccrs=CcrsOptions(metrics=["CC"]))

    def prompt_chars(chunks: int) -> int:  # characters count as tokens here (count=len)
        return len(render_prompt(CCRS_METRICS["CC"], sample_values(SAMPLE, SAMPLE.context[:chunks]), base))

    budget = (prompt_chars(2) + prompt_chars(3)) // 2
    window = budget + suite.reply_tokens(base) + WINDOW_MARGIN
    judge = base.model_copy(update={"context_window": window, "repeats": RepeatOptions(k=5, mode="perturb")})
    units = plan_units(suite, SAMPLE, judge, 0, len, judge.repeats)
    assert units[0].n_context_chunks == 2 and units[0].n_context_truncated == 1
    for unit in units[1:]:
        shown = unit.sample.context[:unit.n_context_chunks]
        assert sorted(shown) == sorted(SAMPLE.context[:2]) and shown != SAMPLE.context[:2]
        assert unit.n_context_truncated == 1


# --- asking -------------------------------------------------------------------------------------------

def test_sampled_repeats_send_their_temperature_and_seed_k_1_sends_the_clients():
    from tasks.runtime.judge_session import JudgeSession

    def planned_seeds(repeats):
        return {unit.repeat.seed for unit in plan_units(get_suite("ccrs"), SAMPLE, _judge(), 0, len, repeats)}

    sampled = RepeatOptions(k=3, temperature=0.9)
    for repeats, temperatures, seeds in [
        (None, {0.0}, {None}),
        (sampled, {0.9}, planned_seeds(sampled)),
        (RepeatOptions(k=3, mode="perturb"), {0.0}, {None}),
    ]:
        llm = FakeLLMClient("50")
        session = JudgeSession.of("ccrs", _judge(), llm=llm, repeats=repeats)
        judgments, stats = session.judge_samples([SAMPLE])
        assert {r.temperature for r in llm.requests} == temperatures
        assert {r.seed for r in llm.requests} == seeds
        k = repeats.k if repeats else 1
        assert sorted((j.metric, j.repeat) for j in judgments) == sorted(
            (m, r if repeats else None) for m in ALL_CONTEXT for r in range(k))
        # perturb: QR's three repeats are one prompt, asked once
        assert stats["judge_requests"] == len(llm.requests) == (4 if repeats and repeats.mode == "perturb"
                                                                else 2 * k)


def test_the_client_sends_a_requests_own_seed_else_its_own():
    client = LLMClient(ClientConfig(seed=11), "http://127.0.0.1:9/v1")
    request = ChatRequest("m", [{"role": "user", "content": "hi"}])
    assert client.payload(request)["seed"] == 11
    assert client.payload(replace(request, seed=5, temperature=0.7))["seed"] == 5
    client.close()


def test_repeats_are_cached_and_a_killed_run_resumes_with_the_finished_ones(tmp_path):
    """Repeat 2's requests fail in transport (the server went away): repeats 0 and 1 are checkpointed,
    the next pass asks repeat 2 only, and a rerun is answered by the judgment cache alone."""
    from tasks.runtime.judge_session import JudgeSession

    repeats = RepeatOptions(k=3)
    judge = _judge().model_copy(update={"cache": True})
    checkpoint, store = StageCheckpoint.at(tmp_path / "checkpoint.jsonl"), JudgmentCache(tmp_path / "cache")
    units = plan_units(get_suite("ccrs"), SAMPLE, judge, 0, len, RepeatOptions(k=4))
    seeds = {r: {u.repeat.seed for u in units if u.repeat.index == r} for r in range(4)}
    dead = seeds[2]

    def flaky(request):
        return LLMRequestError("connection refused") if request.seed in dead else "40"

    def run(llm):
        session = JudgeSession.of("ccrs", judge, llm=llm, repeats=repeats,
                                  cache=JudgmentCache(tmp_path / "cache") if llm is not None else store)
        return session.judge_samples([SAMPLE], checkpoint=checkpoint)

    first, stats = run(FakeLLMClient(flaky))
    assert stats["judge_requests"] == 6
    assert sorted(j.repeat for j in first if j.status == "ok") == [0, 0, 1, 1]
    second_llm = FakeLLMClient("60")
    second, stats = run(second_llm)
    assert stats["judge_requests"] == 2 and {r.seed for r in second_llm.requests} == dead
    assert sorted((j.metric, j.repeat, j.llm_score) for j in second) == [
        ("CC", 0, 40), ("CC", 1, 40), ("CC", 2, 60), ("QR", 0, 40), ("QR", 1, 40), ("QR", 2, 60)]
    third_llm = FakeLLMClient("99")
    third, stats = JudgeSession.of("ccrs", judge, llm=third_llm, repeats=repeats,
                                   cache=JudgmentCache(tmp_path / "cache")).judge_samples([SAMPLE])
    assert third_llm.requests == [] and stats["cache_hits"] == 6
    assert sorted((j.metric, j.repeat, j.llm_score) for j in third) == sorted(
        (j.metric, j.repeat, j.llm_score) for j in second)
    # a larger k reuses the three repeats judged and asks the two new ones
    fourth_llm = FakeLLMClient("10")
    _, stats = JudgeSession.of("ccrs", judge, llm=fourth_llm, repeats=RepeatOptions(k=4),
                               cache=JudgmentCache(tmp_path / "cache")).judge_samples([SAMPLE])
    assert stats["cache_hits"] == 6 and {r.seed for r in fourth_llm.requests} == seeds[3]
