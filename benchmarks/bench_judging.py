"""Judging throughput: our stage (shared client -> Ray fan-out -> Ray Serve LLM -> vLLM) against vLLM's
own offline `LLM.chat` on the same prompts, model and sampling parameters, in one run.

    .venv/bin/python benchmarks/bench_judging.py [--n 48] [--shared-prefix] [--structured-output]
        [--prefix-order]

Both sides get the same CCRS judge requests (one ask each: max_reasks=0, cache off), temperature 0,
the same max_tokens and seed. The stage is timed from the first request to the last reply; the offline
side from the `LLM.chat` call to its return (engine start-up excluded on both sides, one warm-up request
each). Prints requests/s for both and the ratio stage/offline (target >= 0.8). `--prefix-order` sends the
requests in the judge stage's prefix-aware order (tasks/judge.py ordered_for_prefix_reuse: units of one
question x retriever together, whole groups per shard); the offline side gets the same order.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "tests"))  # after REPO: tests/infra, tests/tasks ... must not shadow the packages


def build_tasks(n: int, judge_cfg, client_cfg, tmp: Path):
    """n judge units over real BioASQ questions (extractive answers), cycling through the judge's metrics:
    the CCRS suite's own plan (judges/suite.py `get_suite("ccrs").plan`), one unit (one request) each."""
    import pandas as pd
    from conftest import write_bioasq_inputs

    from judges.config import ReaderConfig
    from judges.suite import get_suite
    from judges.tokens import token_counter
    from tasks.generate import build_items, generate_extractive
    from tasks.runtime.judge_session import load_samples

    queries_path, retrieved_path = write_bioasq_inputs(tmp, limit=32, chunks_per_query=3)
    queries, retrieved = pd.read_parquet(queries_path), pd.read_parquet(retrieved_path)
    items = build_items(queries, retrieved, [ReaderConfig(name="x", kind="extractive")], top_k=3)
    generations = pd.DataFrame([generate_extractive(item) for item in items])
    samples, _ = load_samples(queries, retrieved, generations, top_k=3)
    samples = [s for s in samples if s.response.strip()]
    count = token_counter(str(_model_dir()))
    suite = get_suite("ccrs")
    per_sample = len(judge_cfg.ccrs.metrics)
    planned: dict[int, list] = {}
    tasks = []
    for i in range(n):
        s = (i // per_sample) % len(samples)
        if s not in planned:
            planned[s] = suite.plan(samples[s], judge_cfg, client_cfg.seed, count)
        tasks.append(planned[s][i % per_sample])
    return tasks


def _model_dir() -> Path:
    from infra.models import prepare_local_models

    return prepare_local_models()["smollm2-135m-instruct"]


class Evaluate:
    """The judge stage's per-unit work (tasks/judge.py): the suite's evaluate, one judgment per unit."""

    def __init__(self, judge_cfg):
        self.judge_cfg = judge_cfg

    def __call__(self, client, unit):
        from judges.suite import get_suite
        from tasks.runtime.judge_session import judge_counter

        judge = self.judge_cfg
        [judgment] = get_suite(unit.suite).evaluate(client, unit, judge, judge_counter(judge))
        return judgment


def time_stage(tasks, judge_cfg, client_cfg, base_url: str, groups=None) -> tuple[float, list]:
    from judges.ccrs import unit_request
    from judges.client import ChatRequest, LLMClient
    from tasks.runtime.fanout import fan_out, fan_out_report

    evaluate = Evaluate(judge_cfg)
    with LLMClient(client_cfg, base_url) as client:  # warm-up
        first = unit_request(tasks[0], judge_cfg)
        client.chat(ChatRequest(first.model, first.messages, max_tokens=2))
    fan_out(evaluate, tasks[:4], client_cfg, base_url)  # warm the Ray workers too
    started = time.perf_counter()
    judgments, _ = fan_out_report(evaluate, tasks, client_cfg, base_url, groups=groups)
    return time.perf_counter() - started, judgments


def time_offline(requests, seed: int) -> tuple[float, list[str]]:
    from vllm import LLM, SamplingParams

    from infra.serving import ServingConfig

    engine_kwargs = offline_engine_kwargs(ServingConfig(profile="cpu").models[0].engine_kwargs)
    llm = LLM(model=str(_model_dir()), seed=seed, **engine_kwargs)
    params = SamplingParams(temperature=0.0, max_tokens=requests[0].max_tokens, seed=seed,
                            structured_outputs=_structured(requests[0].extra_body))
    llm.chat([requests[0].messages], params, use_tqdm=False)  # warm-up
    started = time.perf_counter()
    outputs = llm.chat([r.messages for r in requests], params, use_tqdm=False)
    seconds = time.perf_counter() - started
    return seconds, [o.outputs[0].text for o in outputs]


def offline_engine_kwargs(served: dict) -> dict:
    """The served engine's settings that `LLM` takes: the OpenAI front end's own options (e.g.
    enable_prompt_tokens_details) have no offline meaning."""
    from vllm.entrypoints.launchers.cli_args import FrontendArgs

    frontend = set(FrontendArgs.__dataclass_fields__)
    return {k: v for k, v in served.items() if k not in frontend}


def _structured(extra_body: dict):
    """The offline twin of the request's response_format (vLLM structured outputs)."""
    if "response_format" not in extra_body:
        return None
    from vllm.sampling_params import StructuredOutputsParams

    return StructuredOutputsParams(json=extra_body["response_format"]["json_schema"]["schema"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=48)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--llm-base-url", "--base-url", dest="base_url",
                        help="use an already running endpoint serving smollm2-135m-instruct")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--shared-prefix", action="store_true", help="JudgeConfig.ccrs.shared_prefix layout")
    parser.add_argument("--structured-output", action="store_true", help="JudgeConfig.structured_output")
    parser.add_argument("--prefix-order", action="store_true", help="the judge stage's prefix-aware order")
    args = parser.parse_args()

    import tempfile

    import ray

    from infra.serving import ServingConfig, start_serve_app, stop_serve_app
    from judges.config import CcrsOptions, ClientConfig, JudgeConfig
    from judges.suite import get_suite

    judge_cfg = JudgeConfig(max_reasks=0, cache=False, structured_output=args.structured_output,
                            ccrs=CcrsOptions(shared_prefix=args.shared_prefix,
                                             metrics=list(get_suite("ccrs").metrics)))  # registry order
    client_cfg = ClientConfig(max_concurrency=args.concurrency, seed=0)
    tasks = build_tasks(args.n, judge_cfg, client_cfg, Path(tempfile.mkdtemp(prefix="bench-judging-")))
    groups = None
    if args.prefix_order:
        from tasks.runtime.judge_session import ordered_for_prefix_reuse

        tasks, groups = ordered_for_prefix_reuse(tasks)
    serving = ServingConfig.for_profile("cpu", port=args.port)
    base_url = args.base_url or start_serve_app(serving)
    try:
        stage_s, judgments = time_stage(tasks, judge_cfg, client_cfg, base_url, groups)
    finally:
        if not args.base_url:
            stop_serve_app(serving)
        ray.shutdown()
    print(f"stage: {len(tasks)} judged requests in {stage_s:.1f}s ({len(tasks) / stage_s:.2f} req/s)",
          flush=True)
    from judges.ccrs import unit_request

    offline_s, offline_texts = time_offline([unit_request(t, judge_cfg) for t in tasks], client_cfg.seed)
    same = sum(j.raw == text for j, text in zip(judgments, offline_texts))
    figures = {
        "requests": len(tasks),
        "shared_prefix": args.shared_prefix,
        "structured_output": args.structured_output,
        "prefix_order": args.prefix_order,
        "stage_seconds": round(stage_s, 3),
        "stage_requests_per_s": round(len(tasks) / stage_s, 2),
        "offline_seconds": round(offline_s, 3),
        "offline_requests_per_s": round(len(tasks) / offline_s, 2),
        "ratio_stage_over_offline": round(offline_s / stage_s, 3),
        "identical_completions": same,
        "stage_prompt_tokens": sum(j.prompt_tokens for j in judgments),
        "stage_prefix_cached_prompt_tokens": sum(j.prefix_cached_tokens for j in judgments),
        "stage_completion_tokens": sum(j.completion_tokens for j in judgments),
    }
    print(json.dumps(figures, indent=2))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    # the process's start (not at import): the in-process vLLM engine never asks the Hub, small KV cache
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    sys.exit(main())
