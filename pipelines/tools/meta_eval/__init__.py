"""Meta-evaluation of a judge (GroUSE paper, section 4.2), one module a job: run it on unit tests, check
every expected condition, report pass rates, a pass/fail matrix plot and every failing case with the
judge's raw output (run.py); the CCRS calibration on the same variants (paired comparisons:
calibration.py); agreement between two judges' results (agreement.py); the MLflow run (tracking.py).
Checking the GroUSE unit tests (conditions, pass rates, failure modes, the matrix) is tasks/calibration.py's,
shared with a run's calibration gate (`judge.preflight`).

Outputs in `out_dir`: results.json, failures.jsonl, matrix.png; optionally logged to MLflow.
`ccrs meta-eval` (pipelines/meta_eval_cmd.py) reaches them through the names below.
"""
from pipelines.tools.meta_eval.agreement import agreement_between
from pipelines.tools.meta_eval.run import run_meta_eval, write_outputs
from pipelines.tools.meta_eval.tracking import EXPERIMENT, log_meta_eval

__all__ = ["EXPERIMENT", "agreement_between", "log_meta_eval", "run_meta_eval", "write_outputs"]
