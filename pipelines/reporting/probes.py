"""The bias probes' reporting (tasks/bias_probes.py computes them): the plot of the shifts, the console
table of `ccrs probe`, the verdict's "Judge bias probes" section and the MLflow metrics and files."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipelines.reporting.plots import figure_file
from pipelines.reporting.tracking import attach
from tasks.bias_probes import ProbeReport
from tasks.runtime.layout import PROBES_STAGE


def plot_probe_shifts(report: ProbeReport, path: Path) -> Path:
    """One panel per kind: each variant's shift per metric with its CI; the tolerance band shaded,
    flagged cells in red."""
    kinds = report.kinds
    size = (max(6.0, 4.8 * len(kinds)), 4.0)
    with figure_file(path, nrows=1, ncols=len(kinds), figsize=size, squeeze=False,
                     sharey=True) as (figure, axes):
        x = {m: i for i, m in enumerate(report.metrics)}
        for axis, kind in zip(axes.ravel(), kinds):
            cells = [c for c in report.cells if c.kind == kind and c.shift is not None]
            variants = list(dict.fromkeys(c.variant for c in cells))
            width = 0.7 / max(1, len(variants))
            for c in cells:
                offset = (variants.index(c.variant) - (len(variants) - 1) / 2) * width
                axis.errorbar(x[c.metric] + offset, c.shift, [[c.shift - c.ci_low], [c.ci_high - c.shift]],
                              fmt="o", color="tab:red" if c.flagged else "tab:blue", capsize=3, markersize=4)
            axis.axhspan(-report.tolerance, report.tolerance, color="0.9", zorder=0)
            axis.axhline(0.0, color="black", linewidth=0.8)
            axis.set_xticks(list(x.values()), list(x))
            axis.set_xlim(-0.6, len(x) - 0.4)
            axis.set_title(f"{kind} ({len(variants)} variant{'s' if len(variants) != 1 else ''})")
            axis.set_ylabel("shift, probed - clean (0-1)")
        level = int(round(100 * report.confidence))
        figure.suptitle(f"judge {report.judge_model}, {report.n_questions} questions\n{level}% bootstrap "
                        f"CIs; grey: |shift| <= tolerance {report.tolerance}", fontsize=9)
    return path


def _signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


def _plain(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _ci(cell: dict) -> str:
    return "n/a" if cell["ci_low"] is None else f"[{cell['ci_low']:+.3f}, {cell['ci_high']:+.3f}]"


def flag_text(cell: dict) -> str:
    """`>tol` when |shift| exceeds the tolerance, `>tol (CI)` when its whole CI does; `!` marks a flag
    where the construct expects the metric to stay put (or to move the other way)."""
    if not cell["flagged"]:
        return ""
    text = ">tol (CI)" if cell["ci_beyond_tolerance"] else ">tol"
    unexpected = cell["expected"] == "stable" or (cell["shift"] or 0) > 0
    return text + (" !" if unexpected else "")


def _headline(report: dict) -> str:
    level = int(round(100 * report["confidence"]))
    return (f"judge {report['judge_model']} (ccrs {report['prompt_version']}, {report['scoring']} marks), "
            f"{report['n_questions']} questions; shift = probed - clean on the judge's mark (0-1), paired "
            f"over the questions where both judgments succeeded; {level}% bootstrap CI (B = {report['b']}, "
            f"seed {report['seed']}); flagged where |shift| > {report['tolerance']}")


def _legend(report: dict) -> str:
    flagged = [c for c in report["cells"] if c["flagged"]]
    unexpected = sum(1 for c in flagged if flag_text(c).endswith("!"))
    return (f"{len(flagged)} of {len(report['cells'])} cells flagged, {unexpected} where the construct "
            "expects no such move (!); expect down: the metric's construct penalises the perturbation; "
            "metrics that do not read the changed input are not probed (docs/probes.md)")


def probe_table(report: dict) -> list[str]:
    """The console table of `ccrs probe`: one row per kind x variant x metric."""
    width = max([len(c["variant"]) for c in report["cells"]] + [7]) + 2
    lines = [_headline(report),
             f"{'kind':11s}{'variant':{width}s}{'metric':7s}{'expect':8s}{'n':>4s}{'clean':>8s}{'probed':>8s}"
             f"{'shift':>9s}  {'95% CI':19s}{'flag'}"]
    for c in report["cells"]:
        lines.append(f"{c['kind']:11s}{c['variant']:{width}s}{c['metric']:7s}{c['expected']:8s}"
                     f"{c['n_pairs']:>4d}{_plain(c['mean_clean']):>8s}{_plain(c['mean_probed']):>8s}"
                     f"{_signed(c['shift']):>9s}  {_ci(c):19s}{flag_text(c)}".rstrip())
    probed = ", ".join(f"{kind} {n}" for kind, n in report["probed_questions"].items())
    lines += [f"questions probed: {probed}; judgments {report['judgments']} {report['status_counts']}",
              _legend(report)]
    return lines + ([detector_line(report["detector"])] if report.get("detector") else [])


def _count(rate: dict) -> str:
    return f"{rate['flagged']}/{rate['n']}"


def detector_line(detector: dict) -> str:
    """The injection detector's flags: the clean texts (false positives), then each variant's injected
    text."""
    injected = ", ".join(f"{row['variant']} {_count(row)}" for row in detector["injected"]) or "none"
    return (f"detector (judges/injection.py injection_markers) flagged {_count(detector['clean_responses'])} "
            f"clean responses, {_count(detector['clean_chunks'])} clean chunks; injected texts: {injected}")


def probes_markdown(report: dict) -> str:
    """The verdict's "Judge bias probes" section."""
    rows = [f"| {c['kind']} | {c['variant']} | {c['metric']} | {c['expected']} | {c['n_pairs']} | "
            f"{_plain(c['mean_clean'])} | {_signed(c['shift'])} | {_ci(c)} | {flag_text(c) or '-'} |"
            for c in report["cells"]]
    return ("## Judge bias probes\n\n" + _headline(report) + ".\n\n"
            "| kind | variant | metric | expected | n | clean | shift | 95% CI | flag |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows)
            + "\n\n" + _legend(report) + "."
            + (f"\n\n{detector_line(report['detector'])}." if report.get("detector") else ""))


