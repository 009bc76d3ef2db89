"""Expected marks from fewer requests: `judge.expected.continuation` chat against batched, side by side.

    flock /tmp/ccrs-llm.lock .venv/bin/python benchmarks/bench_expected_continuations.py \
        [--config configs/cpu-demo.yaml] [--limit N] [--run-dir DIR] [--max-expansions K ...] [--integer]

Retrieval and generation come from the config (cached in the run directory, as in `ccrs run`); the CCRS
judge then scores the same generations with `scoring: expected` once per setting (judgment cache off,
through the judge stage's own Ray fan-out): first `continuation: batched` (the walk's continuations a round
at a time, one /v1/completions request with a list of prompts), then `continuation: chat` (one chat
request per continuation, the default), so that any warmth the first pass leaves in the server's prefix
cache favours the old setting. `--max-expansions` adds batched passes with lower caps (a cheaper walk,
not the same one); `--integer` a pass with `scoring: integer` (the replies alone: what the continuations
add to the judging time). Printed per pass: the judge requests (the judgments'
`attempts`: replies, re-asks and continuation requests), the prompts the continuations carried, the
seconds and the prefix-cached share of prompt tokens; then, against the first chat pass, how far the
expected marks moved (max and mean |difference| on the 0-100 scale), whether the argmax integers and
fallbacks agree, and the ratios.
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
sys.path.insert(0, str(REPO / "benchmarks"))

KEYS = ["query_id", "system", "metric"]


def judge_pass(config, base_url: str, samples, expected: dict) -> dict:
    """One pass over the samples (expected marks with these `judge.expected` settings; {"scoring":
    "integer"}: integer marks): its judgments and what it cost."""
    from judges.suite import get_suite
    from tasks.judge import judgments_frame
    from tasks.runtime.judge_session import JudgeSession

    suite = get_suite("ccrs")
    scoring = expected.get("scoring", "expected")
    options = config.judge.expected.model_copy(update={k: v for k, v in expected.items() if k != "scoring"})
    judge = config.judge.model_copy(update={"scoring": scoring, "cache": False, "expected": options})
    started = time.perf_counter()
    judgments, stats = JudgeSession.of(suite, judge, config.client, base_url).judge_samples(samples, True)
    seconds = time.perf_counter() - started
    frame = judgments_frame(judgments, metric_order=suite.selected_metrics(judge))
    client = stats["requests"].get("client") or {}
    details = [json.loads(d) for d in frame["detail"].dropna()]
    return {"label": ", ".join(f"{k} {v}" for k, v in expected.items()), "frame": frame, "seconds": seconds,
            "requests": int(frame["attempts"].sum()), "judgments": len(frame),
            "continuations": sum(d.get("prompts", d.get("expansions", 0)) for d in details),
            "cached": client.get("cached_prompt_tokens", 0) / max(1, client.get("prompt_tokens", 0))}


def compare(new: dict, old: dict) -> str:
    both = new["frame"].merge(old["frame"], on=KEYS, suffixes=("_new", "_old"))
    argmax = int((both["llm_score_new"] == both["llm_score_old"]).sum())
    fallback = int((both["scoring_new"] != both["scoring_old"]).sum())
    marks = both[both["llm_score_expected_new"].notna() & both["llm_score_expected_old"].notna()]
    moved = (marks["llm_score_expected_new"] - marks["llm_score_expected_old"]).abs()
    mass = (marks["score_mass_new"] - marks["score_mass_old"]).abs()
    return (f"  vs chat: expected marks moved max {moved.max():.4f}, mean {moved.mean():.4f} (0-100 scale, "
            f"{len(marks)} both expected); mass moved max {mass.max():.4f}; argmax equal "
            f"{argmax}/{len(both)}; scoring differs {fallback}; requests "
            f"{old['requests'] / new['requests']:.2f}x fewer, time "
            f"{old['seconds'] / new['seconds']:.2f}x less")


def report(passes: list[dict]) -> None:
    print(f"\n{'setting':<38}{'judgments':>10}{'requests':>10}{'per judgment':>14}{'continuations':>15}"
          f"{'seconds':>9}{'cached':>8}")
    for entry in passes:
        print(f"{entry['label']:<38}{entry['judgments']:>10}{entry['requests']:>10}"
              f"{entry['requests'] / entry['judgments']:>14.2f}{entry['continuations']:>15}"
              f"{entry['seconds']:>9.0f}{entry['cached']:>8.2f}")
    chat = next(entry for entry in passes if entry["label"] == "continuation chat")
    for entry in passes:
        if entry is not chat and entry["label"] != "scoring integer":
            print(f"{entry['label']}:")
            print(compare(entry, chat))
    for entry in passes:
        if entry["label"] == "scoring integer":
            print(f"continuations' share of the judging time: chat "
                  f"{1 - entry['seconds'] / chat['seconds']:.2f}, batched "
                  f"{1 - entry['seconds'] / passes[0]['seconds']:.2f} (1 - integer seconds / pass seconds)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "cpu-demo.yaml"))
    parser.add_argument("--limit", type=int, help="questions (default: the config's limit)")
    parser.add_argument("--run-dir", help="default: the config's run_dir (a folder per limit under it)")
    parser.add_argument("--max-expansions", type=int, nargs="*", default=[],
                        help="also batched passes with these caps (e.g. 4 2)")
    parser.add_argument("--integer", action="store_true", help="also a pass with scoring: integer")
    parser.add_argument("--llm-base-url", help="use this running OpenAI-compatible endpoint instead of "
                        "deploying the Serve app")
    args = parser.parse_args()
    args.b = None

    from bench_scoring import endpoint, load, prepare

    config = load(args, args.limit)
    with endpoint(config, args.llm_base_url) as base_url:
        samples, failed, _ = prepare(config, base_url)
        print(f"{len(samples)} samples (failed generations left out: {len(failed)}), config "
              f"{args.config}, limit {config.dataset.limit}")
        settings = [{"continuation": "batched"}, {"continuation": "chat"},
                    *({"continuation": "batched", "max_expansions": k} for k in args.max_expansions),
                    *([{"scoring": "integer"}] if args.integer else [])]
        passes = []
        for setting in settings:
            passes.append(judge_pass(config, base_url, samples, setting))
            print(f"{passes[-1]['label']}: {passes[-1]['requests']} requests, {passes[-1]['seconds']:.0f} s",
                  flush=True)
        report(passes)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the process's start, not at import: the Hub is never asked
    raise SystemExit(main())
