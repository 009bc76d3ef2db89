"""The verdict of a run: what a person reads at the end of `ccrs run` and with `ccrs show`.

One Markdown text, built from what the run directory holds (RunLayout): the reduce stage's stats.json
(means, bootstrap CIs, HSD pairs, hypotheses), failures.json, the judge stages' summaries (judge model,
prompt version), config.json and the generations (which retriever and reader make each system). It is
written as summary.md into the run directory, logged to the MLflow run and printed (rendered by Rich).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stats.letters import compact_letter_display
from stats.multiple import is_significant
from tasks.layout import OUTPUTS_STAGE, RunLayout
from tasks.stage import read_manifest


class VerdictError(RuntimeError):
    """The run directory lacks what a verdict needs (the run did not reach the statistics)."""


def write_summary(run_dir: Path) -> Path:
    layout = RunLayout(run_dir)
    layout.summary_md.write_text(build_summary(run_dir))
    return layout.summary_md


def build_summary(run_dir: Path) -> str:
    layout = RunLayout(run_dir)
    if not layout.stats_json.exists():
        raise VerdictError(f"{run_dir} has no {layout.stats_json.relative_to(layout.root)}: the run did not "
                           "reach the statistics (rerun `ccrs run` to finish it)")
    stats = json.loads(layout.stats_json.read_text())
    config = _read_json(layout.config_json) or {}
    failures = _read_json(layout.failures_json)
    judges = _judge_summaries(layout)
    sections = [
        _header(config, stats, judges) + _left_out(layout),
        _calibration_section(layout, config),
        _systems_section(layout, stats["systems"], (config.get("retrieval") or {}).get("top_k")),
        _means_section(stats, _metric_suites(judges)),
        _judge_noise_section(stats),
        _hypotheses_section(stats, config),
        _failures_section(failures),
        _judges_section(judges),
        _probes_section(layout, config),
    ]
    return "\n\n".join(section for section in sections if section) + "\n"


def build_stats_summary(stats: dict, title: str, hypotheses_path: str | None = None) -> str:
    """The verdict of `ccrs stats` (scores the user brings): the same means, CIs, HSD letters and
    hypotheses as a run's, without the run's systems, failures and judge."""
    header = (f"# Verdict: {title}\n\n"
              f"{stats['n_queries']} questions, {len(stats['systems'])} systems; randomized Tukey HSD with "
              f"B = {stats['b']}, alpha = {stats['alpha']}, {int(round(100 * stats['ci_level']))}% bootstrap "
              "CIs.")
    config = {"stats": {"hypotheses": hypotheses_path}}
    sections = [header, _means_section(stats, {}), _judge_noise_section(stats),
                _hypotheses_section(stats, config)]
    return "\n\n".join(section for section in sections if section) + "\n"


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
    models = sorted({summary.get("judge_model") or "?" for summary in judges.values()})
    return (f"# Verdict: {name}\n\n"
            f"{stats['n_queries']} questions, {len(stats['systems'])} systems, judge "
            f"{', '.join(f'`{model}`' for model in models) or 'unknown'}; randomized Tukey HSD with "
            f"B = {stats['b']}, alpha = {stats['alpha']}, {int(round(100 * stats['ci_level']))}% "
            "bootstrap CIs.")


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
            "pairs that differ significantly.\n\n" + "\n".join([header, rule, *rows]))


def _cell(block: dict, system: str, letters: str) -> str:
    mean = block["means"].get(system)
    if mean is None:
        return "n/a"
    low, high = block["ci95"][system]
    return f"{mean:.2f} [{_number(low)}, {_number(high)}] {letters}".rstrip()


def _judge_noise_section(stats: dict) -> str:
    """Per metric judged more than once per answer (judge.repeats): the judge's reliability, its noise and
    the HSD verdicts that a single repeat would have changed (stats.json per_metric[M].judge_noise)."""
    noisy = {metric: stats["per_metric"][metric].get("judge_noise") for metric in stats["metrics"]
             if "judge_noise" in stats["per_metric"][metric]}
    if not noisy:
        return ""
    rows, flaky = [], []
    for metric, noise in noisy.items():
        if noise is None:
            rows.append(f"| {metric} | | n/a | | | | fewer than 2 questions with every repeat |")
            continue
        low, high = noise["reliability_ci95"]
        pairs = noise["flaky_pairs"]
        stable = round(noise["stable_share"] * len(noise["pair_verdicts"]))
        rows.append(f"| {metric} | {noise['n_repeats']} | {noise['reliability']:.2f} [{_number(low)}, "
                    f"{_number(high)}] | {noise['reliability_one_judgment']:.2f} | "
                    f"{100 * noise['residual_share']:.0f}% | {stable}/{len(noise['pair_verdicts'])} | "
                    f"{', '.join(f'{a} vs {b}' for a, b in pairs) or '-'} |")
        flaky += [f"{a} vs {b} ({metric})" for a, b in pairs]
    text = ("## Judge noise\n\n"
            "Each answer was judged several times; the statistics above use the repeat-averaged scores. "
            "Reliability: the share of the system x question variation (the noise the HSD weighs each "
            "difference against) that is real rather than judge noise, for the mean of the repeats and for "
            "one judgment (1 = a judge without noise; docs/judge-trust.md). Judge noise: its share of one "
            "judgment's variance. Stable: HSD pair verdicts that every repeat alone reproduces.\n\n"
            "| metric | repeats | reliability [95% CI] | one judgment | judge noise | stable "
            "| flaky pairs |\n| --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows))
    if flaky:
        text += (f"\n\n**Flaky:** {', '.join(flaky)}: at least one repeat alone gives another verdict than "
                 "the average, so the verdict rests on the judge's noise; more repeats or more questions "
                 "(`ccrs plan power --pilot`) make it firm.")
    return text


def _hypotheses_section(stats: dict, config: dict) -> str:
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


def _judges_section(judges: dict[str, dict]) -> str:
    if not judges:
        return ""
    rows = [f"| {suite} | {summary.get('judge_model', '?')} | {summary.get('prompt_version', '?')} | "
            f"{_scoring(summary.get('scoring_counts'))} |" for suite, summary in judges.items()]
    repeated = [f"{suite} {summary['repeats']}" for suite, summary in judges.items()
                if summary.get("repeats")]
    repeats = f"\n\nRepeated judgments (judge.repeats): {'; '.join(repeated)}." if repeated else ""
    return ("## Judge\n\n| suite | judge model | prompt version | scores (judge.scoring) |\n"
            "| --- | --- | --- | --- |\n" + "\n".join(rows) + repeats)


def _probes_section(layout: RunLayout, config: dict) -> str:
    """The judge bias probes of a run whose config asks for them (`probes:`, tasks/bias_probes.py)."""
    if not config.get("probes") or not layout.probe_report.exists():
        return ""
    from tasks.bias_probes import probes_markdown

    return probes_markdown(json.loads(layout.probe_report.read_text()))


def _calibration_section(layout: RunLayout, config: dict) -> str:
    """The calibration gate's outcome (`judge.preflight`, tasks/calibration.py), a warning when it failed."""
    from tasks.calibration import calibration_section, read_preflight

    preflight = read_preflight(layout.root, (config.get("judge") or {}).get("preflight"))
    return calibration_section(preflight) if preflight is not None else ""


def _scoring(counts: dict[str, int] | None) -> str:
    """How the ok judgments were scored: `expected 238, integer_fallback 2` (docs/judges.md)."""
    return ", ".join(f"{kind} {n}" for kind, n in counts.items()) if counts else "?"


# --- inputs ------------------------------------------------------------------------------------------

def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


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
    from tasks.hypotheses_io import load_hypotheses

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
