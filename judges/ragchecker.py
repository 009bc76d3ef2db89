"""RAGChecker-style baseline (CCRS paper section 4.1.4) as a registered judge suite: claim extraction +
entailment, core precision / recall / faithfulness (scores.parquet columns rc_precision, rc_recall,
rc_faithfulness, each in [0, 1]).

Per sample, one unit of work, with the same judge model as CCRS (5 judge calls when nothing needs a re-ask
and faithfulness is checked against the joined context; per chunk: up to 4 + k):
  1. claims of the response          2. claims of the ground truth
  3. response claims entailed by the ground truth -> precision = |entailed| / |response claims|
  4. ground-truth claims entailed by the response -> recall    = |entailed| / |ground-truth claims|
  5. response claims entailed by the context      -> faithfulness = |entailed| / |response claims|
A version's entail.txt declares how the judge labels a claim (`[reply]`: yes-no, or three-way entailment /
neutral / contradiction, of which only entailment counts) and how faithfulness reads the context
(`[faithfulness]`: joined, the chunks joined and fitted to the judge's window, whole chunks, lowest-ranked
dropped first; or per-chunk, the CCRS paper's c in {chunk_j}: a claim is faithful when at least one chunk
entails it, each chunk asked on its own in rank order until every claim is entailed). v1: yes-no, joined;
paper: three-way, per-chunk (judges/prompts/ragchecker/paper/README.md).
A score that cannot be computed is None with the reason, never 0: status
"failed" for an unparseable reply after re-asks or a failed request, "skipped" when no claim was extracted
(nothing to check). The calls of a sample are counted once, on its rc_precision row (attempts and tokens
of the other rows are 0). Templates: judges/prompts/ragchecker/<version>/.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from judges import suite as js
from judges import templates
from judges.client import LLMClient
from judges.config import JudgeConfig
from judges.parsers import (
    VERDICT_REPLIES,
    VerdictReply,
    context_text,
    numbered,
    parse_entailment_labels,
    parse_numbered,
    verdicts_parser,
)

SUITE = "ragchecker"
TEMPLATES = ("claims.txt", "entail.txt")

RAGCHECKER_METRICS: dict[str, js.Metric] = {
    "rc_precision": js.Metric(
        SUITE, "rc_precision", (0, 1), ("response", "ground_truth"), TEMPLATES,
        "RAGChecker-style precision: share of response claims entailed by the ground truth"),
    "rc_recall": js.Metric(
        SUITE, "rc_recall", (0, 1), ("ground_truth", "response"), TEMPLATES,
        "RAGChecker-style recall: share of ground-truth claims entailed by the response"),
    "rc_faithfulness": js.Metric(
        SUITE, "rc_faithfulness", (0, 1), ("response", "context"), TEMPLATES,
        "RAGChecker-style faithfulness: share of response claims entailed by the context"),
}
METRICS = tuple(RAGCHECKER_METRICS)

# entail.txt's `[reply]`: how the judge labels each claim (absent: yes-no)
ENTAILMENT_REPLIES: dict[str, VerdictReply] = {
    "yes-no": VERDICT_REPLIES["yes-no"],
    "three-way": VerdictReply(
        parse_entailment_labels, "entailment/neutral/contradiction lines",
        "Reply with exactly {n} lines, each like '1. entailment', '1. neutral' or '1. contradiction'."),
}
# entail.txt's `[faithfulness]`: what the response's claims are checked against (absent: joined)
FAITHFULNESS_CHECKS = ("joined", "per-chunk")


def load_template(version: str, filename: str) -> str:
    return templates.load_template(SUITE, version, filename)["task"]


def entail_setting(version: str, section: str, default: str, known) -> str:
    """A setting entail.txt declares in its own `[section]` (ValueError naming the file when unknown)."""
    value = templates.load_template(SUITE, version, "entail.txt").get(section, default)
    if value not in known:
        raise ValueError(f"ragchecker {version}/entail.txt: unknown [{section}] {value!r}; choose from "
                         f"{sorted(known)}")
    return value


def entail_reply(version: str) -> VerdictReply:
    return ENTAILMENT_REPLIES[entail_setting(version, "reply", "yes-no", ENTAILMENT_REPLIES)]


def per_chunk_faithfulness(version: str) -> bool:
    return entail_setting(version, "faithfulness", "joined", FAITHFULNESS_CHECKS) == "per-chunk"


def claims_prompt(judge: JudgeConfig, text: str) -> str:
    return load_template(judge.ragchecker.prompt_version, "claims.txt").replace("{text}", js.neutralize(text))


def entail_prompt(judge: JudgeConfig, reference: str, claims: list[str]) -> str:
    return (load_template(judge.ragchecker.prompt_version, "entail.txt")
            .replace("{reference}", js.neutralize(reference))
            .replace("{claims}", js.neutralize(numbered(claims))))


def parse_claims(text: str | None, max_claims: int | None) -> list[str] | None:
    """Claims list; [] for an explicit NONE; None when the reply is unusable."""
    if text is not None and text.strip().upper().rstrip(".") == "NONE":
        return []
    claims = parse_numbered(text)[:max_claims]
    return claims or None


def claims_parser(max_claims: int | None) -> Callable[[str | None], js.Parsed]:
    def parse(text: str | None) -> js.Parsed:
        claims = parse_claims(text, max_claims)
        if claims is None:
            return js.Parsed(False, reason="no numbered claim and no NONE")
        return js.Parsed(True, claims)

    return parse


def is_entailed(verdict: bool | str) -> bool:
    """A yes/no verdict's yes, or the three-way label "entailment" (neutral and contradiction are not)."""
    return verdict is True or verdict == "entailment"


