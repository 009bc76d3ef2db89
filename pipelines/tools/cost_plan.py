"""`ccrs plan cost`: what a run config will cost before it is submitted.

Calls per stage come from the stage code itself: the readers x retrievers systems of `ccrs run`, and for
every judge suite of the config the units that its `plan()` (judges/suite.py) makes of one sample.
Prompt tokens are calibrated on a small sample of the configured dataset: its questions, reference
answers and passages, chunked with the configured chunker, are rendered through the real reader prompt
and the real judge templates (window fitting included) and counted with the models' tokenizers
(judges/tokens.py). Tokens a prefix cache saves are modelled by replaying the sampled prompts, in stage
order, through an unbounded block cache (vLLM's automatic prefix caching, 16-token blocks), per model.
FLOPs are 2 x parameters x tokens; GPU-hours follow from the accelerator's peak at a stated MFU, wall
time from the serving profile's GPUs (replicas x tensor parallel size)."""
from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from infra.serving import ServedModel
from judges.client import ChatRequest
from judges.repeats import planned_judge_units
from judges.readers import extractive_answer, fit_chunks, generation_prompt
from judges.suite import JudgeSuite, Sample, get_suite
from judges.tokens import CHARS_PER_TOKEN_FALLBACK, splits_numbers, token_counter, token_ids
from pipelines.config import RESOURCE_ROOT, RunConfig
from pipelines.extensions import PlannedCalls, planned_calls
from retrievers.config import DatasetConfig
from retrievers.loaders import load_dataset
from infra.models import default_tokenizer
from tasks.generate import RETRIEVER_ORDER, system_label
from tasks.runtime.judge_session import judge_counter, parse_exact_answers
from tasks.runtime.layout import RunLayout

DEFAULT_MFU = 0.3
# vLLM's default KV-cache block (only whole blocks are reused from the prefix cache): 16 tokens on GPUs,
# 128 on its CPU backend (vllm/platforms/cpu.py); an engine_kwargs block_size overrides both.
BLOCK_TOKENS = 16
CPU_BLOCK_TOKENS = 128
# Chunk width in characters where the chunking tokenizer is not available: English prose averages about 4
# characters a token, the width a real chunk would have. Counting keeps judges.tokens' lower 3 a token
# (CHARS_PER_TOKEN_FALLBACK), which errs towards more tokens: a budget is not overrun.
CHUNK_CHARS_PER_TOKEN = 4
PEAK_BF16_FLOPS = {"A100": 312e12, "A100-40G": 312e12, "A100-80G": 312e12, "H100": 989e12, "H200": 989e12,
                   "L4": 121e12, "A10G": 125e12}
FALLBACK_DATASET = RESOURCE_ROOT / "data" / "bioasq-sample"
_PARAMS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.IGNORECASE)


class CostPlanError(ValueError):
    pass


@dataclass
class StageCost:
    stage: str
    model: str
    calls: int
    prompt_tokens_sent: int
    prompt_tokens_computed: int | None
    output_tokens: int
    parameters: float | None
    flops: float | None = None
    gpus: int | None = None
    accelerator: str | None = None
    gpu_hours: float | None = None
    wall_hours: float | None = None
    notes: list[str] = field(default_factory=list)
    tokens_modelled: bool = True  # False: calls counted, tokens (and so FLOPs and hours) unknown


# --- the prefix cache model ---------------------------------------------------------------------------

class PrefixCache:
    """An unbounded automatic prefix cache: a prompt reuses the longest chain of whole blocks that an
    earlier prompt already computed (chained block hashes, as vLLM keys its blocks); the last token is
    always computed."""

    def __init__(self, block: int = BLOCK_TOKENS):
        self.block = block
        self.seen: set[int] = set()

    def computed(self, ids: list[int] | str) -> int:
        chain, reused, hit = 0, 0, True
        for start in range(0, len(ids) - self.block + 1, self.block):
            chain = hash((chain, tuple(ids[start:start + self.block])))
            if hit and chain in self.seen:
                reused += self.block
            else:
                hit = False
                self.seen.add(chain)
        return len(ids) - min(reused, max(len(ids) - 1, 0))


