"""Versioned prompt templates: `judges/prompts/<suite>/<version>/<file>.txt`, split into `[section]`s."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

PROMPTS_ROOT = Path(__file__).parent / "prompts"
_SECTION = re.compile(r"\[(\w+)\]")


def parse_sections(text: str) -> dict[str, str]:
    """`[name]` lines start a section; each section's text is stripped."""
    sections: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        match = _SECTION.fullmatch(line.strip())
        if match:
            current = match.group(1)
            sections[current] = ""
        elif current:
            sections[current] += line + "\n"
    return {name: body.strip() for name, body in sections.items()}


def versions(suite: str) -> tuple[str, ...]:
    """The prompt versions a suite has: its folders under judges/prompts/<suite>/."""
    root = PROMPTS_ROOT / suite
    return tuple(sorted(p.name for p in root.iterdir() if p.is_dir())) if root.is_dir() else ()


@lru_cache(maxsize=128)
def load_template(suite: str, version: str, filename: str) -> dict[str, str]:
    path = PROMPTS_ROOT / suite / version / filename
    if not path.exists():
        raise FileNotFoundError(f"{suite} prompt template {path} not found (prompt_version={version!r})")
    return parse_sections(path.read_text())

