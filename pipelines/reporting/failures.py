"""The run's failure report: per stage, what failed for good, why, and what the client went through to
avoid it (retries, errors by kind, circuit openings, requeue rounds). Written as run_dir/failures.json,
printed at the end of `ccrs run` and logged to MLflow."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.runtime.layout import RunLayout


def stage_failures(name: str, summary: dict[str, Any]) -> dict[str, Any]:
    requests = summary.get("requests") or {}
    client = requests.get("client") or {}
    if name == "generate":
        total, failed = summary.get("rows", 0), sum((summary.get("failed") or {}).values())
    else:
        total, failed = summary.get("judgments", 0), (summary.get("status_counts") or {}).get("failed", 0)
    return {
        "items": int(total),
        "failed": int(failed),
        "failure_reasons": summary.get("failure_reasons", {}),
        "suspicious_samples": summary.get("suspicious_samples", 0),
        "requests_sent": int(client.get("attempts", 0)),
        # prompt tokens of the answered requests, and those the server's prefix cache served (vLLM's
        # usage.prompt_tokens_details.cached_tokens): what was computed is the difference
        "prompt_tokens": int(client.get("prompt_tokens", 0)),
        "prefix_cached_prompt_tokens": int(client.get("cached_prompt_tokens", 0)),
        "retries": int(client.get("retries", 0)),
        "errors": client.get("errors", {}),
        "circuit_opens": int(client.get("circuit_opens", 0)),
        "short_circuited": int(client.get("short_circuited", 0)),
        "requeued": requests.get("requeued", []),
        # shards whose Ray worker or node died under them (a preempted node): sent again, nothing lost
        "lost_shards": int(requests.get("lost_shards", 0)),
        "resumed_items": int(requests.get("resumed", summary.get("resumed", 0)) or 0),
        "endpoint_not_back": requests.get("endpoint_not_back"),
    }


def failure_report(summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    stages = {name: stage_failures(name, summary) for name, summary in summaries.items()}
    return {"stages": stages, "failed_total": sum(s["failed"] for s in stages.values()),
            "retries_total": sum(s["retries"] for s in stages.values()),
            "prompt_tokens_total": sum(s["prompt_tokens"] for s in stages.values()),
            "prefix_cached_prompt_tokens_total": sum(s["prefix_cached_prompt_tokens"]
                                                     for s in stages.values())}


def write_failure_report(run_dir: Path, summaries: dict[str, dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
    report = failure_report(summaries)
    path = RunLayout(run_dir).failures_json
    path.write_text(json.dumps(report, indent=2, default=str))
    return path, report


def format_failure_table(report: dict[str, Any]) -> str:
    header = (f"{'stage':<14}{'items':>7}{'failed':>8}{'sent':>7}{'retries':>9}{'circuit':>9}"
              f"{'prompt tok':>12}{'prefix-cached':>15}  errors")
    lines = [header]
    for name, s in report["stages"].items():
        lost = {"shards_lost_with_worker": s["lost_shards"]} if s.get("lost_shards") else {}
        errors = ", ".join(f"{k}={v}" for k, v in {**s["errors"], **lost}.items()) or "-"
        prompt, cached = s.get("prompt_tokens", 0), s.get("prefix_cached_prompt_tokens", 0)
        share = f"{cached} ({cached / prompt:.0%})" if prompt else "0"
        lines.append(f"{name:<14}{s['items']:>7}{s['failed']:>8}{s['requests_sent']:>7}{s['retries']:>9}"
                     f"{s['circuit_opens']:>9}{prompt:>12}{share:>15}  {errors}")
    return "\n".join(lines)


# --- a run in which no judgment has a score -------------------------------------------------------------

REASONS_SHOWN = 3  # most common failure reasons in the line and the verdict of such a run
REPLIES_SHOWN = 3  # the judge's raw replies quoted in its verdict
REPLY_CHARS = 300


def judge_failure_reasons(report: dict[str, Any]) -> list[tuple[str, int]]:
    """The judge stages' failure reasons over every suite, most common first."""
    counts: dict[str, int] = {}
    for name, block in report["stages"].items():
        if name != "generate":
            for reason, count in block["failure_reasons"].items():
                counts[reason] = counts.get(reason, 0) + int(count)
    return sorted(counts.items(), key=lambda item: -item[1])


def unscored_line(report: dict[str, Any]) -> str:
    """`every one of the 20 judgments failed (no number in reply: 14, ...): no scores, no statistics`."""
    judged = [block for name, block in report["stages"].items() if name != "generate"]
    items, failed = sum(block["items"] for block in judged), sum(block["failed"] for block in judged)
    shown = judge_failure_reasons(report)[:REASONS_SHOWN]
    reasons = "; ".join(f"{reason}: {count}" for reason, count in shown)
    what = (f"every one of the {items} judgments failed" if failed == items
            else f"no judgment has a score ({failed} of {items} failed)")
    return f"{what}{f' ({reasons})' if reasons else ''}: no scores, so no statistics"


def unscored_run_line(run_dir: Path) -> str | None:
    """The one line that ends a run in which no judgment has a score (None for a run with statistics)."""
    layout = RunLayout(run_dir)
    stats = json.loads(layout.stats_json.read_text()) if layout.stats_json.exists() else None
    if stats is None or stats["systems"] or not layout.failures_json.exists():
        return None
    report = json.loads(layout.failures_json.read_text())
    return f"{unscored_line(report)}; the failure table, reasons and the judge's replies: {layout.summary_md}"


def failed_replies(judgments: pd.DataFrame, n: int = REPLIES_SHOWN) -> pd.DataFrame:
    """A few failed judgments with what the judge replied (query_id, system, metric, reason, raw): different
    replies first, each cut to REPLY_CHARS."""
    failed = judgments.loc[judgments["status"] == "failed", ["query_id", "system", "metric", "reason", "raw"]]
    failed = failed.assign(raw=failed["raw"].fillna("").astype(str).str.slice(0, REPLY_CHARS))
    distinct = failed.drop_duplicates("raw")
    return pd.concat([distinct, failed.drop(distinct.index)]).head(n).reset_index(drop=True)
