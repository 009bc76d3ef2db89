"""The cost plan said: its assumptions and its Markdown table (`ccrs plan cost`, the plan printed before a
cluster run)."""
from __future__ import annotations

from typing import Any

from pipelines.config import RunConfig
from pipelines.extensions import PlannedCalls


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
