"""judges/caching.py: one key for every suite, made from declarations, never from a hand-kept list."""
from __future__ import annotations

import pickle
import typing
from dataclasses import replace

import pytest
from pydantic import BaseModel

from judges.cache import JudgmentCache
from judges.caching import SCORING_FIELDS, CachingJudge, prompt_files
from judges.config import CcrsOptions, JudgeConfig
from judges.suite import Sample, Unit, get_suite, suites
from tests.conftest import bioasq_questions, sample_field
from tests.fakes import FakeLLMClient


def _real_sample() -> Sample:
    """The first BioASQ question of the committed sample, its gold snippets as the context."""
    question = bioasq_questions(1)[0]
    ideal = sample_field(question["ideal_answer"])
    exact = sample_field(question.get("exact_answer")) or []
    answer = ideal[0] if isinstance(ideal, list) else ideal
    return Sample(question["id"], "bm25+reader", question["body"], answer,
                  ideal[-1] if isinstance(ideal, list) else ideal,
                  [s["text"] for s in sample_field(question["snippets"])][:3],
                  [str(a) for a in (exact if isinstance(exact, list) else [exact])])


SAMPLE = _real_sample()


def _key(suite: str, judge: JudgeConfig, sample: Sample = SAMPLE, metrics=None, seed=0, identity=None) -> str:
    spec = get_suite(suite)
    unit = Unit(suite, sample, tuple(metrics or spec.metrics), None)
    return CachingJudge(spec, judge, seed, identity).key(unit)


# --- every setting of JudgeConfig, changed one at a time ---------------------------------------------------

def _leaves(model: BaseModel, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        out += _leaves(value, path + (name,)) if isinstance(value, BaseModel) else [path + (name,)]
    return out


def _owner_and_field(path: tuple[str, ...]) -> tuple[type[BaseModel], str]:
    model: BaseModel = JudgeConfig()
    for name in path[:-1]:
        model = getattr(model, name)
    return type(model), path[-1]


def _candidates(path: tuple[str, ...], value):
    owner, name = _owner_and_field(path)
    choices = typing.get_args(owner.model_fields[name].annotation)
    if name == "prompt_version":
        from judges.templates import versions

        return [v for v in versions(path[0]) if v != value] or [value + "-other"]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1, 5]
    if isinstance(value, float):
        return [value / 2, value + 0.1, 0.3]
    if isinstance(value, str):
        return [c for c in choices if c != value] or [value + "-other"]
    if isinstance(value, list):
        return [value[:1]]
    if value is None:
        return [5, "other", {}]  # {}: an optional block switched on with its defaults (judge.preflight)
    raise AssertionError(f"no changed value for judge.{'.'.join(path)} = {value!r}: teach the test")


def _changed(path: tuple[str, ...]) -> JudgeConfig | None:
    """JudgeConfig with the setting at `path` changed to another valid value (None: it has none)."""
    base = JudgeConfig().model_dump()
    value = base
    for name in path[:-1]:
        value = value[name]
    for candidate in _candidates(path, value[path[-1]]):
        value[path[-1]] = candidate
        try:
            return JudgeConfig.model_validate(base)
        except ValueError:
            continue
    return None


def _declared_neutral(path: tuple[str, ...]) -> bool:
    """Declared by its model, or by a block it belongs to (judge.repeats: keyed per unit instead)."""
    return any(name in owner.not_in_judgment
               for owner, name in (_owner_and_field(path[:depth]) for depth in range(1, len(path) + 1)))


LEAVES = _leaves(JudgeConfig())


@pytest.mark.parametrize("suite", list(suites()))
def test_every_judge_setting_changes_the_key_or_is_declared_not_to(suite):
    """The property the cache rests on: a setting of JudgeConfig changes the key of `suite`'s units
    unless it is declared `not_in_judgment`, belongs to another suite's block, or is a scoring setting
    of a suite that does not read them. A new field is covered the day it is added."""
    spec = get_suite(suite)
    base = _key(suite, JudgeConfig())
    other_blocks = set(suites()) - {suite}
    for path in LEAVES:
        changed = _changed(path)
        assert changed is not None, f"judge.{'.'.join(path)}: no other valid value to try"
        ignored = (_declared_neutral(path) or path[0] in other_blocks
                   or (path[0] in SCORING_FIELDS and not spec.reads_scoring))
        assert (_key(suite, changed) == base) == ignored, f"{suite}: judge.{'.'.join(path)}"


def test_the_neutral_declarations_are_few_and_named():
    neutral = sorted(".".join(path) for path in LEAVES if _declared_neutral(path))
    assert neutral == ["api_key_env", "base_url", "cache", "ccrs.metrics", "gqm.bertscore_idf_corpus",
                       "gqm.metrics", "repeats.k",
                       "repeats.mode", "repeats.temperature", "vera.metrics"]


