"""The shape every judge suite has: registered metrics, a plan per sample, one ask/parse/re-ask loop, one
judgment record, and a registry (like lm-evaluation-harness' registry; metrics like ir_measures' measures).

A suite (CCRS, GroUSE, VERA, the RAGChecker-style baseline) subclasses `JudgeSuite`: its `Metric` table
(each metric declared once: scale, inputs, templates; `Metric.normalize` maps a mark to [0, 1]), `plan`
(the units of work for one sample: one per metric, or one per sample when its calls depend on each other)
and `evaluate` (ask the judge through `ask` and turn the replies into `Judgment`s, built with
`Judgment.of`). The base class holds the defaults (prompt version, config check, metric selection, window
budget, `not_judged`, `single_request`, `reply_estimate`); defining the class registers it. The stage
(tasks/judge.py) does the rest the same way for every suite: fan-out, cache, checkpoints, failure
accounting, output files; the cost plan reads `single_request` and `reply_estimate`, so no caller names a
suite.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

from judges import templates
from judges.client import ChatRequest, ChatResult, CompletionResult, LLMClient, LLMRequestError, TokenLogprob
from infra.plugins import package_modules

Count = Callable[[str], int]

# Every tag name any template uses to delimit untrusted text. Untrusted text is rewritten so that it can
# neither open nor close one of them (one list for all suites: a tag added to a template goes here).
DELIMITER_TAGS = ("question", "context", "chunk", "response", "ground_truth", "references", "reference",
                  "answer_1", "answer_2", "answer", "statements", "text", "claims")
_DELIMITER = re.compile(rf"<(/?)\s*({'|'.join(sorted(DELIMITER_TAGS, key=len, reverse=True))})\b([^<>]*)>?",
                        re.IGNORECASE)


def neutralize(text: str) -> str:
    """`<context>`, `</chunk rank="2">` ... inside untrusted text become `[context]`, `[/chunk rank="2"]`."""
    return _DELIMITER.sub(lambda m: f"[{m.group(1)}{m.group(2)}{m.group(3)}]", text)


@dataclass(frozen=True)
class Metric:
    """One registered metric, declared once: everything else (the prompt's inputs, the parser's range, the
    structured-output schema, the [0, 1] score) derives from it. `name` is its column in scores.parquet
    (unique over all suites); `scale` the judge's own mark, (low, high), mapped to [0, 1] by `normalize`;
    `inputs` in the order the prompt shows them; `templates` the files under
    judges/prompts/<suite>/<version>/; `judged` is False for a metric derived from other marks (no call of
    its own); `higher_is_better` the direction of the score."""

    suite: str
    name: str
    scale: tuple[float, float]
    inputs: tuple[str, ...]
    templates: tuple[str, ...]
    description: str
    judged: bool = True
    higher_is_better: bool = True
    reads: tuple[str, ...] = ()  # sample fields the scoring reads beyond the prompt's (AC's exact answers)

    @property
    def sample_fields(self) -> tuple[str, ...]:
        """Every field of `Sample` a judgment of this metric depends on (part of its cache key)."""
        return self.inputs + self.reads

    def normalize(self, value: float | None, weight: float = 1.0) -> float | None:
        """The judge's mark on `scale` -> its score in [0, 1] (times `weight`, e.g. AC's 1 - lambda, applied
        before the division so that a weighted share is computed to the last bit as it always was); a
        missing mark (None: null, not computable) stays None."""
        if value is None:
            return None
        low, high = self.scale
        return float(weight * (value - low) / (high - low))


@dataclass
class Sample:
    """The untrusted texts of one (query, system): `context` ranked, best chunk first."""

    query_id: str
    system: str
    question: str
    response: str
    ground_truth: str
    context: list[str]
    exact_answers: list[str] = field(default_factory=list)
    # further answers the reader sampled for the same prompt (readers[].samples > 1; gqm_self_consistency)
    sampled_responses: tuple[str, ...] = ()


@dataclass(kw_only=True)
class Judgment:
    """One metric of one sample, the same record for every suite. `score` in [0, 1] feeds the statistics
    (None when not computable); `llm_score` is the judge's own mark on the metric's scale (None where
    the metric has none, e.g. a share of verdicts); status: ok | failed | empty_response | skipped.
    `scoring` says what `score` was computed from (judges/scoring.py): "integer" (the reply's integer,
    `llm_score`), "expected" (`llm_score_expected`, the probability-weighted mark; `llm_score` stays the
    argmax integer beside it) or "integer_fallback" (expected asked for, but `score_mass`, the
    probability on allowed marks, was too low or unknown: the integer is used, the reason in `detail`)."""

    query_id: str
    system: str
    suite: str
    metric: str
    score: float | None = None
    llm_score: int | None = None
    em: float | None = None
    status: str
    reason: str | None = None
    raw: str | None = None
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_version: str
    judge_model: str
    prefix_cached_tokens: int = 0  # of prompt_tokens, served from the judge server's prefix cache
    n_context_chunks: int = 0
    n_context_truncated: int = 0
    cached: bool = False
    detail: str | None = None
    scoring: str = "integer"
    llm_score_expected: float | None = None
    score_mass: float | None = None
    repeat: int | None = None  # which of the judge.repeats.k judgments of (query, system, metric); None: k=1

    COLUMNS: ClassVar[tuple[str, ...]]

    @classmethod
    def of(cls, sample: Sample, metric: Metric, *, status: str, prompt_version: str, judge_model: str,
           usage: Usage | None = None, **fields: Any) -> Judgment:
        """The keyword factory every suite builds its records with: identity from the sample and the
        metric's declaration, cost from `usage` (none: nothing was asked), the rest by name."""
        usage = usage or Usage()
        return cls(query_id=sample.query_id, system=sample.system, suite=metric.suite, metric=metric.name,
                   status=status, prompt_version=prompt_version, judge_model=judge_model,
                   attempts=usage.attempts, prompt_tokens=usage.prompt_tokens,
                   completion_tokens=usage.completion_tokens, prefix_cached_tokens=usage.cached_tokens,
                   **fields)

    def record(self) -> dict[str, Any]:
        # Every field is a scalar: a plain copy is asdict()'s result at a tenth of its cost (asdict
        # deep-copies recursively; three records per judgment at paper scale made that seconds).
        return {name: getattr(self, name) for name in _JUDGMENT_FIELDS}

    @property
    def transport_failed(self) -> bool:
        return self.status == "failed" and (self.reason or "").startswith("request failed")