class PromptMeter:
    """Counts sent and computed prompt tokens of one model's prompts with its tokenizer (characters at
    CHARS_PER_TOKEN_FALLBACK per token when none loads: then the cache works on character blocks)."""

    def __init__(self, tokenizer: str | None, block_tokens: int = BLOCK_TOKENS):
        self.count = token_counter(tokenizer)
        self.ids = token_ids(tokenizer)
        block = block_tokens if self.ids else int(block_tokens * CHARS_PER_TOKEN_FALLBACK)
        self.cache = PrefixCache(block)
        self.exact = self.ids is not None
        self.sent = self.computed = self.prompts = 0

    def add(self, prompt: str) -> None:
        sent = self.count(prompt)
        unit = self.ids(prompt) if self.ids else prompt
        computed = self.cache.computed(unit)
        self.sent += sent
        self.computed += sent if not unit else round(sent * computed / len(unit))
        self.prompts += 1

    def reply_tokens(self, text: str) -> int:
        return max(1, self.count(text) - self.count("")) + 1  # + end-of-sequence


# --- the sample -----------------------------------------------------------------------------------------

@dataclass
class PilotSample:
    queries: list[dict[str, Any]]
    contexts: dict[tuple[str, str], list[str]]  # (query_id, retriever) -> ranked chunks
    dataset: str
    chunker: str
    total_questions: int  # in the whole dataset, the config's limit applied


def dataset_sample(config: RunConfig, size: int, dataset: str | None, seed: int) -> PilotSample:
    path = Path(dataset) if dataset else Path(config.dataset.path)
    if not path.is_absolute() and not path.exists():
        path = RESOURCE_ROOT / path
    data_config = DatasetConfig(path=str(path), format=config.dataset.format if not dataset else "auto")
    if not path.exists():
        raise CostPlanError(f"dataset {path} not found: give --sample-dataset PATH (e.g. {FALLBACK_DATASET})")
    loaded = load_dataset(data_config)
    queries = [q for q in loaded.queries.to_pylist() if q["answer"]][:size]
    if not queries:
        raise CostPlanError(f"dataset {path} has no question with a reference answer to calibrate on")
    passages = loaded.passages
    texts = dict(zip(passages.column("doc_id").to_pylist(), passages.column("text").to_pylist()))
    retrievers = [r for r in RETRIEVER_ORDER if r in config.retrieval.retrievers]
    chunks, chunker = chunked(config, queries, texts, seed)
    rng = random.Random(seed)
    contexts = {}
    for query in queries:
        relevant = [c for d in query["relevant_doc_ids"] for c in chunks.get(d, [])]
        others = [c for d, cs in chunks.items() if d not in set(query["relevant_doc_ids"]) for c in cs]
        for retriever in retrievers:
            ranked = rng.sample(relevant, len(relevant)) + rng.sample(others, len(others))
            contexts[(query["query_id"], retriever)] = ranked[: config.retrieval.top_k]
    total = loaded.queries.num_rows if config.dataset.limit is None else min(config.dataset.limit,
                                                                             loaded.queries.num_rows)
    return PilotSample(queries, contexts, str(path), chunker, total)


def chunked(config: RunConfig, queries: list[dict], texts: dict[str, str],
            seed: int) -> tuple[dict[str, list[str]], str]:
    """Chunks of the sampled questions' relevant passages and of as many other passages again (the
    retrieved context's length is what the cost depends on), with the configured chunker."""
    from retrievers.chunking import chunk_passages
    from retrievers.tokenization import load_tokenizer

    wanted = list(dict.fromkeys(d for q in queries for d in q["relevant_doc_ids"] if d in texts))
    others = [d for d in texts if d not in set(wanted)]
    extra = random.Random(seed).sample(others, min(len(others), max(len(wanted), 4 * config.retrieval.top_k)))
    doc_ids = wanted + extra
    size, overlap = config.chunking.chunk_tokens, config.chunking.overlap_tokens
    try:
        # a Hub tokenizer that is not cached here fails at once instead of retrying the Hub for minutes
        tokenizer = load_tokenizer(config.chunking.tokenizer, local_files_only=True)
        table = chunk_passages(pa.table({"doc_id": doc_ids, "text": [texts[d] for d in doc_ids]}),
                               tokenizer, size, overlap)
        chunker = config.chunking.tokenizer
        pairs = zip(table.column("doc_id").to_pylist(), table.column("text").to_pylist())
    except Exception as exc:  # noqa: BLE001 - a tokenizer that is not available here: character windows
        width, step = size * CHUNK_CHARS_PER_TOKEN, (size - overlap) * CHUNK_CHARS_PER_TOKEN
        chunker = (f"character windows of {width} chars ({config.chunking.tokenizer} unavailable here: "
                   f"{type(exc).__name__})")
        pairs = ((d, texts[d][s:s + width]) for d in doc_ids for s in range(0, max(len(texts[d]), 1), step)
                 if s == 0 or s + overlap * CHUNK_CHARS_PER_TOKEN < len(texts[d]))
    chunks: dict[str, list[str]] = {}
    for doc_id, text in pairs:
        chunks.setdefault(doc_id, []).append(text)
    return chunks, chunker


