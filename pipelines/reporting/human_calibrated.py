"""The verdict's "Human-calibrated" section: per metric with human labels, the PPI++ means beside the
judge-only ones, the judge's bias per system (labels of the judge metric itself), the pairs that differ,
the pairs whose decision the labels changed, the questions skipped and the notes on the labels
(stats.json `per_metric[M]["human_calibrated"]`, stats/labels.py; docs/human-labels.md)."""
from __future__ import annotations

from typing import Any

HUMAN_KEY = "human_calibrated"


def human_calibrated_section(stats: dict) -> str:
    """Empty when no metric has labels."""
    blocks = {metric: stats["per_metric"][metric][HUMAN_KEY] for metric in stats.get("metrics", [])
              if HUMAN_KEY in stats["per_metric"].get(metric, {})}
    if not blocks:
        return ""
    alpha = stats["alpha"]
    parts = ["## Human-calibrated (PPI++)",
             "Each estimate combines the human labels with the judge's scores on every question "
             "(prediction-powered inference, PPI++): it estimates the mean *human* mark, the labeled "
             "answers measuring the judge's bias and removing it, provided they are a uniform random sample "
             "of the judged ones (`ccrs label` draws them so). Its 95% intervals covered the truth in at "
             "least 93% of simulated data sets at every label count accepted (docs/human-labels.md). Judge's "
             "bias: mean of human - judge on the labeled answers, with its 95% CI. Pairs: PPI++ paired "
             f"differences on the questions where both systems are labeled, Holm-adjusted, alpha = {alpha}."]
    parts += [_metric_part(metric, block, stats["per_metric"][metric]) for metric, block in blocks.items()]
    return "\n\n".join(parts)


def _metric_part(metric: str, block: dict, judge_block: dict) -> str:
    human = block["human_metric"]
    own = human == metric  # a human metric of its own gets no bias: human - judge compares two constructs
    title = metric if own else f"{human} (a human metric, predicted by {metric})"
    annotators = block["n_annotators"]
    bias_head, bias_rule = (" judge's bias (human - judge) |", " --- |") if own else ("", "")
    lines = [f"### {title}: {sum(block['n_labels'].values())} labels, {annotators} "
             f"annotator{'s' if annotators != 1 else ''}",
             f"| system | labels | judge only | human-calibrated |{bias_head}",
             f"| --- | --- | --- | --- |{bias_rule}"]
    for system, n in block["n_labels"].items():
        judge_only = _interval(judge_block["means"].get(system), judge_block["ci95"].get(system))
        calibrated = _interval(block["means"].get(system), block["ci95"].get(system))
        bias = _interval(block["judge_bias"].get(system), block["judge_bias_ci95"].get(system), True)
        lines.append(f"| {system} | {n} | {judge_only} | {calibrated} |" + (f" {bias} |" if own else ""))
    extra = [] if own else [f"No judge's bias: {human} is a construct of its own, which {metric}'s scores "
                            f"predict; human - judge would compare two different things."]
    extra += _pair_lines(block) + _gap_lines(block) + _skip_lines(block)
    extra += [f"**Note:** {note}." for note in block.get("notes", [])]
    return "\n".join(lines) + "".join(f"\n\n{line}" for line in extra)


def _pair_lines(block: dict) -> list[str]:
    pairs = block["pairwise"]
    if not pairs:
        return []
    different = [pair for pair in pairs if pair["significant"]]
    shown = "; ".join(_difference(pair) for pair in different)
    lines = [f"**Pairs that differ** ({len(different)} of {len(pairs)} with enough labels): "
             f"{shown or 'none'}."]
    changed = [pair for pair in pairs if pair["decision_changed"]]
    if changed:
        lines.append("**Decisions the labels changed** (against the judge-only HSD): " + "; ".join(
            f"{pair['a']} vs {pair['b']}: {'different' if pair['significant'] else 'not different'} with the "
            f"labels, {'different' if pair['judge_only_significant'] else 'not different'} by the judge alone"
            for pair in changed) + ".")
    return lines


def _gap_lines(block: dict) -> list[str]:
    floor = block["min_labels"]
    lines = []
    if block["too_few_labels"]:
        listed = ", ".join(f"{system} ({block['n_labels'][system]})" for system in block["too_few_labels"])
        lines.append(f"**Too few labels:** {listed}: fewer than {floor} labels, no human-calibrated interval "
                     f"claimed (`ccrs plan labels` says how many are needed).")
    if block["pairs_too_few_labels"]:
        count = len(block["pairs_too_few_labels"])
        lines.append(f"**Pairs not compared:** {count} pair{'s' if count != 1 else ''} labeled together on "
                     f"fewer than {floor} questions.")
    return lines


def _skip_lines(block: dict) -> list[str]:
    """Questions skipped per annotator, beside the labels: per system where the counts differ."""
    skips = block.get("skips") or {}
    if not skips:
        return []
    shown = []
    for annotator, per_system in skips.items():
        counts = set(per_system.values())
        detail = (f"{counts.pop()} question(s), every system's answer" if len(counts) == 1 else
                  ", ".join(f"{system} {count}" for system, count in per_system.items()))
        shown.append(f"{annotator or '(unnamed)'}: {detail}")
    return [f"**Skipped** (answers left without that annotator's mark; {block.get('skipped_unlabeled', 0)} "
            f"question(s) labeled by no one): " + "; ".join(shown) + "."]


def _difference(pair: dict[str, Any]) -> str:
    """`B > E by 0.28 [0.10, 0.46] (adjusted p 0.035)`: the higher system first, its interval with it."""
    (low, high), first, second = pair["ci95"], pair["a"], pair["b"]
    if pair["diff"] < 0:
        low, high, first, second = -high, -low, second, first
    return (f"{first} > {second} by {abs(pair['diff']):.2f} [{low:.2f}, {high:.2f}] "
            f"(adjusted p {pair['p_value']:.3g})")


def _interval(value: float | None, ci: list | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    show = _signed if signed else (lambda x: f"{x:.2f}")
    if not ci or ci[0] is None:
        return show(value)
    return f"{show(value)} [{show(ci[0])}, {show(ci[1])}]"


def _signed(value: float) -> str:
    return f"{value:+.2f}"
