"""The calibration gate's and `ccrs meta-eval`'s reporting (tasks/calibration.py checks the judge): the
pass/fail matrix plot, the verdict's "Judge calibration" section, and the MLflow runs and files."""
from __future__ import annotations

from pathlib import Path

from judges.config import PreflightOptions
from judges.grouse import METRIC_ORDER
from pipelines.reporting.plots import figure_file, listed_colormap
from pipelines.reporting.tracking import attach, log_failed_run
from tasks.calibration import FAILURES_FILE, Preflight, TestOutcome, read_preflight
from tasks.runtime.layout import PREFLIGHT_STAGE, RunLayout


def plot_matrix(outcomes: list[TestOutcome], path: Path, title: str) -> Path:
    """Tests (rows) x metrics (columns): green pass, red wrong mark, orange no usable reply."""
    codes = [[0 if o.checks[m]["passed"] else (2 if o.checks[m]["status"] == "failed" else 1)
              for m in METRIC_ORDER] for o in outcomes]
    path.parent.mkdir(parents=True, exist_ok=True)
    with figure_file(path, dpi=120, figsize=(7, max(3.0, 0.17 * len(outcomes) + 1.5))) as (_, ax):
        ax.imshow(codes or [[0] * len(METRIC_ORDER)], cmap=listed_colormap(["#4caf50", "#e53935", "#fb8c00"]),
                  vmin=0, vmax=2, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(len(METRIC_ORDER)), [m.replace("_", "\n") for m in METRIC_ORDER], fontsize=7)
        ax.set_yticks(range(len(outcomes)), [o.test_id for o in outcomes], fontsize=5)
        ax.set_title(f"{title}\ngreen: pass, red: wrong mark, orange: no usable reply", fontsize=8)
    return path


def log_stopped_run(tracking_uri: str, experiment: str, run_name: str, line: str, preflight: Preflight,
                    run_dir: Path, tags: dict[str, str]) -> str:
    """A run the gate stopped, as an MLflow run of its own: status FAILED, the line as its error
    (pipelines.reporting.tracking.log_failed_run), the gate's settings as params, and what `log_preflight`
    logs."""
    run_id = log_failed_run(tracking_uri=tracking_uri, experiment=experiment, run_name=run_name, error=line,
                            tags=tags, log_file=RunLayout(run_dir).console_log)
    settings = {f"judge.preflight.{key}": value for key, value in preflight.options.model_dump().items()}
    settings["judge.model"] = preflight.summary["judge_model"]
    attach(tracking_uri, run_id, params=settings)
    log_preflight(run_dir, preflight.options, tracking_uri, run_id)
    return run_id


def log_preflight(run_dir: Path, options: PreflightOptions | dict | None, tracking_uri: str,
                  run_id: str) -> None:
    """Onto the run's MLflow run: the pass rates and counts as metrics (`preflight_pass_rate_<metric>`, as
    every stage summary's numbers are named), the decision as the tag `ccrs.judge_calibration` (pass, warn
    or stop), the stage's files under preflight/."""
    preflight = read_preflight(run_dir, options)
    if preflight is None:
        return
    metrics = {f"{PREFLIGHT_STAGE}_{key}": value for key, value in preflight.summary.items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)}
    attach(tracking_uri, run_id, metrics=metrics, tags={"ccrs.judge_calibration": preflight.status},
           folder=RunLayout(run_dir).preflight_dir, artifact_path=PREFLIGHT_STAGE)


def calibration_section(preflight: Preflight) -> str:
    """The verdict's "Judge calibration" section: the decision, then the pass rate per metric."""
    s = preflight.summary
    heading = (f"**Warning: {preflight.line()}.** The judge failed more of its unit-test conditions than "
               "`judge.preflight.min_pass_rate` allows: read its scores with that in mind."
               if preflight.status == "warn" else f"{preflight.line()}.")
    rows = [f"| {metric} | {s[f'pass_rate_{metric}']:.2f} |"
            for metric in (*METRIC_ORDER, "overall", "tests_all_passed")]
    return ("## Judge calibration\n\n" + heading + "\n\n"
            f"{s['tests']} GroUSE unit tests (`{s['tests_path']}`), protocol {s['protocol']}, prompt version "
            f"{s['prompt_version']}, judge `{s['judge_model']}`; the overall pass rate (mean over the six "
            f"metrics) is held to the threshold. Failing checks: {PREFLIGHT_STAGE}/{FAILURES_FILE}.\n\n"
            "| metric | pass rate |\n| --- | --- |\n" + "\n".join(rows))