# --- stages ---------------------------------------------------------------------------------------------

def truncated(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    overhead = count("")
    while text and count(text) - overhead > max_tokens:
        text = text[: int(len(text) * 0.9)]
    return text


def kv_block_tokens(config: RunConfig, model: str | None) -> int:
    """The KV-cache block of the engine serving `model`: its engine_kwargs block_size, else vLLM's default
    for where it runs (a served model without an accelerator runs on vLLM's CPU backend); a model the
    serving profile does not list (an external endpoint) gets the GPU default."""
    served = next((m for m in config.serving.models if m.model_id == model), None)
    if served is None:
        return BLOCK_TOKENS
    default = BLOCK_TOKENS if served.accelerator_type else CPU_BLOCK_TOKENS
    return int(served.engine_kwargs.get("block_size", default))


def reader_stage(config: RunConfig, pilot: PilotSample) -> tuple[list[StageCost], list[Sample]]:
    """Generation: one call per (question, LLM reader, retriever); the judge's samples, with the reference
    answer standing in for an LLM reader's answer (cut at its max_tokens) and the extractive readers'
    real answers."""
    costs, samples = [], []
    retrievers = [r for r in RETRIEVER_ORDER if r in config.retrieval.retrievers]
    for index, reader in enumerate(config.readers):
        llm = reader.kind == "llm"
        meter = (PromptMeter(reader.tokenizer or default_tokenizer(reader.model),
                             kv_block_tokens(config, reader.model)) if llm else None)
        output = 0
        for retriever in retrievers:
            for query in pilot.queries:
                chunks = pilot.contexts[(query["query_id"], retriever)]
                if meter is not None:
                    fitted = fit_chunks(lambda c, q=query: generation_prompt(q["text"], c), chunks,
                                        reader.context_window - reader.max_tokens, meter.count)
                    meter.add(fitted.prompt)
                    answer = truncated(query["answer"], reader.max_tokens, meter.count)
                    output += meter.reply_tokens(f"<answer>{answer}</answer>")
                    chunks = fitted.chunks
                else:
                    answer = extractive_answer(query["text"], chunks, reader.max_sentences)
                samples.append(Sample(query["query_id"], system_label(index, retriever), query["text"],
                                      answer, query["answer"], chunks,
                                      parse_exact_answers(query["exact_answer"])))
        if meter is not None:
            costs.append(StageCost("generate", reader.model or reader.name, meter.prompts, meter.sent,
                                   meter.computed, output, model_parameters(reader.model)))
    return costs, samples


def reply_tokens(suite: JudgeSuite, request: ChatRequest, judge: Any, meter: PromptMeter) -> int:
    """The suite's representative reply, counted; where it has none, the request's budget (an upper
    bound)."""
    reply = suite.reply_estimate(request, judge)
    return request.max_tokens if reply is None else meter.reply_tokens(reply)


def continuations(judge: Any, tokenizer: str | None) -> tuple[int, int, str]:
    """(requests, prompts, why): the continuations a judgment asks under `scoring: expected`
    (judges/scoring.py). Where the judge's tokenizer splits numbers into digits, each likely first digit
    other than the greedy one is a continuation, counted at the cap `max_expansions` (an upper bound: the
    CPU demo's judge measured 7.8 of 8), each one request (`expected.continuation: chat`) or all of them
    one (`batched`: one round of a 0-100 walk); where numbers are single tokens the walk reads the reply's
    own log-probabilities (none)."""
    cap = judge.expected.max_expansions
    split = splits_numbers(tokenizer)
    if split is False:
        return 0, 0, "the judge's tokenizer has single-token numbers: no continuation requests counted"
    why = "splits numbers into digits" if split else "was not available here (assumed to split digits)"
    counted = (f"the judge's tokenizer {why}: {cap} continuations a judgment counted (the cap "
               "expected.max_expansions, an upper bound), each its prompt again (prefix-cached) + 1 token")
    if judge.expected.continuation == "batched":
        return min(cap, 1), cap, f"{counted}, in one request (expected.continuation: batched)"
    return cap, cap, counted.replace("continuations a judgment", "continuation requests a judgment")


def continuation_prompt(prompt: str, reply: str | None) -> str:
    """What a continuation request sends, for counting: the prompt, then the reply up to its first digit."""
    digit = next((i for i, ch in enumerate(reply or "") if ch.isdigit()), None)
    return f"{prompt}\n\n{reply[:digit + 1] if digit is not None else '5'}"


def judge_stages(config: RunConfig, samples: list[Sample],
                 planned: list[tuple[str, str | None, PlannedCalls]] | None = None) -> list[StageCost]:
    """Per judge suite, the units the judge stage plans of each sample (planned_judge_units), their prompts
    metered; `planned`: the run extensions' planned calls (pipelines.extensions.planned_calls), whose notes
    on the judge stages' calls are added."""
    extension_notes = [calls.judge_note for _, _, calls in (planned_calls(config) if planned is None
                                                             else planned) if calls.judge_note]
    judge = config.judge
    count = judge_counter(judge)
    tokenizer = judge.tokenizer or default_tokenizer(judge.model)
    costs = []
    for name in config.judges:
        suite = get_suite(name)
        meter = PromptMeter(tokenizer, kv_block_tokens(config, judge.model))
        calls = output = 0
        modelled = True
        notes: list[str] = []
        continued: tuple[int, int, str] | None = None  # (requests, prompts, why) under expected marks
        for sample in samples:
            for unit in planned_judge_units(suite, sample, judge, config.client.seed, count):
                if not any(suite.metrics[name].templates for name in unit.metrics):
                    continue  # computed without the judge (gqm_bertscore): no call, no token
                calls += 1
                request = suite.single_request(unit, judge)
                if request is None:
                    modelled = False
                    continue
                prompt = "\n\n".join(m["content"] for m in request.messages)
                meter.add(prompt)
                output += reply_tokens(suite, request, judge, meter)
                if request.top_logprobs:  # the suite scores expected marks
                    continued = continued or continuations(judge, tokenizer)
                    requests, prompts, _ = continued
                    continuation = continuation_prompt(prompt, suite.reply_estimate(request, judge))
                    for _ in range(prompts):
                        meter.add(continuation)
                    calls, output = calls + requests, output + prompts
        if continued:
            notes.append(f"{name}: scoring: expected; {continued[2]}")
        notes += [f"{name}: {note}" for note in extension_notes]
        if not modelled:
            notes.append(f"{name}: its calls depend on each other's replies; counted are its units (at least "
                          "one call each), not their tokens")
        costs.append(StageCost(RunLayout.judge_stage(name), judge.model, calls, meter.sent if modelled else 0,
                               meter.computed if modelled else None, output, model_parameters(judge.model),
                               notes=notes, tokens_modelled=modelled))
    return costs


def extension_stage(config: RunConfig, stage: str, planned: PlannedCalls) -> StageCost:
    """A run extension's own judge calls (its planned requests), counted through the judge's tokenizer and
    prefix cache model, replies at their budgets; they do not grow with the run's questions."""
    judge = config.judge
    tokenizer = judge.tokenizer or default_tokenizer(judge.model)
    meter = PromptMeter(tokenizer, kv_block_tokens(config, judge.model))
    for request in planned.requests:
        meter.add("\n\n".join(m["content"] for m in request.messages))
    return StageCost(stage, judge.model, len(planned.requests), meter.sent, meter.computed,
                     sum(r.max_tokens for r in planned.requests), model_parameters(judge.model),
                     notes=[planned.note] if planned.note else [])


# --- scaling and hardware -------------------------------------------------------------------------------

def model_parameters(model: str | None) -> float | None:
    """Parameters from the model id ("Meta-Llama-3-70B-Instruct" -> 70e9, "smollm2-135m" -> 135e6)."""
    found = _PARAMS.findall(model or "")
    if not found:
        return None
    number, unit = found[-1]
    return float(number) * (1e9 if unit.lower() == "b" else 1e6)


def scaled(cost: StageCost, factor: float) -> StageCost:
    cost.calls = round(cost.calls * factor)
    cost.prompt_tokens_sent = round(cost.prompt_tokens_sent * factor)
    if cost.prompt_tokens_computed is not None:
        cost.prompt_tokens_computed = round(cost.prompt_tokens_computed * factor)
    cost.output_tokens = round(cost.output_tokens * factor)
    return cost


def add_hardware(cost: StageCost, served: dict[str, ServedModel], mfu: float) -> StageCost:
    if cost.parameters is None:
        cost.notes.append(f"{cost.model}: parameter count not in the model id; no FLOPs")
        return cost
    if not cost.tokens_modelled:  # zero counted tokens would read as free compute
        cost.notes.append(f"{cost.stage}: tokens not modelled, so no FLOPs or hours (totals: n/a)")
        return cost
    computed = cost.prompt_tokens_sent if cost.prompt_tokens_computed is None else cost.prompt_tokens_computed
    cost.flops = 2.0 * cost.parameters * (computed + cost.output_tokens)
    model = served.get(cost.model)
    peak = PEAK_BF16_FLOPS.get(model.accelerator_type or "") if model else None
    if model is None or peak is None:
        cost.notes.append(f"{cost.model}: no GPU in the serving profile; FLOPs only")
        return cost
    cost.accelerator = model.accelerator_type
    cost.gpus = model.tensor_parallel_size * model.max_replicas
    cost.gpu_hours = cost.flops / (peak * mfu) / 3600.0
    cost.wall_hours = cost.gpu_hours / cost.gpus
    return cost


def cost_plan(config: RunConfig, questions: int | None = None, sample_size: int = 8,
              sample_dataset: str | None = None, mfu: float = DEFAULT_MFU, seed: int = 0) -> dict[str, Any]:
    if not 0.0 < mfu <= 1.0:
        raise CostPlanError(f"MFU must lie in (0, 1], got {mfu}")
    pilot = dataset_sample(config, sample_size, sample_dataset, seed)
    if questions is None and sample_dataset:
        raise CostPlanError("give --questions N when calibrating on another dataset than the config's")
    n = questions or pilot.total_questions
    reader_costs, samples = reader_stage(config, pilot)
    factor = n / len(pilot.queries)
    served = {m.model_id: m for m in config.serving.models}
    planned = planned_calls(config)
    own = [(at == "before_judge", add_hardware(extension_stage(config, stage, calls), served, mfu))
           for stage, at, calls in planned if calls.requests]  # their calls do not grow with the questions
    judging = [add_hardware(scaled(c, factor), served, mfu) for c in judge_stages(config, samples, planned)]
    stages = ([add_hardware(scaled(c, factor), served, mfu) for c in reader_costs]
              + [cost for before, cost in own if before] + judging
              + [cost for before, cost in own if not before])
    return {"config": config.name, "questions": n, "systems": len(samples) // len(pilot.queries),
            "serving_profile": config.serving.profile, "mfu": mfu,
            "calibration": {"dataset": pilot.dataset, "questions": len(pilot.queries),
                            "chunker": pilot.chunker},
            "stages": [asdict(c) for c in stages], "totals": totals(stages),
            "assumptions": assumptions(config, mfu, planned)}


def totals(stages: list[StageCost]) -> dict[str, Any]:
    def total(key: str) -> float | None:
        values = [getattr(c, key) for c in stages]
        return None if any(v is None for v in values) else sum(values)

    by_stage: dict[str, float] = {}
    for c in stages:  # readers run side by side: a stage lasts as long as its slowest model
        if c.wall_hours is not None:
            by_stage[c.stage] = max(by_stage.get(c.stage, 0.0), c.wall_hours)
    return {"calls": total("calls"), "prompt_tokens_sent": total("prompt_tokens_sent"),
            "prompt_tokens_computed": total("prompt_tokens_computed"),
            "output_tokens": total("output_tokens"),
            "flops": total("flops"), "gpu_hours": total("gpu_hours"),
            "wall_hours": sum(by_stage.values())
            if by_stage and all(c.tokens_modelled for c in stages) else None}


def assumptions(config: RunConfig, mfu: float,
                planned: list[tuple[str, str | None, PlannedCalls]] = ()) -> list[str]:
    return [
        "calls: every (question, system) is judged once per unit of its suite's plan()"
        + "".join(calls.calls_clause for _, _, calls in planned)
        + "; re-asks after an invalid reply and transport retries are not counted (each re-ask resends the "
        "prompt plus the reply)",
        "prompts: calibrated on the sample's questions, reference answers and passages, chunked with the "
        "configured chunker; a retriever's context is the question's relevant chunks first, then other "
        "chunks, top_k in all, fitted to the window as the stages do",
        "responses: an LLM reader answers like the reference answer (cut at its max_tokens); extractive "
        "readers give their real answer",
        "prefix reuse: vLLM automatic prefix caching with an unbounded cache and its default blocks (16 "
        "tokens on GPUs, 128 on vLLM's CPU backend, or the model's engine_kwargs block_size), per model, "
        f"prompts in stage order; the judge's shared_prefix is {config.judge.ccrs.shared_prefix}: "
        + ("the context comes first, so one (question, retriever) context prefix is computed once for the "
           "three readers' systems and every context metric" if config.judge.ccrs.shared_prefix else
           "each metric's own intro comes first, so a context is reused only across the readers that share "
           "a retriever, per metric"),
        "expected marks (judge.scoring: expected): continuation requests as each stage's note says; "
        "they are counted as calls, their prompts through the prefix cache model, 1 output token each",
        "output tokens: a CCRS reply is a bare score (its JSON object under structured output) plus the "
        "end of sequence; other suites' replies and justifications count at their budget (an upper bound); "
        "readers: the reference answer's length",
        f"FLOPs = 2 x parameters (from the model id) x (computed prompt + output tokens); GPU-hours at "
        f"{mfu:.0%} MFU of the accelerator's dense BF16 peak; wall time with every replica of the serving "
        "profile (max_replicas x tensor_parallel_size GPUs) busy; readers run side by side",
    ]


def render(plan: dict[str, Any]) -> str:
    lines = [f"Cost plan of {plan['config']}: {plan['questions']:,} questions x {plan['systems']} systems "
             f"(serving profile {plan['serving_profile']}); calibrated on {plan['calibration']['questions']} "
             f"questions of {plan['calibration']['dataset']}",
             "",
             "| stage | model | calls | prompt tokens sent | computed (prefix reuse) | output tokens "
             "| PFLOPs | GPUs | GPU-hours | wall hours |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in plan["stages"]:
        lines.append(f"| {c['stage']} | {c['model']} | {c['calls']:,} | {c['prompt_tokens_sent']:,} | "
                     f"{_num(c['prompt_tokens_computed'])} | {c['output_tokens']:,} | "
                     f"{_num(c['flops'], 1e15, '.1f')} | {_num(c['gpus'])} | "
                     f"{_num(c['gpu_hours'], 1, '.1f')} | "
                     f"{_num(c['wall_hours'], 1, '.2f')} |")
    t = plan["totals"]
    lines.append(f"| total | | {_num(t['calls'])} | {_num(t['prompt_tokens_sent'])} | "
                 f"{_num(t['prompt_tokens_computed'])} | {_num(t['output_tokens'])} | "
                 f"{_num(t['flops'], 1e15, '.1f')} | | {_num(t['gpu_hours'], 1, '.1f')} | "
                 f"{_num(t['wall_hours'], 1, '.2f')} |")
    lines += ["", "Assumptions:"] + [f"- {a}" for a in plan["assumptions"]]
    notes = [n for c in plan["stages"] for n in c["notes"]]
    lines += [f"- note: {n}" for n in dict.fromkeys(notes)]
    lines.append(f"- chunker: {plan['calibration']['chunker']}")
    return "\n".join(lines)


def _num(value: float | None, scale: float = 1.0, fmt: str = ",.0f") -> str:
    return "n/a" if value is None else format(value / scale, fmt)
