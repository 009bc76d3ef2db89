#!/usr/bin/env bash
# Nightly rerun on a single-node Ray head (no Kubernetes). Install with:
#   crontab -e  ->  0 2 * * * /path/to/repo/infra/cron/nightly.sh >> /var/log/ccrs-nightly.log 2>&1
# Submits the pipeline to the running Ray head, then checks it against the previous night.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The question count is the config's (see the power-plan note at its dataset: docs/planning.md).
CONFIG=${CCRS_NIGHTLY_CONFIG:-configs/cpu-demo.yaml}
export RAY_ADDRESS=${RAY_ADDRESS:-http://127.0.0.1:8265}
.venv/bin/ray job submit --working-dir . -- ccrs run --config "$CONFIG"
.venv/bin/ccrs compare --baseline previous --fail-on-regression
