"""The verdict of a run: what a person reads at the end of `ccrs run` and with `ccrs show`.

One Markdown text, built from what the run directory holds (RunLayout): the reduce stage's stats.json
(means, bootstrap CIs, HSD pairs, hypotheses), failures.json, the judge stages' summaries (judge model,
prompt version), config.json and the generations (which retriever and reader make each system). It is
written as summary.md into the run directory, logged to the MLflow run and printed (rendered by Rich).

The core sections are the verdict of every run; the sections of the run's optional parts (the run
extensions of pipelines/extensions/, which tasks/ does not import) come in as `VerdictSection`s from the
caller, each placed after the core section it names.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from stats.hsd import questions_to_separate
from stats.letters import compact_letter_display
from stats.multiple import is_significant
from tasks.runtime.layout import OUTPUTS_STAGE, RunLayout
from tasks.runtime.stage import read_manifest


MIN_QUESTIONS = 5  # a metric on fewer complete questions gets the "too few questions" line


class VerdictError(RuntimeError):
    """The run directory lacks what a verdict needs (the run did not reach the statistics)."""


# Where an added section goes: after the headline, after the means table, after the hypotheses, as a
# paragraph of the Judge section, or after the Judge section (the last core section of a verdict with
# statistics).
Anchor = Literal["header", "means", "hypotheses", "judge", "end"]


@dataclass(frozen=True)
class VerdictInputs:
    """What a section reads: stats.json, the run's config.json ({} for `ccrs stats`), the run directory
    (None for `ccrs stats`) and the judge stages' summaries ({suite: summary})."""

    stats: dict
    config: dict
    layout: RunLayout | None = None
    judges: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class VerdictSection:
    """A section the caller adds after the core section `after`: `render` gives its Markdown, "" for none."""

    after: Anchor
    render: Callable[[VerdictInputs], str]


def write_summary(run_dir: Path, sections: Sequence[VerdictSection] = ()) -> Path:
    layout = RunLayout(run_dir)
    layout.summary_md.write_text(build_summary(run_dir, sections))
    return layout.summary_md


def build_summary(run_dir: Path, sections: Sequence[VerdictSection] = ()) -> str:
    layout = RunLayout(run_dir)
    if not layout.stats_json.exists():
        raise VerdictError(f"{run_dir} has no {layout.stats_json.relative_to(layout.root)}: the run did not "
                           "reach the statistics (rerun `ccrs run` to finish it)")
    stats = json.loads(layout.stats_json.read_text())
    config = _read_json(layout.config_json) or {}
    failures = _read_json(layout.failures_json)
    judges = _judge_summaries(layout)
    inputs = VerdictInputs(stats, config, layout, judges)
    if not stats["systems"]:
        return _unscored_summary(layout, config, failures, judges, sections, inputs)
    return _joined([
        ("header", _header(config, stats, judges) + _left_out(layout)),
        ("systems", _systems_section(layout, stats["systems"], (config.get("retrieval") or {}).get("top_k"))),
        ("means", _means_section(stats, _metric_suites(judges))),
        ("hypotheses", _hypotheses_section(stats, config)),
        ("failures", _failures_section(failures)),
        ("judge", _judges_section(judges)),
        ("end", ""),
    ], sections, inputs)


def build_stats_summary(stats: dict, title: str, hypotheses_path: str | None = None,
                        sections: Sequence[VerdictSection] = ()) -> str:
    """The verdict of `ccrs stats` (scores the user brings): the same means, CIs, HSD letters and
    hypotheses as a run's, without the run's systems, failures and judge."""
    header = f"# Verdict: {title}\n\n{stats['n_queries']} questions, {_systems_and_tests(stats, '')}"
    config = {"stats": {"hypotheses": hypotheses_path}}
    core = [("header", header), ("means", _means_section(stats, {})),
            ("hypotheses", _hypotheses_section(stats, config))]
    return _joined(core, sections, VerdictInputs(stats, config))


def _joined(core: list[tuple[str, str]], sections: Sequence[VerdictSection], inputs: VerdictInputs) -> str:
    """The core sections in order, each followed by the added sections placed after it; empty ones left out
    (an added section is rendered only where its anchor is among the core sections)."""
    texts = []
    for anchor, text in core:
        texts += [text, *(section.render(inputs) for section in sections if section.after == anchor)]
    return "\n\n".join(text for text in texts if text) + "\n"


def letter_groups(block: dict[str, Any], alpha: float) -> dict[str, str]:
    """Compact letter display of one metric's stats.json block ({} when its statistics are null)."""
    means = block["means"]
    if any(value is None for value in means.values()):
        return {}
    significant = [(pair["a"], pair["b"]) for pair in block["pairwise"]
                   if pair["p_value"] is not None and is_significant(pair["p_value"], alpha)]
    return compact_letter_display(means, significant)


