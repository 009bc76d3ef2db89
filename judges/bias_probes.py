"""Bias probes for the CCRS judges: declared perturbations of a clean sample whose effect on a judge that
follows its constructs is known in advance, so that a judge that moves anyway shows a bias.

A probe kind is one declaration in `PROBES`: what it changes (the response or the context), which metrics
its construct expects to move (and why; every other metric that reads the changed input should stay put),
and how it turns clean samples into probed variants:

- `injection`: the steering templates of judges/injection.py, in the response or the top-ranked chunk;
- `verbosity`: the response padded with true but irrelevant sentences: `sentences` sentences of another
  question's context (seeded choice of that question and of its sentences, kept in their order);
- `order`: the context's chunks in reverse order (samples with fewer than two distinct chunks have no
  order to reverse and get no variant).

Pure: no Ray, no tasks/ imports; randomness only from the explicit `np.random.Generator` of `build_probes`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from judges.injection import PLACEMENTS, TEMPLATES, InjectionSample, Placement, build_variants
from judges.parsers import split_sentences

ProbeSample = InjectionSample  # a clean sample: question, response, ground truth, ranked chunks
CLEAN = "clean"
STABLE, DOWN = "stable", "down"


@dataclass(frozen=True)
class ProbeOptions:
    """The settings a kind reads: injection templates and placements, verbosity's sentence count."""

    templates: tuple[str, ...] = tuple(TEMPLATES)
    placements: tuple[Placement, ...] = PLACEMENTS
    sentences: int = 3


@dataclass(frozen=True)
class ProbedVariant:
    """One judged version of a sample: `variant` names it ('clean', 'verbosity', 'order',
    '<template>@<placement>'); `changes` is the judge input it perturbs (None for the clean one)."""

    sample: ProbeSample
    kind: str
    variant: str
    response: str
    context: tuple[str, ...]
    changes: str | None = None
    detail: str = ""


Builder = Callable[[Sequence[ProbeSample], ProbeOptions, np.random.Generator], list[ProbedVariant]]


@dataclass(frozen=True)
class ProbeKind:
    name: str
    description: str
    changes: tuple[str, ...]        # the judge inputs its variants may perturb
    build: Builder
    moves: dict[str, str] = field(default_factory=dict)  # metric -> why its construct expects a drop

    def expected(self, metric: str) -> str:
        """`down` where the metric's construct penalises the perturbation, else `stable`."""
        return DOWN if metric in self.moves else STABLE


# --- builders ----------------------------------------------------------------------------------------

def clean_variant(sample: ProbeSample) -> ProbedVariant:
    return ProbedVariant(sample, CLEAN, CLEAN, sample.response, sample.context)


def _injection(samples: Sequence[ProbeSample], options: ProbeOptions,
               rng: np.random.Generator) -> list[ProbedVariant]:
    return [ProbedVariant(v.sample, "injection", v.variant, v.response, v.context, v.placement)
            for v in build_variants(samples, options.templates, options.placements) if v.template]


def padding_sentences(donor: ProbeSample, own: ProbeSample) -> list[str]:
    """The donor's context sentences that the probed sample's own context and response do not contain,
    each ending in a full stop where its snippet cut it off without one."""
    own_text = " ".join((*own.context, own.response))
    return [s if s[-1] in ".!?" else f"{s}." for chunk in donor.context for s in split_sentences(chunk)
            if s not in own_text]


def _verbosity(samples: Sequence[ProbeSample], options: ProbeOptions,
               rng: np.random.Generator) -> list[ProbedVariant]:
    """Per sample (in order): a donor drawn among the other samples that have padding to give, then
    `options.sentences` of its sentences drawn without replacement and appended in the donor's order."""
    variants = []
    for sample in samples:
        donors = [(d, padding) for d in samples if d.query_id != sample.query_id
                  for padding in [padding_sentences(d, sample)] if padding]
        if not donors:
            continue
        donor, padding = donors[int(rng.integers(len(donors)))]
        k = min(options.sentences, len(padding))
        chosen = [padding[i] for i in sorted(rng.choice(len(padding), size=k, replace=False))]
        padded = f"{sample.response} {' '.join(chosen)}"
        variants.append(ProbedVariant(sample, "verbosity", "verbosity", padded, sample.context, "response",
                                      f"{k} sentences from the context of {donor.query_id}"))
    return variants


