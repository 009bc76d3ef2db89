"""Judge repeats (`judge.repeats`, judges/repeats.py): every judgment asked k times. No stage of its own:
the judge stages plan each unit k times (judges.repeats.planned_judge_units, which the gate's stop line and
`ccrs plan cost` count); the statistics tell the judge's noise from the systems' differences
(stats/judge_noise.py), and the verdict's "Judge noise" section reports it."""
from __future__ import annotations

from judges.config import RepeatOptions
from pipelines.extensions.registry import PlannedCalls, RunExtension, register_extension
from pipelines.reporting.verdict import VerdictInputs, VerdictSection


def planned(config) -> PlannedCalls:
    """What k repeats do to the judge stages' calls (k x the units, as the judge stage plans them)."""
    repeats = config.judge.repeats
    if repeats.mode == "sample":
        how = ("the same prompts again at a temperature: their prompt tokens are sent k times and mostly "
               "served from the prefix cache, their replies are k times the tokens")
    else:
        how = ("repeat 0 as usual, the others with the context's chunks in another order: a reordered "
               "context is computed again")
    return PlannedCalls(judge_note=f"judge.repeats k = {repeats.k}, mode {repeats.mode}: {repeats.k} x the "
                                   f"calls; {how}",
                        calls_clause=f", {repeats.k} times (judge.repeats)")


def tags(config) -> dict[str, str]:
    """`ccrs.judge_repeats`, which `ccrs compare` holds equal between compared runs: 1 without repeats."""
    from judges.repeats import repeats_label

    repeats = config.judge.repeats
    return {"ccrs.judge_repeats": repeats_label(repeats) if repeats.repeated else "1"}


def repeated_line(inputs: VerdictInputs) -> str:
    """The Judge section's line naming each repeated suite's repeats."""
    repeated = [f"{suite} {summary['repeats']}" for suite, summary in inputs.judges.items()
                if summary.get("repeats")]
    return f"Repeated judgments (judge.repeats): {'; '.join(repeated)}." if repeated else ""


def noise_section(inputs: VerdictInputs) -> str:
    """Per metric judged more than once per answer (judge.repeats): the judge's reliability, its noise and
    the HSD verdicts that a single repeat would have changed (stats.json per_metric[M].judge_noise): the
    verdict's "Judge noise", after the means; in `ccrs stats`' verdict too, scores with a repeat column."""
    stats = inputs.stats
    noisy = {metric: stats["per_metric"][metric].get("judge_noise") for metric in stats["metrics"]
             if "judge_noise" in stats["per_metric"][metric]}
    if not noisy:
        return ""
    if len(stats["systems"]) == 1:
        return _single_system_noise_section(noisy)
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


def _single_system_noise_section(noisy: dict[str, dict | None]) -> str:
    rows = []
    for metric, noise in noisy.items():
        if noise is None:
            rows.append(f"| {metric} | | n/a | | fewer than 2 questions with every repeat |")
            continue
        low, high = noise["reliability_ci95"]
        rows.append(f"| {metric} | {noise['n_repeats']} | {noise['reliability']:.2f} [{_number(low)}, "
                    f"{_number(high)}] | {noise['reliability_one_judgment']:.2f} | "
                    f"{100 * noise['residual_share']:.0f}% |")
    return ("## Judge noise\n\n"
            "Each answer was judged several times; the statistics above use the repeat-averaged scores. "
            "Reliability (one system): the share of the spread of the question scores that is real rather "
            "than judge noise, for the mean of the repeats and for one judgment (1 = a judge without noise; "
            "docs/judge-trust.md). Judge noise: its share of one judgment's variance.\n\n"
            "| metric | repeats | reliability [95% CI] | one judgment | judge noise |\n"
            "| --- | --- | --- | --- | --- |\n" + "\n".join(rows))


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


register_extension(RunExtension(
    name="repeats",
    description="judge repeats: every judgment asked k times, the judge's noise measured",
    key="judge.repeats",
    model=RepeatOptions,
    on=lambda repeats: repeats is not None and repeats.repeated,
    plan=planned,
    verdict=(VerdictSection("means", noise_section), VerdictSection("judge", repeated_line)),
    tags=tags,
    names=(r"judge\.repeats", r"\brepeats_note\b", r"\bJudge noise\b", r"\brepeats_label\b"),
    rank=20,
))