# --- sections ---------------------------------------------------------------------------------------

def _header(config: dict, stats: dict, judges: dict[str, dict]) -> str:
    name = config.get("name", "run")
    counts = f"{stats['n_queries']} questions, {_systems_and_tests(stats, _judge_models(judges))}"
    return f"# Verdict: {name}\n\n{counts}"


def _judge_models(judges: dict[str, dict]) -> str:
    models = sorted({summary.get("judge_model") or "?" for summary in judges.values()})
    return f", judge {', '.join(f'`{model}`' for model in models) or 'unknown'}"


def _systems_and_tests(stats: dict, judge: str) -> str:
    """The header's `6 systems, judge `m`; randomized Tukey HSD with B = ..., 95% bootstrap CIs.`"""
    ci = f"{int(round(100 * stats['ci_level']))}%"
    if len(stats["systems"]) == 1:
        return f"1 system ({stats['systems'][0]}){judge}; {ci} bootstrap CIs from B = {stats['b']} resamples."
    return (f"{len(stats['systems'])} systems{judge}; randomized Tukey HSD with B = {stats['b']}, alpha = "
            f"{stats['alpha']}, {ci} bootstrap CIs.")


def _left_out(layout: RunLayout) -> str:
    """`ccrs evaluate`: questions that not every system answered are outside the statistics; say so."""
    if not layout.evaluates_outputs:
        return ""
    summary = (read_manifest(layout.stage_dir(OUTPUTS_STAGE)) or {}).get("summary") or {}
    left_out = summary.get("questions_left_out", 0)
    if not left_out:
        return ""
    return (f" {left_out} of {summary['questions']} questions were not answered by every system and are left "
            "out of the statistics (which compare systems on the same questions).")


def _systems_section(layout: RunLayout, systems: list[str], top_k: int | None) -> str:
    makeup = _system_makeup(layout)
    if not makeup:
        return ""
    shown = [system for system in systems if system in makeup]
    k = {system: makeup[system][2] for system in shown}
    k_column = any(k.values())
    if layout.evaluates_outputs:
        header, cells = "| system | outputs |", {s: f"| {s} | {_escape(makeup[s][1])} |" for s in shown}
    else:
        header, cells = "| system | retriever | reader |", {s: f"| {s} | {makeup[s][0]} | {makeup[s][1]} |"
                                                            for s in shown}
    if k_column:
        header, cells = header + " k |", {s: f"{cells[s]} {k[s] or 'n/a'} |" for s in shown}
    rule = "|" + " --- |" * header.count(" |")
    table = "\n".join([header, rule, *(cells[s] for s in shown)])
    note = "\n\nk: the contexts each answer came with." if layout.evaluates_outputs else _k_note(top_k)
    return "## Systems\n\n" + table + (note if k_column else "")


def _k_note(top_k: int | None) -> str:
    retrieved = f" of the {top_k} retrieved" if top_k else ""
    return (f"\n\nk: the chunks each answer's prompt held{retrieved} (fewer where the reader's window could "
            "not hold them all: whole chunks, lowest rank dropped first); failed generations left out.")


def k_text(chunks: Sequence[int]) -> str:
    """How many chunks a system's answers received: `20`, or `18-20 (mean 19.62)` when they differ."""
    if not len(chunks):
        return ""
    low, high = min(chunks), max(chunks)
    return str(low) if low == high else f"{low}-{high} (mean {sum(chunks) / len(chunks):.2f})"


def _means_section(stats: dict, suites: dict[str, str]) -> str:
    few = _few_questions_line(stats)
    if len(stats["systems"]) == 1:
        return _single_system_means(stats, suites) + (f"\n\n{few}" if few else "")
    systems, alpha = stats["systems"], stats["alpha"]
    header = "| metric | " + " | ".join(systems) + " | DP |"
    rule = "| --- | " + " | ".join("---" for _ in systems) + " | --- |"
    rows = []
    for metric in stats["metrics"]:
        block = stats["per_metric"][metric]
        letters = letter_groups(block, alpha)
        cells = [_cell(block, system, letters.get(system, "")) for system in systems]
        label = f"{metric} ({suites[metric]})" if metric in suites else metric
        power = block["discriminative_power"]
        rows.append(f"| {label} | " + " | ".join(cells) + f" | {_number(power)} |")
    return ("## Means, 95% CIs and HSD groups\n\n"
            f"Per metric, systems sharing a letter are not significantly different (randomized Tukey HSD, "
            f"alpha = {alpha}); the highest mean gets `a`. DP: discriminative power, the share of system "
            "pairs that differ significantly.\n\n" + "\n".join([header, rule, *rows])
            + (f"\n\n{few}" if few else ""))


