#!/usr/bin/env bash
# One night of the regression series on a cron host (no Kubernetes; docs/nightly.md). `ccrs nightly` runs
# the pipeline as a driver of the Ray head on this machine (RAY_ADDRESS, default: the local head), logs the
# night as its own MLflow run, checks it against the last accepted night of the same series and alerts.
# The script's exit code is the night's: 0 pass / first night, 1 crash, 2 setup error, 3 regression,
# 4 failure rate, 5 incomparable judge settings. Install with:
#   crontab -e  ->  0 2 * * * /path/to/repo/infra/cron/nightly.sh >> /var/log/ccrs-nightly.log 2>&1
# Settings (environment, e.g. in the crontab line):
#   CCRS_NIGHTLY_CONFIG   run config (default configs/cpu-demo.yaml: its question count is a power-plan
#                         choice, docs/planning.md); its mlflow.experiment is the series
#   CCRS_NIGHTLY_OUTPUTS  outputs files of your own systems to evaluate instead of running the pipeline;
#                         dated names are fine (in the crontab line: /data/outputs-$(date +\%F).jsonl),
#                         with --system NAME (an extra argument) for a file without a `system` column
#   CCRS_NIGHTLY_SERIES   the series of the nights (default: the experiment); one per system whose nights
#                         share an experiment
#   CCRS_NOTIFY_URL       alert webhook (Slack-compatible), read by name, never printed
#   MLFLOW_TRACKING_URI   one store for the run and the gate (default: sqlite:///<repo>/mlflow.db)
#   RAY_ADDRESS           the head (default auto: the head on this machine, whose token Ray finds in
#                         ~/.ray/auth_token; an explicit address also needs RAY_AUTH_MODE=token and
#                         that token: docs/cluster.md)
# Extra arguments are passed to `ccrs nightly` (e.g. --llm-base-url URL, --max-failure-rate 0.02).
set -uo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${CCRS_NIGHTLY_CONFIG:-configs/cpu-demo.yaml}
export RAY_ADDRESS=${RAY_ADDRESS:-auto}
export MLFLOW_TRACKING_URI=${MLFLOW_TRACKING_URI:-sqlite:///$PWD/mlflow.db}
args=(nightly --config "$CONFIG")
if [ -n "${CCRS_NIGHTLY_OUTPUTS:-}" ]; then
  read -r -a outputs <<< "$CCRS_NIGHTLY_OUTPUTS"
  args+=(--outputs "${outputs[@]}")
fi
if [ -n "${CCRS_NIGHTLY_SERIES:-}" ]; then
  args+=(--series "$CCRS_NIGHTLY_SERIES")
fi
if [ -n "${CCRS_NOTIFY_URL:-}" ]; then
  args+=(--notify env:CCRS_NOTIFY_URL)
fi
exec .venv/bin/ccrs "${args[@]}" "$@"
