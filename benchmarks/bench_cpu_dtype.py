"""The CPU profile's engine settings side by side: decode speed and whether the same prompt gets the same
reply in another batch, for float32 with vLLM's default core reservation, float32 on every core
(`VLLM_CPU_NUM_OF_RESERVED_CPU=0`, infra/serve_configs/cpu.yaml) and bfloat16 on every core.

    .venv/bin/python benchmarks/bench_cpu_dtype.py            # about 4 minutes on 2 cores

Each variant is a fresh offline vLLM engine (CPU build) in a process of its own, with the CPU profile's
engine settings (dtype and the core reservation replaced), on SmolLM2-135M-Instruct as `ccrs setup` prepares
it. Prompts: the committed BioASQ sample's first questions with three gold snippets, as a judge and a reader
would see them. Speed: 16 chats at once and 4 one after the other, 96 and 64 new tokens each (end of sequence
ignored, so every variant decodes the same number of tokens). Replies: 24 mark prompts and 24 one-sentence
answers, greedy, asked in batches of 4, then one at a time, then in batches of 16 (the prefix cache warm);
a reply that differs from the batch-of-4 one is counted. Prints seconds, the ratio to the first variant and
the counts.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESERVED = "VLLM_CPU_NUM_OF_RESERVED_CPU"
VARIANTS = {  # name -> (dtype, RESERVED or None for vLLM's default)
    "float32, one core kept for the scheduler (vLLM's default)": ("float32", None),
    "float32, every core (the CPU profile)": ("float32", "0"),
    "bfloat16, every core": ("bfloat16", "0"),
}


def _prompts(questions: int) -> list[list[dict]]:
    from shared import bioasq_questions, sample_field

    prompts = []
    for question in bioasq_questions(questions):
        context = " ".join(snippet["text"] for snippet in sample_field(question["snippets"])[:3])
        for task in ("Rate from 0 to 10 how relevant the context is to the question. Reply with the mark.",
                     "Answer the question in one sentence using the context."):
            text = f"{task}\nQuestion: {question['body']}\nContext: {context}"
            prompts.append([{"role": "user", "content": text}])
    return prompts


def measure(dtype: str) -> dict:
    """One variant, in this process (its environment set by the caller)."""
    from dataclasses import fields

    from vllm import LLM, EngineArgs, SamplingParams

    from infra.models import prepare_local_models
    from infra.serving import ServingConfig

    (served,) = ServingConfig.for_profile("cpu").models
    engine_fields = {field.name for field in fields(EngineArgs)}  # the server's flags are not the engine's
    engine = {k: v for k, v in {**served.engine_kwargs, "dtype": dtype}.items() if k in engine_fields}
    started = time.perf_counter()
    llm = LLM(model=str(prepare_local_models()[served.model_id]), **engine)
    result = {"start_s": time.perf_counter() - started}
    prompts = _prompts(24)
    fixed = lambda tokens: SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True)  # noqa: E731
    llm.chat(prompts[:2], fixed(4), use_tqdm=False)  # warm-up
    started = time.perf_counter()
    llm.chat(prompts[:16], fixed(96), use_tqdm=False)
    result["batch16_s"] = time.perf_counter() - started
    started = time.perf_counter()
    for prompt in prompts[:4]:
        llm.chat([prompt], fixed(64), use_tqdm=False)
    result["one_by_one_s"] = time.perf_counter() - started

    greedy = SamplingParams(max_tokens=40, temperature=0.0)
    replies = {}
    for size in (4, 1, 16):
        replies[size] = [out.outputs[0].text for i in range(0, len(prompts), size)
                         for out in llm.chat(prompts[i:i + size], greedy, use_tqdm=False)]
    for kind, first in (("marks", 0), ("sentences", 1)):
        indices = range(first, len(prompts), 2)
        result[f"{kind}_differing"] = sum(replies[4][i] != replies[size][i]
                                          for size in (1, 16) for i in indices)
        result[f"{kind}_compared"] = 2 * len(indices)
    return result


def main() -> None:
    from infra.serving import ServingConfig

    (served,) = ServingConfig.for_profile("cpu").models
    results = {}
    for name, (dtype, reserved) in VARIANTS.items():
        env = {**os.environ, **served.env_vars, "PYTHONPATH": str(REPO)}  # the profile's engine environment
        env.pop(RESERVED, None)
        if reserved is not None:
            env[RESERVED] = reserved
        done = subprocess.run([sys.executable, __file__, "--variant", dtype], env=env, capture_output=True,
                              text=True, timeout=900)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode or not lines:
            sys.exit(f"{name}: failed (rc={done.returncode}): {done.stderr[-2000:]}")
        results[name] = json.loads(lines[-1].removeprefix("RESULT "))
    base = next(iter(results.values()))
    for name, result in results.items():
        print(f"{name}:\n  16 chats x 96 tokens {result['batch16_s']:.2f} s "
              f"({base['batch16_s'] / result['batch16_s']:.2f}x the first), 4 one at a time x 64 tokens "
              f"{result['one_by_one_s']:.2f} s ({base['one_by_one_s'] / result['one_by_one_s']:.2f}x); "
              f"replies differing in another batch: marks "
              f"{result['marks_differing']}/{result['marks_compared']}, "
              f"sentences {result['sentences_differing']}/{result['sentences_compared']}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--variant"]:
        print("RESULT " + json.dumps(measure(sys.argv[2])), flush=True)
    else:
        main()