def _order(samples: Sequence[ProbeSample], options: ProbeOptions,
           rng: np.random.Generator) -> list[ProbedVariant]:
    return [ProbedVariant(s, "order", "order", s.response, s.context[::-1], "context",
                          f"{len(s.context)} chunks reversed")
            for s in samples if len(set(s.context)) > 1]


PROBES: dict[str, ProbeKind] = {
    "injection": ProbeKind(
        "injection", "steering text (judges/injection.py templates) in the response or the top-ranked chunk",
        ("response", "context"), _injection),
    "verbosity": ProbeKind(
        "verbosity", "the response padded with true sentences from another question's context",
        ("response",), _verbosity,
        moves={"ID": "its construct penalises excessive or irrelevant detail",
               "QR": "off-topic content lowers relevance in its construct",
               "CC": "claims the context cannot support lower coherence in its construct"}),
    "order": ProbeKind("order", "the context's chunks in reverse order", ("context",), _order),
}


class UnknownProbeError(ValueError):
    """A probe kind that is not registered; the message lists the known ones."""


def check_kinds(kinds: Sequence[str]) -> None:
    unknown = [k for k in kinds if k not in PROBES]
    if unknown:
        raise UnknownProbeError(f"unknown probe kind(s) {unknown}; known: {list(PROBES)}")


def build_probes(samples: Sequence[ProbeSample], kinds: Sequence[str], options: ProbeOptions,
                 rng: np.random.Generator) -> list[ProbedVariant]:
    """Every sample's clean variant, then each kind's variants (kinds in the order given)."""
    check_kinds(kinds)
    variants = [clean_variant(s) for s in samples]
    for kind in kinds:
        variants += PROBES[kind].build(samples, options, rng)
    return variants


# --- run config ----------------------------------------------------------------------------------------

class ProbesConfig(BaseModel):
    """`probes:` of a run config: after the judge stage, the run's own judge is probed on `questions` of
    the run's answers (one system's); the verdict reports each metric's paired shift with its CI."""

    model_config = ConfigDict(extra="forbid")

    kinds: list[str] = Field(default=["verbosity", "order"], min_length=1, description="probe kinds "
                             "(judges/bias_probes.py PROBES)")
    questions: int = Field(default=8, ge=2, description="the first N questions with an answer of `system`")
    system: str | None = Field(default=None, description="whose answers are probed (default: the first "
                               "system by label with an answer)")
    tolerance: float = Field(default=0.05, gt=0, lt=1, description="flag |shift| above this (0-1 scale)")
    sentences: int = Field(default=3, ge=1, description="verbosity: padding sentences")
    templates: list[str] = Field(default=list(TEMPLATES), min_length=1, description="injection templates")
    placements: list[Placement] = Field(default=list(PLACEMENTS), min_length=1)
    b: int = Field(default=2000, ge=100, description="bootstrap resamples of each shift's CI")
    seed: int = 0

    @field_validator("kinds")
    @classmethod
    def _registered(cls, kinds: list[str]) -> list[str]:
        check_kinds(kinds)
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"each probe kind once, got {kinds}")
        return kinds

    @field_validator("templates")
    @classmethod
    def _known_templates(cls, templates: list[str]) -> list[str]:
        unknown = [t for t in templates if t not in TEMPLATES]
        if unknown:
            raise ValueError(f"unknown injection template(s) {unknown}; known: {sorted(TEMPLATES)}")
        return templates

    def options(self) -> ProbeOptions:
        return ProbeOptions(tuple(self.templates), tuple(self.placements), self.sentences)
