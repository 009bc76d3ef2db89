"""RAGChecker-style baseline (CCRS paper section 4.1.4): claim extraction + entailment, core P / R / F.

Per sample, with the same judge model as CCRS (5 judge calls when nothing needs a re-ask):
  1. claims of the response          2. claims of the ground truth
  3. response claims entailed by the ground truth -> precision = |entailed| / |response claims|
  4. ground-truth claims entailed by the response -> recall    = |entailed| / |ground-truth claims|
  5. response claims entailed by the context      -> faithfulness = |entailed| / |response claims|
A score that cannot be computed (no claims, unparseable reply after re-asks, failed request) is None with
the reason, never 0. Templates: judges/prompts/ragchecker/<version>/. Backends only build prompts and parse.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from judges import templates
from judges.client import LLMClient
from judges.vera import Usage, ask, context_text, parse_numbered, parse_verdicts

METRICS = ("rc_precision", "rc_recall", "rc_faithfulness")


class RagCheckerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = "smollm2-135m-instruct"
    prompt_version: str = "v1"
    max_tokens: int = Field(default=192, ge=8)
    max_reasks: int = Field(default=1, ge=0)
    max_claims: int = Field(default=10, ge=1)
    max_context_chars: int = Field(default=3000, ge=100)


@dataclass
class RagCheckerInput:
    query_id: str
    system: str
    response: str
    ground_truth: str
    context: list[str]


@dataclass(frozen=True)
class RagCheckerResult:
    query_id: str
    system: str
    scores: dict[str, float | None]
    reasons: dict[str, str | None]
    calls: int
    prompt_tokens: int
    completion_tokens: int
    detail: dict = field(default_factory=dict, hash=False, compare=False)


def load_template(version: str, filename: str) -> str:
    return templates.load_template("ragchecker", version, filename)["task"]


def _neutral(text: str) -> str:
    return re.sub(r"</?\s*(text|reference|claims)\b[^<>]*>?", "[tag]", text, flags=re.IGNORECASE)


def claims_prompt(cfg: RagCheckerConfig, text: str) -> str:
    return load_template(cfg.prompt_version, "claims.txt").replace("{text}", _neutral(text))


def entail_prompt(cfg: RagCheckerConfig, reference: str, claims: list[str]) -> str:
    listing = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
    return (load_template(cfg.prompt_version, "entail.txt").replace("{reference}", _neutral(reference))
            .replace("{claims}", _neutral(listing)))


def parse_claims(text: str | None, max_claims: int) -> list[str] | None:
    """Claims list; [] for an explicit NONE; None when the reply is unusable."""
    if text is not None and text.strip().upper().rstrip(".") == "NONE":
        return []
    claims = parse_numbered(text)[:max_claims]
    return claims or None


def entailment_share(verdicts: list[bool] | None) -> float | None:
    if not verdicts:
        return None
    return sum(verdicts) / len(verdicts)


def check_sample(client: LLMClient, cfg: RagCheckerConfig, sample: RagCheckerInput) -> RagCheckerResult:
    usage = Usage()
    scores: dict[str, float | None] = {m: None for m in METRICS}
    reasons: dict[str, str | None] = {m: None for m in METRICS}
    if not sample.response.strip():
        return RagCheckerResult(sample.query_id, sample.system, {m: 0.0 for m in METRICS},
                                {m: "empty response scores 0 without calling the judge" for m in METRICS}, 0, 0, 0)

    def claims_of(text: str):
        return ask(client, cfg, claims_prompt(cfg, text), lambda t: parse_claims(t, cfg.max_claims), usage,
                   "Write the claims as a numbered list, one per line, or NONE.")

    def entailed(reference: str, claims: list[str]):
        return ask(client, cfg, entail_prompt(cfg, reference, claims), lambda t: parse_verdicts(t, len(claims)), usage,
                   f"Reply with exactly {len(claims)} lines, each like '1. yes' or '1. no'.")

    response_claims, _, r_reason = claims_of(sample.response)
    gt_claims, _, g_reason = claims_of(sample.ground_truth)
    detail: dict = {"response_claims": response_claims, "ground_truth_claims": gt_claims}
    jobs = (("rc_precision", response_claims, r_reason, sample.ground_truth),
            ("rc_recall", gt_claims, g_reason, sample.response),
            ("rc_faithfulness", response_claims, r_reason, context_text(sample.context, cfg.max_context_chars)))
    for metric, claims, claim_reason, reference in jobs:
        if claims is None:
            reasons[metric] = f"claim extraction failed: {claim_reason}"
            continue
        if not claims:
            reasons[metric] = "no claims extracted"
            continue
        verdicts, _, reason = entailed(reference, list(claims))
        detail[metric] = verdicts
        scores[metric] = entailment_share(verdicts)
        reasons[metric] = None if scores[metric] is not None else reason
    return RagCheckerResult(sample.query_id, sample.system, scores, reasons, usage.calls, usage.prompt_tokens,
                            usage.completion_tokens, detail)
