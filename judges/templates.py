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


BASE_SECTION = "base"


@lru_cache(maxsize=128)
def version_chain(suite: str, version: str) -> tuple[str, ...]:
    """The version, then the version it builds on, and so on: a version folder whose `_common.txt` has a
    `[base]` section names another version of the same suite (an ablation of `paper` holds only the files
    and sections it changes)."""
    chain = [version]
    while True:
        common = PROMPTS_ROOT / suite / chain[-1] / "_common.txt"
        base = parse_sections(common.read_text()).get(BASE_SECTION) if common.exists() else None
        if not base:
            return tuple(chain)
        if base in chain:
            raise ValueError(f"{suite} prompt version {version!r}: [base] versions form a loop: "
                             f"{' -> '.join([*chain, base])}")
        chain.append(base)


@lru_cache(maxsize=128)
def load_template(suite: str, version: str, filename: str) -> dict[str, str]:
    """The file's sections, a version's own sections over those of the versions it builds on."""
    sections: dict[str, str] = {}
    paths = [PROMPTS_ROOT / suite / name / filename for name in version_chain(suite, version)]
    if not any(path.exists() for path in paths):
        raise FileNotFoundError(f"{suite} prompt template {paths[0]} not found (prompt_version={version!r})")
    for path in reversed(paths):
        if path.exists():
            sections.update(parse_sections(path.read_text()))
    sections.pop(BASE_SECTION, None)
    return sections

