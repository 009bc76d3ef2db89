"""Resumable, content-keyed pipeline stages.

A stage writes into `run_dir/<name>/` only through a temporary directory that is renamed into place when
the stage function returns, next to a `_STAGE.json` manifest holding the stage key. A rerun whose key
matches skips the stage; a different key (changed config, inputs or code) recomputes it; a crash leaves
the previous finished output untouched. Inside a long stage, `StageCheckpoint` keeps the items finished
so far (an append-only JSON-lines file per stage key), so a killed run resumes inside the stage.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

MANIFEST = "_STAGE.json"
PARTIAL = ".{name}.partial"
PROJECT_PACKAGES = ("pipelines", "tasks", "judges", "retrievers", "stats", "infra")


def _canonical(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items())}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    return obj


def _module_file(module: str) -> Path | None:
    """The source file of a project module, found on disk without importing it (None for a name that is
    not a module, e.g. `judges.client.LLMClient`)."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if (rest and candidate.is_file()
                or not rest and candidate.name == "__init__.py" and candidate.is_file()):
            return candidate
    return None


def _project_imports(path: Path, package: str) -> set[str]:
    """Project modules that a source file imports (absolute and relative imports alike)."""
    return set(_imports_in(path.read_bytes(), package, PROJECT_PACKAGES))


@functools.lru_cache(maxsize=4096)
def _imports_in(source: bytes, package: str, packages: tuple[str, ...]) -> frozenset[str]:
    """_project_imports of one source text, parsed once a process (keyed by the text itself: an edited
    file is parsed again); every stage key walks the imports of its code (benchmarks/bench_stage_keys.py)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.decode("utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name.split(".")[0] in packages and _module_file(name)}
    return frozenset(found)


def code_modules(*modules: str) -> dict[str, Path]:
    """{module: its source file} for `modules` and every project module they import, transitively: the
    code that `code_version` hashes."""
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        module = todo.pop()
        path = _module_file(module)
        if module in seen or path is None:
            continue
        seen[module] = path
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        todo.extend(_project_imports(path, package) - seen.keys())
    return seen


def code_version(*modules: str, data_dirs: tuple[Path, ...] = ()) -> str:
    """Hash of the source of `modules` and of every project module they import, transitively (plus the
    files under `data_dirs`, e.g. prompt templates): an edit to the code that computes a stage changes
    its key, so a stale output is never reused because somebody forgot to bump a version string."""
    seen = code_modules(*modules)
    digest = hashlib.sha256()
    for module in sorted(seen):
        digest.update(module.encode() + b"\0" + seen[module].read_bytes())
    for directory in data_dirs:
        for file in sorted(
            p for p in Path(directory).rglob("*") if p.is_file() and "__pycache__" not in p.parts
        ):
            digest.update(str(file.relative_to(directory)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def stage_key(name: str, config: Any, upstream_keys: list[str], code: str) -> str:
    payload = json.dumps(
        {"stage": name, "config": _canonical(config), "upstream": upstream_keys, "code": code},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def file_fingerprint(path: Path) -> str:
    """Hash of a dataset file or folder (names, sizes and contents) for stage keys."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class StageResult:
    name: str
    key: str
    out_dir: Path
    reused: bool
    seconds: float
    summary: dict


def read_manifest(out_dir: Path) -> dict | None:
    manifest = out_dir / MANIFEST
    if not manifest.exists():
        return None
    return json.loads(manifest.read_text())


def run_stage(
    run_dir: Path,
    name: str,
    key: str,
    fn: Callable[[Path], dict | None],
    force: bool = False,
) -> StageResult:
    """Run `fn(tmp_dir)` unless `run_dir/name` already holds a finished output with the same key.

    `fn` returns a JSON-able summary (counts, timings) stored in the manifest and returned on reuse.
    """
    out_dir = Path(run_dir) / name
    manifest = read_manifest(out_dir)
    if manifest and manifest.get("key") == key and not force:
        return StageResult(name, key, out_dir, True, 0.0, manifest.get("summary", {}))
    tmp_dir = Path(run_dir) / f".{name}.tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir(parents=True)
    started = time.perf_counter()
    summary = fn(tmp_dir) or {}
    seconds = time.perf_counter() - started
    (tmp_dir / MANIFEST).write_text(
        json.dumps({"stage": name, "key": key, "seconds": seconds, "summary": summary}, indent=2, default=str)
    )
    old = Path(run_dir) / f".{name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if out_dir.exists():
        out_dir.rename(old)
    tmp_dir.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(Path(run_dir) / PARTIAL.format(name=name), ignore_errors=True)
    return StageResult(name, key, out_dir, False, seconds, summary)


class StageCheckpoint:
    """Finished items of a stage that has not finished yet: `run_dir/.<name>.partial/<key>.jsonl`.

    Each `save` appends JSON lines and hands them to the OS before it returns, so a killed run process
    loses at most the shard being written; a torn last line is ignored on load. The lines are also
    fsynced, at most once every `fsync_interval_s` seconds (0: at every save): an fsync costs ~7 ms here,
    and at one per 16-request shard that was a sixth of the driver's time at paper scale; only a crash of
    the machine itself can lose the saves of that last interval (their requests are sent again). A
    different stage key starts from nothing; run_stage removes the folder once the stage's output is in
    place.
    """

    def __init__(self, run_dir: Path, name: str, key: str, fsync_interval_s: float = 1.0):
        self.path = Path(run_dir) / PARTIAL.format(name=name) / f"{key}.jsonl"
        self.fsync_interval_s = fsync_interval_s
        self._last_fsync = float("-inf")

    @classmethod
    def at(cls, path: Path, fsync_interval_s: float = 1.0) -> StageCheckpoint:
        """A checkpoint in a file of the caller's choosing (a batch of a stage:
        tasks/runtime/judge_batches.py)."""
        checkpoint = cls.__new__(cls)
        checkpoint.path, checkpoint.fsync_interval_s = Path(path), fsync_interval_s
        checkpoint._last_fsync = float("-inf")
        return checkpoint

    def load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        done: dict[str, Any] = {}
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the line a kill cut short
                done[record["id"]] = record["value"]
        return done

    def save(self, records: dict[str, Any]) -> None:
        if not records:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.writelines(
                json.dumps({"id": item_id, "value": value}, default=str) + "\n"
                for item_id, value in records.items()
            )
            fh.flush()
            if time.monotonic() - self._last_fsync >= self.fsync_interval_s:
                os.fsync(fh.fileno())
                self._last_fsync = time.monotonic()