def test_a_sampled_repeat_is_keyed_by_its_mode_index_and_temperature_a_perturbed_one_by_its_texts():
    """judge.repeats is keyed per unit (Unit.repeat), never through the config: the one judgment keeps
    its key, a sampled repeat adds (mode, index, temperature), a perturbed repeat 0 is the one judgment."""
    from judges.suite import Repeat

    def key(repeat, sample=SAMPLE):
        unit = Unit("ccrs", sample, ("CC",), None, repeat=repeat)
        return CachingJudge(get_suite("ccrs"), JudgeConfig(), 0).key(unit)

    plain = _key("ccrs", JudgeConfig(), metrics=["CC"])
    sampled = [key(Repeat(r, "sample", 0.7, r + 100)) for r in range(3)]
    sampled.append(key(Repeat(0, "sample", 0.3, 100)))
    assert len({plain, *sampled}) == 5
    assert key(Repeat(0, "sample", 0.7, 999)) == sampled[0]  # the seed follows from index and client seed
    assert key(Repeat(0, "perturb")) == key(Repeat(2, "perturb")) == plain
    reordered = replace(SAMPLE, context=SAMPLE.context[::-1])
    assert key(Repeat(1, "perturb"), reordered) not in {plain, *sampled}


def test_lenient_parse_regression_a_strict_failure_is_not_served_to_a_lenient_run(tmp_path):
    """The bug this module ended: turning judge.ccrs.lenient_parse on served judgments parsed strictly."""
    from tasks.runtime.judge_session import JudgeSession

    prose = "I would give this response a score of 70 out of a possible maximum."
    store, suite = JudgmentCache(tmp_path), get_suite("ccrs")

    def run(lenient: bool):
        judge = JudgeConfig(max_reasks=0, ccrs=CcrsOptions(metrics=["QR"], lenient_parse=lenient))
        session = JudgeSession.of(suite, judge, llm=FakeLLMClient(prose), cache=store)
        return session.judge_samples([SAMPLE])

    (strict,), strict_stats = run(False)
    (lenient,), lenient_stats = run(True)
    assert strict.status == "failed" and strict_stats["judge_requests"] == 1
    assert lenient_stats["cache_hits"] == 0 and lenient_stats["judge_requests"] == 1
    assert lenient.status == "ok" and lenient.llm_score == 70
    (again,), again_stats = run(True)
    assert again_stats["cache_hits"] == 1 and again.llm_score == 70 and again.cached


def test_a_key_reads_only_the_sample_fields_its_metrics_declare():
    judge = JudgeConfig()
    other_context = replace(SAMPLE, context=SAMPLE.context[::-1])
    assert _key("ccrs", judge, other_context, ["QR"]) == _key("ccrs", judge, SAMPLE, ["QR"])
    assert _key("ccrs", judge, other_context, ["CC"]) != _key("ccrs", judge, SAMPLE, ["CC"])
    other_exact = replace(SAMPLE, exact_answers=["something else"])
    assert _key("ccrs", judge, other_exact, ["AC"]) != _key("ccrs", judge, SAMPLE, ["AC"])  # EM reads them
    assert _key("ccrs", judge, other_exact, ["IR"]) == _key("ccrs", judge, SAMPLE, ["IR"])
    other_truth = replace(SAMPLE, ground_truth="Something else.")
    relevance = ["vera_answer_relevance"]
    assert _key("vera", judge, other_truth, relevance) == _key("vera", judge, SAMPLE, relevance)
    assert _key("vera", judge, other_truth) != _key("vera", judge, SAMPLE)
    # which system or question id a sample belongs to does not change its judgment
    assert _key("ccrs", judge, replace(SAMPLE, system="other", query_id="q9")) == _key("ccrs", judge)


def test_seed_identity_prompt_files_and_metrics_are_in_the_key():
    judge = JudgeConfig()
    served = {"id": judge.model, "root": "/models/smollm2-135m-instruct", "max_model_len": 2048}
    swapped = {**served, "root": "/models/smollm2-135m-instruct-finetuned"}
    keys = {_key("ccrs", judge), _key("ccrs", judge, seed=1), _key("ccrs", judge, identity=served),
            _key("ccrs", judge, identity=swapped), _key("ccrs", judge, metrics=["CC"])}
    assert len(keys) == 5
    assert _key("ccrs", judge, identity={}) == _key("ccrs", judge)
    assert prompt_files("ccrs", "v1") != prompt_files("ccrs", "paper") != ""


def test_an_edited_template_is_a_new_key(tmp_path, monkeypatch):
    import judges.caching as caching

    folder = tmp_path / "ccrs" / "v1"
    folder.mkdir(parents=True)
    (folder / "qr.txt").write_text("[task]\nRate it.\n")
    monkeypatch.setattr(caching, "PROMPTS_ROOT", tmp_path)
    before = caching.prompt_files.__wrapped__("ccrs", "v1")
    (folder / "qr.txt").write_text("[task]\nRate it, 0 to 100.\n")
    assert caching.prompt_files.__wrapped__("ccrs", "v1") != before


def test_the_caching_judge_round_trips_and_travels_to_a_ray_worker(tmp_path, ray_session):
    import ray

    suite, judge = get_suite("ccrs"), JudgeConfig()
    unit = Unit("ccrs", SAMPLE, ("QR",), None)
    caching = CachingJudge(suite, judge, 0, None, JudgmentCache(tmp_path))
    assert caching.lookup([unit]) == [None]
    records = [{"metric": "QR", "llm_score": 80, "status": "ok"}]

    @ray.remote(num_cpus=0)
    def save_there(judge_in_worker: CachingJudge) -> str:
        judge_in_worker.save([unit], [records])
        return judge_in_worker.key(unit)

    assert ray.get(save_there.remote(pickle.loads(pickle.dumps(caching)))) == caching.key(unit)
    assert caching.lookup([unit]) == [records]
    assert CachingJudge(suite, judge, 0).lookup([unit]) == [None]  # no store: nothing cached