def _single_system_means(stats: dict, suites: dict[str, str]) -> str:
    (system,) = stats["systems"]
    rows = [f"| {f'{metric} ({suites[metric]})' if metric in suites else metric} | "
            f"{_cell(stats['per_metric'][metric], system, '')} |" for metric in stats["metrics"]]
    return ("## Means and 95% CIs\n\n"
            f"One system ({system}): the HSD groups, discriminative power and hypotheses compare systems and "
            "need two or more.\n\n" + "\n".join([f"| metric | {system} |", "| --- | --- |", *rows]))


def _few_questions_line(stats: dict) -> str:
    """One line when a metric rests on fewer questions than can separate anything: for several systems,
    fewer than the HSD needs to find any pair different (or MIN_QUESTIONS); for one system, fewer than
    a night's paired comparison with its baseline needs (the same count as two systems')."""
    k, alpha = len(stats["systems"]), stats["alpha"]
    separate = questions_to_separate(max(k, 2), alpha)
    needed = max(MIN_QUESTIONS, separate)
    few = {metric: stats["per_metric"][metric]["n_used"] for metric in stats["metrics"]
           if 0 < stats["per_metric"][metric]["n_used"] < needed}
    if not few:
        return ""
    listed = ", ".join(f"{metric} ({n})" for metric, n in few.items())
    if k == 1:
        why = (f"95% CIs from so few are rough, and a night compared with its baseline (`ccrs nightly`) "
               f"cannot show a significant drop on fewer than {separate}")
    elif min(few.values()) < separate:
        why = (f"with {k} systems the HSD cannot find any pair different at alpha = {alpha} on fewer than "
               f"{separate}")
    else:
        why = "their 95% CIs and HSD groups rest on too few questions to be trusted"
    return (f"**Too few questions:** {listed} rest on fewer than {needed} questions each: {why}; "
            "`ccrs plan power` says how many questions a difference needs.")


def _cell(block: dict, system: str, letters: str) -> str:
    mean = block["means"].get(system)
    if mean is None:
        return "n/a"
    low, high = block["ci95"][system]
    return f"{mean:.2f} [{_number(low)}, {_number(high)}] {letters}".rstrip()