_JUDGMENT_FIELDS = tuple(f.name for f in fields(Judgment))  # the instance fields (COLUMNS is a ClassVar)
Judgment.COLUMNS = _JUDGMENT_FIELDS


def detail_json(**detail: Any) -> str | None:
    return json.dumps(detail, default=str, sort_keys=True) if detail else None


@dataclass(frozen=True)
class Repeat:
    """Which of a judgment's `judge.repeats.k` asks a unit is (planned by judges/repeats.py). A sampled
    repeat (mode "sample") sends every request at `temperature` with its own `seed`; a perturbed one (mode
    "perturb") is greedy, its sample's context the kept chunks in another order."""

    index: int
    mode: str
    temperature: float = 0.0
    seed: int | None = None

    @property
    def sampled(self) -> bool:
        return self.mode == "sample"

    def key(self) -> dict[str, Any] | None:
        """What the unit's cache key adds (judges/caching.py): a sampled repeat's mode, index and temperature
        (its seed follows from the index, the client seed and the unit's texts, keyed already); nothing for
        a perturbed one, whose chunk order is in the texts the key hashes."""
        if not self.sampled:
            return None
        return {"mode": self.mode, "index": self.index, "temperature": self.temperature}


@dataclass
class Unit:
    """One unit of work of a suite for one sample: the metrics it yields and a suite-specific `plan` (the
    fitted context, the first request ...). `id` names it in a stage's checkpoint; its judgment cache key
    is made in one place, judges/caching.py, from what its metrics declare they read. `repeat`: which
    repeat it is when judge.repeats.k > 1 (None: the one judgment)."""

    suite: str
    sample: Sample
    metrics: tuple[str, ...]
    plan: Any
    n_context_chunks: int = 0
    n_context_truncated: int = 0
    repeat: Repeat | None = None

    @property
    def id(self) -> str:
        """Stable within a run: the checkpoint's item id."""
        base = f"{self.sample.system}/{self.sample.query_id}/{'+'.join(self.metrics)}"
        return base if self.repeat is None else f"{base}#{self.repeat.index}"

    @property
    def prefix_group(self) -> str:
        """Units whose prompts can share a long prefix: the same question with the same retrieved context
        (one question x retriever: every reader's sample, every metric)."""
        payload = json.dumps([self.sample.query_id, self.sample.question, self.sample.context])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


