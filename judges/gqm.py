"""The GQM thesis' LLM-judged metrics (gqm-thesis.txt, section 5.4): answer correctness, answer completeness,
context utilisation, multi-hop reasoning and attribution, each a 0-10 mark normalized to [0, 1].

One unit per (sample, metric), as in CCRS: the prompt shows the metric's inputs (tagged, neutralized), the
construct, and asks for one whole number; the context is fitted to the judge window by dropping the
lowest-ranked passages. Multi-hop reasoning is asked only of samples with at least two retrieved passages
(the thesis evaluates only those queries): the others are recorded as skipped, with no score and no call.
Templates: judges/prompts/gqm/<version>/ (our own words; the thesis gives the constructs, not prompts).
"""
from __future__ import annotations

from judges import templates
from judges.client import ChatRequest, LLMClient
from judges.config import JudgeConfig
from judges.parsers import parse_integer_mark
from judges.suite import Count, Judgment, JudgeSuite, Metric, Parsed, Sample, Unit, Usage, ask, neutralize
from judges.suite import user_request

SUITE = "gqm"
SCALE = (0, 10)
MULTI_HOP = "gqm_multi_hop"
MIN_PASSAGES_MULTI_HOP = 2


def _metric(name: str, inputs: tuple[str, ...], description: str) -> Metric:
    return Metric(SUITE, f"gqm_{name}", SCALE, inputs, (f"{name}.txt",), description)


GQM_METRICS: dict[str, Metric] = {metric.name: metric for metric in (
    _metric("answer_correctness", ("question", "ground_truth", "response"),
            "thesis Answer Correctness: facts, coverage and consistency against the reference answer (0-10)"),
    _metric("answer_completeness", ("question", "response"),
            "thesis Answer Completeness: every part of the question dealt with (0-10)"),
    _metric("context_utilisation", ("question", "context", "response"),
            "thesis Context Utilization Rate: the useful information of the passages put to work (0-10)"),
    _metric("multi_hop", ("question", "context", "response"),
            "thesis Multi-Hop Reasoning Score: facts of several passages linked soundly (0-10; 2+ passages)"),
    _metric("attribution", ("context", "response"),
            "thesis Attribution Score: each claim credited to a passage that holds it (0-10)"),
)}


def load_template(version: str, filename: str) -> dict[str, str]:
    return templates.load_template(SUITE, version, filename)


def render_prompt(spec: Metric, sample: Sample, chunks: list[str], version: str) -> str:
    """Introduction, the construct, the metric's inputs in its declared order, the reply rule."""
    common = load_template(version, "_common.txt")
    blocks = [common["intro"], load_template(version, spec.templates[0])["task"]]
    blocks += [_input_block(name, sample, chunks) for name in spec.inputs]
    blocks.append(common["reply"])
    return "\n\n".join(blocks)


def _input_block(name: str, sample: Sample, chunks: list[str]) -> str:
    if name == "context":
        body = "\n".join(f'<passage index="{i}">\n{neutralize(chunk)}\n</passage>'
                         for i, chunk in enumerate(chunks, 1))
        return f"<passages>\n{body or '(no passages were retrieved)'}\n</passages>"
    return f"<{name}>\n{neutralize(getattr(sample, name))}\n</{name}>"


def parse_mark(text: str | None) -> Parsed:
    parsed = parse_integer_mark(text, SCALE)
    return Parsed(parsed.score is not None, parsed.score, parsed.reason)


class GqmSuite(JudgeSuite):
    """One unit per (sample, metric); the base class reads `judge.gqm` (prompt_version, max_tokens)."""

    name = SUITE
    description = ("GQM thesis (section 5.4): answer correctness and completeness, context utilisation, "
                   "multi-hop reasoning and attribution, LLM-judged 0-10")
    rank = 4
    metrics = GQM_METRICS

    def selected_metrics(self, judge: JudgeConfig) -> tuple[str, ...]:
        return tuple(f"gqm_{name}" for name in judge.gqm.metrics)

    def check_config(self, judge: JudgeConfig) -> None:
        super().check_config(judge)
        unknown = [m for m in self.selected_metrics(judge) if m not in self.metrics]
        if unknown:
            raise ValueError(f"judge.gqm.metrics: unknown {unknown}; choose from "
                             f"{[m.removeprefix('gqm_') for m in self.metrics]}")

    def plan(self, sample: Sample, judge: JudgeConfig, seed: int, count: Count) -> list[Unit]:
        from judges.readers import fit_chunks

        version, units = self.prompt_version(judge), []
        for spec in (self.metrics[name] for name in self.selected_metrics(judge)):
            chunks = sample.context if "context" in spec.inputs else []
            fitted = fit_chunks(lambda kept, spec=spec: render_prompt(spec, sample, kept, version), chunks,
                                self.window_budget(judge), count)
            units.append(Unit(SUITE, sample, (spec.name,), None, len(fitted.chunks), fitted.n_truncated))
        return units

    def single_request(self, unit: Unit, judge: JudgeConfig) -> ChatRequest | None:
        """Each unit is one call (re-asks aside), none for a multi-hop unit with fewer than 2 passages."""
        spec, sample = self.metrics[unit.metrics[0]], unit.sample
        if spec.name == MULTI_HOP and len(sample.context) < MIN_PASSAGES_MULTI_HOP:
            return None
        chunks = sample.context[: unit.n_context_chunks] if "context" in spec.inputs else []
        prompt = render_prompt(spec, sample, chunks, self.prompt_version(judge))
        return user_request(judge.model, prompt, judge.gqm.max_tokens)

    def reply_estimate(self, request: ChatRequest, judge: JudgeConfig) -> str | None:
        return "7"  # a bare mark

    def evaluate(self, client: LLMClient, unit: Unit, judge: JudgeConfig,
                 count: Count | None) -> list[Judgment]:
        spec, sample = self.metrics[unit.metrics[0]], unit.sample
        request = self.single_request(unit, judge)
        if request is None:
            return [self.judgment(sample, judge, spec.name, status="skipped",
                                  reason=f"fewer than {MIN_PASSAGES_MULTI_HOP} retrieved passages: multi-hop "
                                         "reasoning is not asked (thesis section 5.4.3)")]
        reask = load_template(self.prompt_version(judge), "_common.txt")["reask"]
        usage = Usage()
        answer = ask(client, request, parse_mark, lambda reason: reask.replace("{reason}", reason),
                     judge.max_reasks, usage, window=judge.context_window, count=count)
        if not answer.ok:
            return [self.judgment(sample, judge, spec.name, status="failed", usage=usage,
                                  reason=answer.reason, raw=answer.raw)]
        return [self.judgment(sample, judge, spec.name, status="ok", usage=usage,
                              score=spec.normalize(answer.value), llm_score=answer.value, raw=answer.raw)]
