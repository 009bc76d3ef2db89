"""The verdict's "Sequential decisions" section: stats.json["sequential"] (stats/sequential.py's
SequentialResult.to_json(), from a sequential run or `ccrs stats --sequential`; docs/sequential.md)."""
from __future__ import annotations

from stats.sequential import FINITE_POPULATION

SEQUENTIAL_KEY = "sequential"
SECTION_TITLE = "## Sequential decisions (anytime-valid, on the judge's scale)"
MAX_LOOKS_SHOWN = 12


def sequential_section(stats: dict) -> str:
    """Empty when stats.json has no sequential block."""
    block = stats.get(SEQUENTIAL_KEY)
    if not block:
        return ""
    parts = [SECTION_TITLE, _explanation(block), f"**{settled_line(block)}**"]
    titles = {"different": "Different", "equivalent": f"Equivalent within ±{block['margin']:g}",
              "open": "Open"}
    parts += [_decided(block, name, title) for name, title in titles.items()]
    parts += [_looks(block["looks"]), _left_out(block), _descriptive_note(block)]
    return "\n\n".join(part for part in parts if part)


def settled_line(block: dict) -> str:
    """`settled after n of N questions: k judge calls of K not sent (x%)` (or why it is not settled)."""
    n, total_questions = block["stopped_at"], block["n_questions"]
    calls = (f"{block['judge_calls_not_sent']:,} judge calls of {block['judge_calls_total']:,} not sent "
             f"({block['judge_calls_saved_share']:.0%})")
    still_open = sum(decision["decision"] == "open" for decision in block["decisions"])
    if still_open:
        return (f"Not settled: stopped after {n} of {total_questions} questions with {still_open} "
                f"comparisons open: {calls}")
    return f"Settled after {n} of {total_questions} questions: {calls}"


def _explanation(block: dict) -> str:
    finite = block.get("finite_population", FINITE_POPULATION)
    target = (f"over the {block['n_questions']} questions (betting, sampling without replacement)" if finite
              else "over the population of questions these are drawn from (betting, questions exchangeable)")
    exact = " After all the questions an interval is the exact difference." if finite else ""
    return (f"Questions judged in a seeded random order (seed {block['seed']}), a look every "
            f"{block['look_every']} questions. Each comparison's interval is an anytime-valid confidence "
            f"sequence for the mean difference a - b {target}: it holds at every look at once, so the stop "
            f"chosen by the data keeps the guarantee. The family of {block['family_size']} comparisons "
            f"misses with probability at most alpha = {block['alpha']:g} in all (each at alpha / "
            f"{block['family_size']}). Different: the interval excludes 0; equivalent: it lies within "
            f"±{block['margin']:g}; open: neither.{exact} The scores are the judge's: the decisions are "
            "about its means (its scale, any bias it has), not about human marks. See docs/sequential.md.")


def _decided(block: dict, decision: str, title: str) -> str:
    chosen = [item for item in block["decisions"] if item["decision"] == decision]
    if not chosen:
        return ""
    by_metric: dict[str, list[str]] = {}
    for item in chosen:
        by_metric.setdefault(item["metric"], []).append(_pair(item))
    lines = "; ".join(f"{metric}: {', '.join(pairs)}" for metric, pairs in by_metric.items())
    return f"**{title}** ({len(chosen)}): {lines}"


def _pair(item: dict) -> str:
    low, high = item["interval"]
    if item["decision"] == "different":
        relation = ">" if low > 0 else "<"
    else:
        relation = "≈" if item["decision"] == "equivalent" else "?"
    return f"{item['a']} {relation} {item['b']} [{low:+.3f}, {high:+.3f}]"


def _looks(looks: list[dict]) -> str:
    shown = looks if len(looks) <= MAX_LOOKS_SHOWN else [*looks[:5], None, *looks[-5:]]
    texts = ["..." if look is None else
             f"{look['n_questions']}: {look['different']} different, {look['equivalent']} equivalent, "
             f"{look['open']} open" for look in shown]
    return "Looks (questions judged: decisions): " + "; ".join(texts) + "."


def _left_out(block: dict) -> str:
    count = block.get("questions_left_out") or 0
    return (f"{count} question{'s' if count != 1 else ''} lacking a score of some system on some metric "
            "left out of the replay (every look is paired).") if count else ""


def _descriptive_note(block: dict) -> str:
    where = ("here they rest on all the scores given, as a full run's would" if block.get("replay")
             else f"they rest on the {block['stopped_at']} questions judged")
    return ("The fixed-n statistics of this verdict (HSD groups, bootstrap CIs, hypotheses) are descriptive "
            f"beside these decisions ({where}): their error rates hold for a number of questions fixed in "
            "advance, not for one the data chose.")