# --- the one ask / parse / re-ask loop ----------------------------------------------------------------

@dataclass(frozen=True)
class Parsed:
    """A parser's verdict on one reply: ok with a value (which may be None where null is allowed), or not
    ok with the reason that the re-ask quotes."""

    ok: bool
    value: Any = None
    reason: str | None = None


@dataclass
class Usage:
    """What the asks of one judgment cost: asks (1 + re-asks, plus transport attempts of a failed one)."""

    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the server's prefix cache

    def add(self, result: ChatResult | CompletionResult) -> None:
        """One more successful call (e.g. a continuation request of an expected mark)."""
        self.attempts += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cached_tokens += result.cached_tokens


@dataclass(frozen=True)
class Answer:
    """`messages`: the dialogue of the last ask (with its re-asks); `logprobs`: what the server returned
    for its reply, when the request asked for them; `prompt_text`: that ask's prompt as the server
    rendered it, when the request asked for it (vLLM's return_prompt_text)."""

    ok: bool
    value: Any
    raw: str | None
    reason: str | None
    messages: tuple[dict[str, str], ...] = ()
    logprobs: list[TokenLogprob] | None = None
    prompt_text: str | None = None


def reply_budget(messages: Sequence[dict[str, str]], wanted: int, window: int | None,
                 count: Count | None) -> int:
    """New tokens to ask for: `wanted`, lowered so that prompt + reply fit the judge's window."""
    if count is None or window is None:
        return wanted
    used = count("\n\n".join(m["content"] for m in messages)) + 8 * len(messages)
    return max(16, min(wanted, window - used))


def ask(client: LLMClient, request: ChatRequest, parse: Callable[[str | None], Parsed],
        reask: Callable[[str], str], max_reasks: int, usage: Usage, window: int | None = None,
        count: Count | None = None) -> Answer:
    """Ask, parse, and re-ask at most `max_reasks` times with `reask(reason)` appended to the dialogue.
    A request failure ends at once with reason "request failed: ..." (the stage may requeue it); an
    invalid reply after every re-ask keeps the last raw reply and the reason."""
    messages = list(request.messages)
    raw, reason = None, "not asked"
    for _ in range(max_reasks + 1):
        max_tokens = reply_budget(messages, request.max_tokens, window, count)
        try:
            result = client.chat(replace(request, messages=messages, max_tokens=max_tokens))
        except LLMRequestError as exc:
            usage.attempts += exc.attempts or 1
            return Answer(False, None, raw, f"request failed: {exc}")
        usage.attempts += 1
        usage.prompt_tokens += result.prompt_tokens
        usage.completion_tokens += result.completion_tokens
        usage.cached_tokens += result.cached_tokens
        raw = result.text
        parsed = parse(raw)
        if parsed.ok:
            return Answer(True, parsed.value, raw, None, tuple(messages), result.logprobs, result.prompt_text)
        reason = parsed.reason or "invalid"
        messages = list(request.messages) + [{"role": "assistant", "content": raw or ""},
                                             {"role": "user", "content": reask(reason)}]
    return Answer(False, None, raw, f"invalid after {max_reasks} re-asks: {reason}")


def user_request(model: str, prompt: str, max_tokens: int,
                 extra_body: dict[str, Any] | None = None) -> ChatRequest:
    return ChatRequest(model=model, messages=[{"role": "user", "content": prompt}], temperature=0.0,
                       max_tokens=max_tokens, extra_body=extra_body or {})