def probe_metrics(report: dict) -> dict[str, float]:
    """probe/<kind>/<variant>/<metric>/shift, ci_low, ci_high, flagged ('@' of a variant as '.'), and the
    number of flagged cells."""
    metrics: dict[str, float] = {}
    for c in report["cells"]:
        if c["shift"] is not None:
            base = "/".join(("probe", c["kind"], c["variant"], c["metric"])).replace("@", ".")
            metrics.update({f"{base}/{name}": float(c[name]) for name in ("shift", "ci_low", "ci_high")})
            metrics[f"{base}/flagged"] = float(c["flagged"])
    metrics["probe/flagged_cells"] = float(len(report["flagged"]))
    return metrics | detector_metrics(report.get("detector"))


def detector_metrics(detector: dict | None) -> dict[str, float]:
    """probe/injection/detector/<variant ('@' as '.')>/flag_rate, and .../clean_responses/flag_rate and
    .../clean_chunks/flag_rate."""
    if not detector:
        return {}
    rates = {"clean_responses": detector["clean_responses"], "clean_chunks": detector["clean_chunks"],
             **{row["variant"].replace("@", "."): row for row in detector["injected"]}}
    return {f"probe/injection/detector/{name}/flag_rate": float(rate["flag_rate"])
            for name, rate in rates.items() if rate["flag_rate"] is not None}


def log_probes(report: dict, files: Sequence[Path], tracking_uri: str, run_id: str) -> None:
    """The report's metrics and its files (under probes/) into MLflow run `run_id`."""
    attach(tracking_uri, run_id, metrics=probe_metrics(report), files=files, artifact_path=PROBES_STAGE)
