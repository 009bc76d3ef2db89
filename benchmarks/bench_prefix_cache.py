"""Prefix reuse in the judge stage at the paper's proportions: prompt tokens sent, served from vLLM's
prefix cache, and computed, for each prompt layout x routing, side by side in one run.

    .venv/bin/python benchmarks/bench_prefix_cache.py --questions 2 --json prefix.json
    .venv/bin/python benchmarks/bench_prefix_cache.py --routing-check 2   # the routing claim alone, minutes

`--routing-check N`: two replicas behind PrefixCacheAffinityRouter, N real BioASQ contexts x 3 questions
sent one after the other; prints each prompt's tokens served from the prefix cache (the first prompt of a
context computed, the two after it routed to the replica that holds it and served from its cache). This was
a test until issue 34: two vLLM replicas on CI's two cores took 269 s, restarting them under load ~14 min.

Proportions of the paper's setup (CCRS paper section 4): per question, 2 retrievers x top-20 chunks of
~300 tokens (a ~6,000-token context), 3 readers -> 6 samples, 5 CCRS metrics -> 30 judge prompts, 24 of
which carry the context (12 per retriever). The chunks are real BioASQ text (the committed 12b sample's
snippets cut into 300-token pieces by the judge's tokenizer); per question, "bm25" ranks them by query-
term overlap and "knn" by overlap relative to chunk length; the three readers are the extractive
baseline with 1, 2 and 3 sentences (no generation: the judge stage is what is measured).

The judge stage itself (tasks/judge.py JudgeSession: the fan-out, shards, client) judges them against the
CPU stack: Ray Serve LLM + vLLM (CPU build), SmolLM2-135M-Instruct with an 8,192-token window, two
replicas, prefix caching on, usage.prompt_tokens_details reported. Layouts (v1 templates):
`paper` = each construct's inputs in the paper's order after its own intro; `context-first` =
`judge.ccrs.shared_prefix` (one intro, then the context, then the rest). Routings: `blind` = the plan's order
(sample by sample) and Serve's default power-of-two router; `affine` = prefix-aware order
(`client.prefix_order`, whole groups per shard) and Ray Serve LLM's PrefixCacheAffinityRouter. Each
routing gets a fresh app (empty caches); the two layouts never share a cached prefix (different first
tokens). Writes {"layouts": {"<layout>/<routing>": {"prompt_tokens", "cached_prompt_tokens", "wall_s",
...}}} and prints ratios to paper/blind.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BIOASQ = REPO / "data" / "bioasq-sample" / "12B1_golden_sample.json"
CHUNK_TOKENS, TOP_K, WINDOW = 300, 20, 8192
READERS = {"extractive-1": 1, "extractive-2": 2, "extractive-3": 3}
LAYOUTS = {"paper": False, "context-first": True}  # JudgeConfig.ccrs.shared_prefix
ROUTINGS = {"blind": ("default", False), "affine": ("prefix_affinity", True)}  # router, prefix_order


def _terms(text: str) -> set[str]:
    return {t for t in re.findall(r"[a-z0-9]+", text.lower()) if len(t) > 2}


def corpus_chunks(questions: list[dict], tokenizer) -> list[str]:
    """Every snippet of the sample, in file order, cut into CHUNK_TOKENS-token pieces."""
    text = "\n".join(s["text"] for q in questions for s in q["snippets"])
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return [tokenizer.decode(ids[i:i + CHUNK_TOKENS]) for i in range(0, len(ids), CHUNK_TOKENS)]


def rankings(question: str, chunks: list[str]) -> dict[str, list[str]]:
    """Two different top-20s of the same pool: by term overlap ("bm25") and by overlap per chunk term
    ("knn"); ties by position."""
    query = _terms(question)
    overlap = [len(query & _terms(c)) for c in chunks]
    density = [o / max(1, len(_terms(c))) for o, c in zip(overlap, chunks)]
    top = {name: sorted(range(len(chunks)), key=lambda i, s=score: (-s[i], i))[:TOP_K]
           for name, score in (("bm25", overlap), ("knn", density))}
    return {name: [chunks[i] for i in order] for name, order in top.items()}


def build_samples(n_questions: int, tokenizer):
    from judges.readers import extractive_answer
    from judges.suite import Sample

    questions = json.loads(BIOASQ.read_text())["questions"]
    pool = corpus_chunks(questions, tokenizer)
    samples = []
    for question in questions[:n_questions]:
        ideal = question["ideal_answer"]
        for retriever, context in rankings(question["body"], pool).items():
            for reader, sentences in READERS.items():
                samples.append(Sample(
                    query_id=question["id"], system=f"{reader}/{retriever}", question=question["body"],
                    response=extractive_answer(question["body"], context, sentences) or context[0][:200],
                    ground_truth=ideal[0] if isinstance(ideal, list) else str(ideal), context=context))
    return samples, len(pool)


def serving_config(router: str, port: int):
    from infra.serving import ServingConfig

    cfg = ServingConfig.for_profile("cpu", port=port, ready_timeout_s=900)
    model = cfg.models[0]
    model.min_replicas = model.max_replicas = 2
    model.cpus_per_replica = 0.5  # two replicas on a 2-core box: fractional logical CPUs
    model.request_router = router
    model.engine_kwargs["max_model_len"] = WINDOW
    # Two engines on two cores answer Serve's health checks late; at Ray Serve LLM's 10 s / 10 s three late
    # answers restart a replica, which costs minutes on CPU and slows the other (docs/testing.md)
    model.health_check_period_s, model.health_check_timeout_s = 30.0, 120.0
    return cfg


def judge_config(shared_prefix: bool):
    from judges.config import CcrsOptions, JudgeConfig

    return JudgeConfig(ccrs=CcrsOptions(shared_prefix=shared_prefix), structured_output=True, max_reasks=0,
                       cache=False, context_window=WINDOW)


def ideal_computed(samples, shared_prefix: bool, tokenizer) -> int:
    """The floor: prompt tokens left to compute with an unbounded cache and perfect routing (each prompt's
    longest common token prefix with any earlier prompt is free; its last token never is)."""
    from judges.ccrs import unit_request
    from judges.suite import get_suite
    from tasks.runtime.judge_session import judge_counter

    judge = judge_config(shared_prefix)
    units = [u for s in samples for u in get_suite("ccrs").plan(s, judge, 0, judge_counter(judge))]
    seen: list[list[int]] = []
    computed = 0
    for unit in units:
        messages = unit_request(unit, judge).messages
        ids = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                 return_dict=True)["input_ids"])
        common = max((_common_prefix(ids, other) for other in seen), default=0)
        computed += len(ids) - min(common, len(ids) - 1)
        seen.append(ids)
    return computed


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def judge_layout(samples, shared_prefix: bool, prefix_order: bool, base_url: str, concurrency: int):
    from judges.config import ClientConfig
    from tasks.runtime.judge_session import JudgeSession

    judge = judge_config(shared_prefix)
    client = ClientConfig(max_concurrency=concurrency, seed=0, prefix_order=prefix_order)
    started = time.perf_counter()
    judgments, stats = JudgeSession.of("ccrs", judge, client, base_url).judge_samples(samples)
    wall = time.perf_counter() - started
    prompt = sum(j.prompt_tokens for j in judgments)
    cached = sum(j.prefix_cached_tokens for j in judgments)
    return {"prompt_tokens": prompt, "cached_prompt_tokens": cached,
            "computed_prompt_tokens": prompt - cached, "wall_s": round(wall, 2), "requests": len(judgments),
            "failed": sum(j.status == "failed" for j in judgments),
            "context_chunks_mean": round(sum(j.n_context_chunks for j in judgments if j.metric != "QR")
                                         / max(1, sum(j.metric != "QR" for j in judgments)), 1)}


ROUTING_QUESTIONS = ("Summarize the passage.", "Name one entity in it.", "Is it about a disease?")


def routing_check(n_contexts: int, port: int) -> dict:
    """Two replicas behind PrefixCacheAffinityRouter, `n_contexts` real BioASQ contexts of three questions
    each, sent one after the other: each context's first prompt is computed, the next two are routed to
    the replica that holds it and served from its prefix cache (vLLM's counts)."""
    import httpx

    from infra.serving import start_serve_app, stop_serve_app

    questions = json.loads(BIOASQ.read_text())["questions"][:n_contexts]
    contexts = ["\n".join(s["text"] for s in q["snippets"])[:2500] for q in questions]
    cfg = serving_config("prefix_affinity", port)
    model = cfg.models[0]
    started = time.perf_counter()
    url = start_serve_app(cfg)
    print(f"[routing check] 2 replicas, router prefix_affinity: up in {time.perf_counter() - started:.0f}s",
          flush=True)
    rows = []
    try:
        for index, context in enumerate(contexts):
            for question in ROUTING_QUESTIONS:
                body = {"model": model.model_id, "max_tokens": 2, "temperature": 0,
                        "messages": [{"role": "user", "content": context + "\n\n" + question}]}
                usage = httpx.post(f"{url}/chat/completions", json=body, timeout=300).json()["usage"]
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                rows.append({"context": index, "question": question, "prompt_tokens": usage["prompt_tokens"],
                             "cached_tokens": cached})
                print(f"  context {index} {question!r}: {cached}/{usage['prompt_tokens']} prompt tokens "
                      "from the prefix cache", flush=True)
    finally:
        stop_serve_app()
    followers = [r for r in rows if r["question"] != ROUTING_QUESTIONS[0]]
    firsts = [r for r in rows if r["question"] == ROUTING_QUESTIONS[0]]
    return {"rows": rows,
            "first_cached_share": round(sum(r["cached_tokens"] for r in firsts)
                                        / max(1, sum(r["prompt_tokens"] for r in firsts)), 3),
            "followers_cached_share": round(sum(r["cached_tokens"] for r in followers)
                                            / max(1, sum(r["prompt_tokens"] for r in followers)), 3)}


def ratios(layouts: dict[str, dict]) -> dict[str, dict]:
    base = layouts["paper/blind"]
    out = {}
    for name, row in layouts.items():
        computed = max(1, row["computed_prompt_tokens"])
        out[name] = {"sent_over_computed": round(row["prompt_tokens"] / computed, 2),
                     "computed_vs_paper_blind": round(base["computed_prompt_tokens"] / computed, 2),
                     "speedup_vs_paper_blind": round(base["wall_s"] / row["wall_s"], 2)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--routing-check", type=int, metavar="N", help="only the routing check: N contexts "
                        "x 3 questions on two replicas behind PrefixCacheAffinityRouter (a few minutes)")
    args = parser.parse_args()

    import ray

    if args.routing_check:
        try:
            figures = routing_check(args.routing_check, args.port)
        finally:
            ray.shutdown()
        first, after = figures["first_cached_share"], figures["followers_cached_share"]
        print(f"prompt tokens from the prefix cache: first prompt of a context {first:.0%}, the two after it "
              f"{after:.0%}")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return 0
    from transformers import AutoTokenizer

    from infra.models import prepare_local_models
    from infra.serving import start_serve_app, stop_serve_app

    tokenizer = AutoTokenizer.from_pretrained(str(prepare_local_models()["smollm2-135m-instruct"]))
    samples, pool = build_samples(args.questions, tokenizer)
    print(f"{args.questions} questions x 2 retrievers x {len(READERS)} readers = {len(samples)} samples; "
          f"{pool} chunks of {CHUNK_TOKENS} tokens in the pool, top-{TOP_K}", flush=True)
    ideal = {layout: ideal_computed(samples, shared, tokenizer) for layout, shared in LAYOUTS.items()}
    print(f"floor of computed prompt tokens (unbounded cache, perfect routing): {ideal}", flush=True)
    layouts: dict[str, dict] = {}
    try:
        for routing, (router, prefix_order) in ROUTINGS.items():
            cfg = serving_config(router, args.port)
            started = time.perf_counter()
            base_url = start_serve_app(cfg)
            print(f"[{routing}] 2 replicas, router {router}: up in {time.perf_counter() - started:.0f}s",
                  flush=True)
            try:
                for layout, shared_prefix in LAYOUTS.items():
                    row = judge_layout(samples, shared_prefix, prefix_order, base_url, args.concurrency)
                    row["ideal_computed_prompt_tokens"] = ideal[layout]
                    layouts[f"{layout}/{routing}"] = row
                    print(f"  {layout}/{routing}: {json.dumps(row)}", flush=True)
            finally:
                stop_serve_app()  # only the app this process deployed
    finally:
        ray.shutdown()
    figures = {"questions": args.questions, "samples": len(samples), "chunk_tokens": CHUNK_TOKENS,
               "top_k": TOP_K, "window": WINDOW, "replicas": 2, "layouts": layouts, "ratios": ratios(layouts)}
    print(f"{'layout/routing':<24}{'sent':>9}{'cached':>9}{'computed':>10}{'sent/comp':>11}"
          f"{'comp. gain':>12}{'wall s':>8}{'speed-up':>10}")
    for name, row in layouts.items():
        r = figures["ratios"][name]
        print(f"{name:<24}{row['prompt_tokens']:>9}{row['cached_prompt_tokens']:>9}"
              f"{row['computed_prompt_tokens']:>10}{r['sent_over_computed']:>11}{r['computed_vs_paper_blind']:>12}"
              f"{row['wall_s']:>8}{r['speedup_vs_paper_blind']:>10}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the process's start, not at import: the Hub is never asked
    sys.exit(main())