def _hypotheses_section(stats: dict, config: dict) -> str:
    if len(stats["systems"]) == 1:
        return ""  # the means section's line says that hypotheses need two or more systems
    results = stats.get("hypotheses") or {}
    if not results:
        return ("## Hypotheses\n\nNone stated (set `stats.hypotheses` in the run config; `ccrs evaluate` and "
                "`ccrs stats`: --hypotheses FILE).")
    statements = _hypothesis_statements(config)
    rows = []
    for name, result in results.items():
        verdict = "**supported**" if result["significant"] else "not supported"
        rows.append(f"| {name} | {statements.get(name, '')} | {result['direction']}, {result['combine']} | "
                    f"{_p(result['raw_p'])} | {_p(result['adjusted_p'])} | {verdict} |")
    return ("## Hypotheses\n\n"
            f"Holm-adjusted over the {len(results)} hypotheses; supported when the adjusted p < "
            f"{stats['alpha']}.\n\n"
            "| hypothesis | statement | test | raw p | adjusted p | verdict |\n"
            "| --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows))


def _failures_section(failures: dict | None) -> str:
    if not failures:
        return ""
    rows = []
    for stage, block in failures["stages"].items():
        reasons = sorted(block["failure_reasons"].items(), key=lambda kv: -kv[1])[:2]
        shown = "; ".join(f"{reason} ({count})" for reason, count in reasons) or "-"
        rows.append(f"| {stage} | {block['items']} | {block['failed']} | {block['retries']} | "
                    f"{_escape(shown)} |")
    return (f"## Failures\n\n{failures['failed_total']} failed items (a failed judgment has no score and its "
            "query drops out of that metric's statistics).\n\n"
            "| stage | items | failed | retries | main reasons |\n| --- | --- | --- | --- | --- |\n"
            + "\n".join(rows))


def _unscored_summary(layout: RunLayout, config: dict, failures: dict | None, judges: dict[str, dict],
                      sections: Sequence[VerdictSection] = (), inputs: VerdictInputs | None = None) -> str:
    """The verdict of a run in which no judgment has a score (every one failed): what failed, the most
    common reasons and what the judge replied, instead of statistics there is nothing to compute from."""
    from pipelines.reporting.failures import failed_replies, judge_failure_reasons, unscored_line

    headline = unscored_line(failures) if failures else "no judgment has a score: no statistics"
    reasons = judge_failure_reasons(failures) if failures else []
    core = [
        ("headline", f"# Verdict: {config.get('name', 'run')}\n\n**{headline[0].upper() + headline[1:]}.** "
         "The judge's replies below say why; a judge that answers in prose rather than marks needs other "
         "judge settings (docs/judges.md: judge.scoring, structured output) or another judge model."),
        ("failures", _failures_section(failures)),
        ("reasons", "## Most common reasons\n\n| reason | judgments |\n| --- | --- |\n"
         + "\n".join(f"| {_escape(reason)} | {count} |" for reason, count in reasons) if reasons else ""),
        ("replies", _replies_section(failed_replies(_all_judgments(layout)))),
        ("judge", _judges_section(judges)),
    ]
    return _joined(core, sections, inputs or VerdictInputs({}, config, layout, judges))


def _replies_section(replies) -> str:
    if replies.empty:
        return ""
    rows = [f"| {row.query_id} | {row.system} | {row.metric} | {_escape(row.reason or '')} | "
            f"{_escape(row.raw) or '(empty)'} |" for row in replies.itertuples()]
    return ("## The judge's replies\n\nA few failed judgments and what the judge replied (every reply: "
            "`judge_<suite>/judgments.parquet`, column `raw`; the MLflow run's per-sample table).\n\n"
            "| question | system | metric | reason | reply |\n| --- | --- | --- | --- | --- |\n"
            + "\n".join(rows))


def _judges_section(judges: dict[str, dict]) -> str:
    if not judges:
        return ""
    rows = [f"| {suite} | {summary.get('judge_model', '?')} | {summary.get('prompt_version', '?')} | "
            f"{_scoring(summary.get('scoring_counts'))} |" for suite, summary in judges.items()]
    return ("## Judge\n\n| suite | judge model | prompt version | scores (judge.scoring) |\n"
            "| --- | --- | --- | --- |\n" + "\n".join(rows))


def _scoring(counts: dict[str, int] | None) -> str:
    """How the ok judgments were scored: `expected 238, integer_fallback 2` (docs/judges.md)."""
    if counts is None:
        return "?"
    return ", ".join(f"{kind} {n}" for kind, n in counts.items()) or "none (no judgment scored)"


# --- inputs ------------------------------------------------------------------------------------------

def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _all_judgments(layout: RunLayout):
    import pandas as pd

    frames = [pd.read_parquet(layout.judgments(suite)) for suite in layout.judged_suites()
              if layout.judgments(suite).exists()]
    columns = ["query_id", "system", "metric", "status", "reason", "raw"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def _judge_summaries(layout: RunLayout) -> dict[str, dict]:
    summaries = {}
    for suite in layout.judged_suites():
        manifest = read_manifest(layout.judge_dir(suite)) or {}
        summaries[suite] = manifest.get("summary") or {}
    return summaries


def _metric_suites(judges: dict[str, dict]) -> dict[str, str]:
    """{metric: suite} for the suites judged in this run (shown only when more than one was)."""
    if len(judges) < 2:
        return {}
    from judges.suite import suites

    registered = suites()
    return {metric: name for name in judges if name in registered for metric in registered[name].metrics}


def _system_makeup(layout: RunLayout) -> dict[str, tuple[str, str, str]]:
    """{system: (retriever, reader, k)}; k is `k_text` of the ok answers' n_chunks_used ("" when the
    generations do not record it)."""
    if not layout.generations.exists():
        return {}
    import pandas as pd
    import pyarrow.parquet as pq

    present = set(pq.ParquetFile(layout.generations).schema_arrow.names)
    wanted = ["system", "retriever", "reader", *(c for c in ("n_chunks_used", "status") if c in present)]
    rows = pd.read_parquet(layout.generations, columns=wanted)
    first = rows.drop_duplicates("system")
    answered = rows[rows["status"] == "ok"] if "status" in rows else rows
    used = answered.groupby("system")["n_chunks_used"].apply(list) if "n_chunks_used" in rows else {}
    return {row.system: (row.retriever, row.reader, k_text([int(n) for n in used.get(row.system, [])]))
            for row in first.itertuples()}


def _hypothesis_statements(config: dict) -> dict[str, str]:
    path = ((config.get("stats") or {}).get("hypotheses"))
    if not path or not Path(path).exists():
        return {}
    from tasks.reduce import load_hypotheses

    try:
        return {h.name: _escape(h.description) for h in load_hypotheses(path).hypotheses}
    except Exception:  # noqa: BLE001 - a statement is a courtesy; the p-values come from stats.json
        return {}


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