def entailment_share(verdicts: list[bool] | list[str] | None) -> float | None:
    if not verdicts:
        return None
    return sum(is_entailed(verdict) for verdict in verdicts) / len(verdicts)


def entailed_by_any(references: Sequence[str], claims: list[str],
                    entailed: Callable[[str, list[str]], js.Answer]) -> js.Answer:
    """Per claim, whether at least one reference entails it: each reference asked on its own, in order,
    until every claim is entailed (no reference: none is). A failed reference fails the whole check."""
    found, raw = [False] * len(claims), None
    for rank, reference in enumerate(references, 1):
        if all(found):
            break
        answer = entailed(reference, claims)
        if not answer.ok:
            return js.Answer(False, None, answer.raw, f"chunk {rank}: {answer.reason}")
        found = [was or is_entailed(verdict) for was, verdict in zip(found, answer.value)]
        raw = answer.raw
    return js.Answer(True, found, raw, None)


@dataclass(frozen=True)
class RagCheckerPlan:
    """The fitted chunks and the context text the faithfulness entailment shows (joined), or the chunks it
    shows one at a time (per_chunk)."""

    chunks: tuple[str, ...]
    context: str
    per_chunk: bool = False


def _ask(client: LLMClient, judge: JudgeConfig, prompt: str, parse: Callable[[str | None], js.Parsed],
         reask: str, usage: js.Usage, count: js.Count | None) -> js.Answer:
    request = js.user_request(judge.model, prompt, judge.ragchecker.max_tokens)
    return js.ask(client, request, parse, lambda reason: reask, judge.ragchecker.max_reasks, usage,
                  judge.context_window, count)


def _judgment(sample: js.Sample, judge: JudgeConfig, metric: str, score: float | None, status: str,
              reason: str | None, raw: str | None, usage: js.Usage, **detail: Any) -> js.Judgment:
    spec = RAGCHECKER_METRICS[metric]
    return js.Judgment.of(sample, spec, status=status, prompt_version=judge.ragchecker.prompt_version,
                          judge_model=judge.model, usage=usage, score=spec.normalize(score), reason=reason,
                          raw=raw, detail=js.detail_json(**detail))


