"""`ccrs plan cost`: what a run config will cost before it is submitted.

Calls per stage come from the stage code itself: the readers x retrievers systems of `ccrs run`, and for
every judge suite of the config the units that its `plan()` (judges/suite.py) makes of one sample.
Prompt tokens are calibrated on a small sample of the configured dataset: its questions, reference
answers and passages, chunked with the configured chunker, are rendered through the real reader prompt
and the real judge templates (window fitting included) and counted with the models' tokenizers
(judges/tokens.py). Tokens a prefix cache saves are modelled by replaying the sampled prompts, in stage
order, through an unbounded block cache (vLLM's automatic prefix caching, 16-token blocks), per model.
FLOPs are 2 x parameters x tokens; GPU-hours follow from the accelerator's peak at a stated MFU, wall
time from the serving profile's GPUs (replicas x tensor parallel size). The sample is cost_sample.py's,
the token meter cost_meter.py's, the plan's text cost_render.py's."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from infra.models import default_tokenizer
from infra.serving import ServedModel
from judges.client import ChatRequest
from judges.repeats import planned_judge_units
from judges.readers import extractive_answer, fit_chunks, generation_prompt
from judges.suite import JudgeSuite, Sample, get_suite
from judges.tokens import splits_numbers
from pipelines.config import RunConfig
from pipelines.extensions import PlannedCalls, planned_calls
from pipelines.tools.planning.cost_render import assumptions
from pipelines.tools.planning.cost_sample import CostPlanError, PilotSample, dataset_sample
from pipelines.tools.planning.cost_meter import PromptMeter, kv_block_tokens, truncated
from tasks.generate import RETRIEVER_ORDER, system_label
from tasks.runtime.judge_session import judge_counter, parse_exact_answers
from tasks.runtime.layout import RunLayout

DEFAULT_MFU = 0.3
PEAK_BF16_FLOPS = {"A100": 312e12, "A100-40G": 312e12, "A100-80G": 312e12, "H100": 989e12, "H200": 989e12,
                   "L4": 121e12, "A10G": 125e12}
_PARAMS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.IGNORECASE)


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



# --- stages ---------------------------------------------------------------------------------------------

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