# --- the suite base class and the registry ------------------------------------------------------------

EMPTY_REASON = "empty response scores 0 without calling the judge"
WINDOW_MARGIN = 64  # tokens of the judge's window kept free for the chat template
NO_PROMPT_VERSION = "-"  # the prompt version of a suite without a settings block (no templates)


class JudgeSuite(ABC):
    """The base of every judge suite: a subclass declares `name`, `description` and its metric table
    (`metrics`, display order) and implements `plan` and `evaluate`; defining the class registers it (no
    call, no list to edit: `suites()` imports every module of judges/ that defines a suite). The defaults
    read the suite's settings block of the judge config (`judge.<name>`: prompt_version, max_tokens) and
    can be overridden where a suite differs (CCRS: its metric selection, reply budget, layout check)."""

    name: ClassVar[str]
    description: ClassVar[str]
    metrics: ClassVar[dict[str, Metric]]
    rank: ClassVar[int] = 100  # place in the registry's display order (ties: by name)
    reads_scoring: ClassVar[bool] = False  # judge.scoring: expected applies to this suite
    cache_salt: ClassVar[str] = ""  # code-level choices a judgment depends on beyond config and prompts
    empty_score: ClassVar[float | None] = 0.0  # what an empty response scores without a call; None: no score

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register the new suite (ABCMeta has not marked a class abstract yet when this runs: the check
        that plan and evaluate are implemented is made here)."""
        super().__init_subclass__(**kwargs)
        missing = [name for name, member in vars(JudgeSuite).items()
                   if getattr(member, "__isabstractmethod__", False) and getattr(cls, name) is member]
        if missing:
            raise TypeError(f"suite {cls.__name__} does not implement {missing}")
        register_suite(cls())

    @abstractmethod
    def plan(self, sample: Sample, judge: Any, seed: int, count: Count) -> list[Unit]:
        """The units of work of one sample, each with its content key (the judgment cache's key)."""

    @abstractmethod
    def evaluate(self, client: LLMClient, unit: Unit, judge: Any, count: Count | None) -> list[Judgment]:
        """Ask through `ask` and turn the replies into one `Judgment` per metric of the unit."""

    def options(self, judge: Any) -> Any:
        """The suite's settings block of the judge config (`judge.<name>`), None where it has none."""
        return getattr(judge, self.name, None)

    def prompt_version(self, judge: Any) -> str:
        options = self.options(judge)
        return options.prompt_version if options is not None else NO_PROMPT_VERSION

    def selected_metrics(self, judge: Any) -> tuple[str, ...]:
        """Every metric of the table, in its order."""
        return tuple(self.metrics)

    def bind_run(self, judge: Any, files: Mapping[str, Path]) -> Any:
        """The judge config this suite judges a run with, given the run's files by name (`chunks`,
        `retrieved`; a file may not exist): the default, unchanged; a suite that reads a run-level input
        (gqm_bertscore's idf corpus) records it in its settings block, so that the stage key covers it."""
        return judge

    def check_config(self, judge: Any) -> None:
        """Raise ValueError, naming the setting, when the judge config cannot be run by this suite (a prompt
        version that does not exist, a layout or a template it lacks): a config error before any work."""
        if self.options(judge) is not None:
            check_prompt_version_exists(self, judge)

    def reply_tokens(self, judge: Any) -> int:
        """The reply budget of one call (the settings block's max_tokens)."""
        return self.options(judge).max_tokens

    def window_budget(self, judge: Any) -> int:
        """Prompt tokens left in the judge's window once the reply and a chat-template margin are free."""
        return judge.context_window - self.reply_tokens(judge) - WINDOW_MARGIN

    def judgment(self, sample: Sample, judge: Any, metric: str, *, status: str, **fields: Any) -> Judgment:
        """`Judgment.of` for one metric of this suite under this judge config."""
        return Judgment.of(sample, self.metrics[metric], status=status,
                           prompt_version=self.prompt_version(judge), judge_model=judge.model, **fields)

    def not_judged(self, sample: Sample, judge: Any, status: str, reason: str) -> list[Judgment]:
        """The records of a sample that is not sent, one per selected metric: an empty response scores
        `empty_score` (reason EMPTY_REASON), anything else (a failed generation) has no score."""
        score = self.empty_score if status == "empty_response" else None
        if score is not None:
            reason = EMPTY_REASON
        return [self.judgment(sample, judge, metric, status=status, reason=reason, score=score)
                for metric in self.selected_metrics(judge)]

    def single_request(self, unit: Unit, judge: Any) -> ChatRequest | None:
        """The one request a planned unit sends when it makes a single call; None (the default) when a
        unit's calls depend on each other's replies (then nothing before the replies says what they are)."""
        return None

    def reply_estimate(self, request: ChatRequest, judge: Any) -> str | None:
        """A representative reply to `request` (the cost plan counts its tokens), or None (the default):
        count the request's whole reply budget (max_tokens, an upper bound)."""
        return None


SUITE_METHODS = tuple(sorted(name for name, member in vars(JudgeSuite).items()
                             if callable(member) and not name.startswith("_")))
_SUITES: dict[str, JudgeSuite] = {}
# A module of judges/ defines a suite when it declares a subclass of JudgeSuite at its top level
# (`JudgeSuite` or, through a module alias, `js.JudgeSuite`).
_DEFINES_SUITE = re.compile(r"^class \w+\((?:\w+\.)?JudgeSuite\)", re.MULTILINE)


def check_prompt_version_exists(suite: JudgeSuite, judge: Any) -> None:
    """The check every suite makes: its configured prompt version is a folder of judges/prompts/<suite>/."""
    version, known = suite.prompt_version(judge), templates.versions(suite.name)
    if version not in known:
        raise ValueError(f"{suite.name} prompt version {version!r} does not exist; choose from {list(known)}")


def register_suite(suite: JudgeSuite) -> JudgeSuite:
    """Done by defining a JudgeSuite subclass; callable for an object that answers every method."""
    missing = [name for name in SUITE_METHODS if not callable(getattr(suite, name, None))]
    if missing:
        raise TypeError(f"suite {getattr(suite, 'name', suite)!r} lacks the JudgeSuite methods {missing}")
    taken = {m for other in _SUITES.values() if other.name != suite.name for m in other.metrics}
    clash = taken & set(suite.metrics)
    if clash:
        raise ValueError(f"suite {suite.name!r}: metric names {sorted(clash)} are taken by another suite")
    if any(metric.suite != suite.name for metric in suite.metrics.values()):
        raise ValueError(f"suite {suite.name!r} declares a metric of another suite")
    _SUITES[suite.name] = suite
    return suite


def unregister_suite(name: str) -> None:
    """Take a suite out of the registry (tests that define a suite of their own)."""
    _SUITES.pop(name, None)


def suite_modules() -> tuple[str, ...]:
    """The modules of judges/ that define a suite, found on disk: a new suite module needs no list."""
    return package_modules(__package__, Path(__file__).parent, _DEFINES_SUITE)


def suites() -> dict[str, JudgeSuite]:
    """Every registered suite in display order (`rank`, then name); importing the suite modules
    registers them."""
    for module in suite_modules():
        importlib.import_module(module)
    return dict(sorted(_SUITES.items(), key=lambda item: (item[1].rank, item[0])))


def get_suite(name: str) -> JudgeSuite:
    registered = suites()
    if name not in registered:
        raise KeyError(f"unknown judge suite {name!r}; registered: {', '.join(registered)}")
    return registered[name]


def all_metrics(names: Iterable[str] | None = None) -> list[Metric]:
    """Metrics of the given suites (all by default) in registry order: the display order everywhere."""
    chosen = list(names) if names is not None else list(suites())
    return [metric for name in chosen for metric in get_suite(name).metrics.values()]


def metric_order() -> list[str]:
    return [metric.name for metric in all_metrics()]


def suite_membership() -> dict[str, list[str]]:
    """{suite: its metric names} from the judge registry, as plain data for stats/ (which imports nothing
    of the project): it groups the discriminative power comparison (the CCRS paper's Table 3)."""
    return {name: list(suite.metrics) for name, suite in suites().items()}