def check_sample(client: LLMClient, judge: JudgeConfig, sample: js.Sample, plan: RagCheckerPlan,
                 count: js.Count | None = None) -> list[js.Judgment]:
    """The three metrics of one sample, in METRICS order; the sample's usage on the first row only."""
    if not sample.response.strip():
        return [empty_judgment(sample, judge, m) for m in METRICS]
    cfg, usage = judge.ragchecker, js.Usage()
    reply = entail_reply(cfg.prompt_version)

    def claims_of(text: str) -> js.Answer:
        return _ask(client, judge, claims_prompt(judge, text), claims_parser(cfg.max_claims),
                    "Write the claims as a numbered list, one per line, or NONE.", usage, count)

    def entailed(reference: str, claims: list[str]) -> js.Answer:
        parse = verdicts_parser(len(claims), reply)
        return _ask(client, judge, entail_prompt(judge, reference, claims), parse,
                    reply.reask.format(n=len(claims)), usage, count)

    def entailed_by_context(_: str, claims: list[str]) -> js.Answer:
        return entailed_by_any(plan.chunks, claims, entailed)

    response_claims, gt_claims = claims_of(sample.response), claims_of(sample.ground_truth)
    jobs = (("rc_precision", response_claims, sample.ground_truth, "response_claims", entailed),
            ("rc_recall", gt_claims, sample.response, "ground_truth_claims", entailed),
            ("rc_faithfulness", response_claims, plan.context, "response_claims",
             entailed_by_context if plan.per_chunk else entailed))
    rows: list[tuple[str, float | None, str, str | None, str | None, dict]] = []
    for metric, claims, reference, claims_of_what, check in jobs:
        if not claims.ok:
            reason = claims.reason or "invalid"
            reason = reason if reason.startswith("request failed") else f"claim extraction failed: {reason}"
            rows.append((metric, None, "failed", reason, claims.raw, {claims_of_what: None}))
            continue
        if not claims.value:
            rows.append((metric, None, "skipped", "no claims extracted", claims.raw, {claims_of_what: []}))
            continue
        verdicts = check(reference, list(claims.value))
        score = entailment_share(verdicts.value) if verdicts.ok else None
        rows.append((metric, score, "ok" if score is not None else "failed",
                     None if score is not None else verdicts.reason, verdicts.raw,
                     {claims_of_what: list(claims.value), "verdicts": verdicts.value}))
    nothing = js.Usage()
    return [_judgment(sample, judge, metric, score, status, reason, raw, usage if i == 0 else nothing,
                      **detail) for i, (metric, score, status, reason, raw, detail) in enumerate(rows)]


def empty_judgment(sample: js.Sample, judge: JudgeConfig, metric: str) -> js.Judgment:
    return _judgment(sample, judge, metric, 0.0, "empty_response", js.EMPTY_REASON, None, js.Usage())


class RagCheckerSuite(js.JudgeSuite):
    """One unit per sample: the five calls depend on each other (claims first, then entailment), so
    single_request and reply_estimate are None (the defaults)."""

    name = SUITE
    description = ("RAGChecker-style baseline (CCRS paper section 4.1.4): claim entailment "
                   "precision / recall / faithfulness")
    rank = 3
    metrics = RAGCHECKER_METRICS

    def plan(self, sample: js.Sample, judge: JudgeConfig, seed: int, count: js.Count) -> list[js.Unit]:
        from judges.readers import fit_chunks

        version = judge.ragchecker.prompt_version
        # The response's claims are not known before the judge writes them: the response stands in for them.
        if per_chunk_faithfulness(version):
            kept = [chunk for chunk in sample.context
                    if count(entail_prompt(judge, chunk, [sample.response])) <= self.window_budget(judge)]
            plan = RagCheckerPlan(tuple(kept), context_text(kept), per_chunk=True)
        else:
            fitted = fit_chunks(lambda kept: entail_prompt(judge, context_text(kept), [sample.response]),
                                list(sample.context), self.window_budget(judge), count)
            plan = RagCheckerPlan(tuple(fitted.chunks), context_text(fitted.chunks))
        dropped = len(sample.context) - len(plan.chunks)
        return [js.Unit(SUITE, sample, METRICS, plan, len(plan.chunks), dropped)]

    def check_config(self, judge: JudgeConfig) -> None:
        """The prompt version exists and its entail.txt declares a known reply and faithfulness check."""
        super().check_config(judge)
        entail_reply(judge.ragchecker.prompt_version)
        per_chunk_faithfulness(judge.ragchecker.prompt_version)

    def evaluate(self, client: LLMClient, unit: js.Unit, judge: JudgeConfig,
                 count: js.Count | None) -> list[js.Judgment]:
        return check_sample(client, judge, unit.sample, unit.plan, count)
