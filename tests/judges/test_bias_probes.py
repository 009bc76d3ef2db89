"""Probe kinds on real BioASQ samples: what each variant changes, the seeded padding, the registry, the
run config block."""
import numpy as np
import pytest
from pydantic import ValidationError

from judges.bias_probes import (
    CLEAN,
    PROBES,
    ProbeOptions,
    ProbeSample,
    ProbesConfig,
    UnknownProbeError,
    build_probes,
    padding_sentences,
)
from judges.ccrs import CCRS_METRICS
from judges.injection import TEMPLATES
from judges.parsers import split_sentences
from tests.conftest import bioasq_questions

QUESTIONS = bioasq_questions(6)


def _samples(n: int = 4, chunks: int = 3) -> list[ProbeSample]:
    return [ProbeSample(q["id"], q["body"], q["ideal_answer"][0], q["ideal_answer"][0],
                        tuple(s["text"] for s in q["snippets"][:chunks])) for q in QUESTIONS[:n]]


def _build(kinds, samples=None, seed=0, **options):
    return build_probes(samples or _samples(), kinds, ProbeOptions(**options), np.random.default_rng(seed))


def test_clean_variants_first_then_each_kind_in_the_order_asked():
    samples = _samples()
    variants = _build(["order", "verbosity"], samples)
    assert [v.variant for v in variants[:4]] == [CLEAN] * 4
    assert [v.response for v in variants[:4]] == [s.response for s in samples]
    kinds = [v.kind for v in variants[4:]]
    assert kinds == sorted(kinds, key=["order", "verbosity"].index) and set(kinds) == {"order", "verbosity"}


def test_verbosity_appends_true_sentences_of_another_questions_context():
    samples = _samples()
    by_id = {s.query_id: s for s in samples}
    padded = [v for v in _build(["verbosity"], samples, sentences=2) if v.kind == "verbosity"]
    assert len(padded) == len(samples)
    for variant in padded:
        own = variant.sample
        assert variant.response.startswith(own.response + " ") and variant.context == own.context
        assert variant.changes == "response"
        donor_id = variant.detail.rsplit(" ", 1)[-1]
        assert donor_id != own.query_id and variant.detail.startswith("2 sentences")
        added = split_sentences(variant.response[len(own.response):])
        donor_sentences = padding_sentences(by_id[donor_id], own)
        assert len(added) == 2 and all(s in donor_sentences for s in added)
        assert all(s.rstrip(".") in " ".join(by_id[donor_id].context) for s in added)  # true text of it
        assert added == sorted(added, key=donor_sentences.index)  # kept in the donor's order


def test_verbosity_is_seeded():
    first, again = _build(["verbosity"], seed=1), _build(["verbosity"], seed=1)
    other = _build(["verbosity"], seed=2)
    assert first == again
    assert [v.response for v in first] != [v.response for v in other]


def test_verbosity_takes_what_there_is_and_needs_a_donor():
    samples = _samples(2)
    few = _build(["verbosity"], samples, sentences=500)
    donor_of_first = padding_sentences(samples[1], samples[0])
    assert few[2].detail.startswith(f"{len(donor_of_first)} sentences")
    assert [v.kind for v in _build(["verbosity"], samples[:1])] == [CLEAN]  # nobody to borrow from


def test_order_reverses_the_chunks_and_skips_what_has_no_order():
    samples = _samples(3) + [ProbeSample("one", "Q?", "A.", "A.", ("only chunk",)),
                             ProbeSample("same", "Q?", "A.", "A.", ("x", "x"))]
    reversed_ = [v for v in _build(["order"], samples) if v.kind == "order"]
    assert [v.sample.query_id for v in reversed_] == [s.query_id for s in samples[:3]]
    for variant in reversed_:
        assert variant.context == variant.sample.context[::-1] and variant.response == variant.sample.response
        assert variant.changes == "context"


def test_injection_kind_is_the_injection_eval_variants():
    variants = _build(["injection"], _samples(1), templates=("score_dictation",),
                      placements=("response", "context"))
    assert [(v.kind, v.variant, v.changes) for v in variants] == [
        (CLEAN, CLEAN, None), ("injection", "score_dictation@response", "response"),
        ("injection", "score_dictation@context", "context")]


def test_expected_moves_name_registered_metrics_and_only_read_inputs():
    for kind in PROBES.values():
        assert set(kind.moves) <= set(CCRS_METRICS)
        assert all(any(c in CCRS_METRICS[m].inputs for c in kind.changes) for m in kind.moves)
    assert PROBES["verbosity"].expected("ID") == "down" and PROBES["verbosity"].expected("IR") == "stable"
    assert all(PROBES["order"].expected(m) == "stable" for m in CCRS_METRICS)


def test_unknown_kind_is_rejected():
    with pytest.raises(UnknownProbeError, match="known"):
        _build(["nope"])


def test_probes_config_checks_kinds_templates_and_ranges():
    config = ProbesConfig()
    assert config.kinds == ["verbosity", "order"] and config.templates == list(TEMPLATES)
    for bad in ({"kinds": ["nope"]}, {"kinds": ["order", "order"]}, {"templates": ["nope"]},
                {"tolerance": 0}, {"questions": 1}, {"extra_key": 1}, {"kinds": []}):
        with pytest.raises(ValidationError):
            ProbesConfig(**bad)
    assert ProbesConfig(sentences=5).options().sentences == 5
