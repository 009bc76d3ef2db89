"""The docs' lists checked against their sources, so that they cannot go stale (pure: source files only).

- README.md's command table names every `ccrs` subcommand, and nothing else (pipelines/cli.py SUBCOMMANDS,
  from which the parser is built);
- docs/index.md names every file of docs/;
- every relative link of README.md and docs/*.md reaches a file, and its #anchor a heading there;
- docs/architecture.md's stage table and picture name every stage of the run layout
(tasks/runtime/layout.py) and
  of every `run_stage` call in tasks/, and the table names the module that runs each.
"""
from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from pipelines.cli import SUBCOMMANDS
from tasks.runtime import layout
from tasks.runtime.layout import PIPELINE_STAGES, RunLayout

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def section(text: str, heading: str) -> str:
    """The lines under `heading` (a whole heading line) up to the next heading of its level or higher."""
    lines = text.splitlines()
    start = lines.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if re.match(rf"#{{1,{level}}} ", lines[i]) and not in_fence(lines, i)), len(lines))
    return "\n".join(lines[start + 1:end])


def in_fence(lines: list[str], index: int) -> bool:
    return sum(bool(FENCE.match(line)) for line in lines[:index]) % 2 == 1


def table_first_cells(text: str) -> list[str]:
    """The first cell of every body row of the Markdown tables in `text`."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    cells = [re.split(r"(?<!\\)\|", row)[1].strip() for row in rows]
    return [cell for cell in cells if cell and not set(cell) <= set("-: ")][1:] if cells else []


def code_spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def headings_anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (fenced code skipped, duplicates numbered)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    anchors: set[str] = set()
    for i, line in enumerate(lines):
        match = re.match(r"#{1,6} (.+)", line)
        if not match or in_fence(lines, i):
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def relative_links(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [target for i, line in enumerate(lines) if not in_fence(lines, i)
            for target in LINK.findall(line) if not re.match(r"[a-z]+:", target)]


# --- README's command table

def test_readme_command_table_names_every_subcommand():
    cells = table_first_cells(section(README.read_text(encoding="utf-8"), "## Commands"))
    named = [span.split()[1] for cell in cells for span in code_spans(cell) if span.startswith("ccrs ")]
    assert sorted(set(named)) == sorted(SUBCOMMANDS), (
        f"README's command table: missing {sorted(set(SUBCOMMANDS) - set(named))}, "
        f"not a subcommand {sorted(set(named) - set(SUBCOMMANDS))}")
    assert len(named) == len(set(named)), f"a subcommand named twice: {named}"


# --- docs/index.md and the links

def test_docs_index_names_every_docs_file():
    index = DOCS / "index.md"
    linked = {(DOCS / target.split("#")[0]).resolve() for target in relative_links(index)}
    files = {path.resolve() for path in DOCS.rglob("*") if path.is_file() and not path.name.startswith(".")}
    missing = sorted(path.relative_to(DOCS).as_posix() for path in files - linked)
    assert not missing, f"docs/index.md does not name: {missing}"


def test_every_relative_link_of_the_readme_and_docs_resolves():
    broken = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for target in relative_links(page):
            file_part, _, anchor = target.partition("#")
            path = (page.parent / file_part).resolve() if file_part else page
            if not path.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in headings_anchors(path):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


# --- docs/architecture.md's stages

@cache
def module_strings(path: Path) -> dict[str, str]:
    """Module-level `NAME = "text"` assignments of a source file, and the names it imports from a project
    module, resolved in that module's file the same way."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:  # NAME = "a" and NAME1, NAME2 = "a", "b"
                pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                         and isinstance(node.value, ast.Tuple) else [(target, node.value)])
                found |= {name.id: value.value for name, value in pairs if isinstance(name, ast.Name)
                          and isinstance(value, ast.Constant) and isinstance(value.value, str)}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tasks."):
            source = module_strings(REPO / (node.module.replace(".", "/") + ".py"))
            found |= {alias.asname or alias.name: source[alias.name] for alias in node.names
                      if alias.name in source}
    return found


@cache
def run_stage_calls() -> dict[str, str]:
    """Stage folder -> module, for every `run_stage(run_dir, STAGE, ...)` in tasks/ whose STAGE is a string
    or a module-level constant (the judge stage's folder is computed per suite: `judge_<suite>`)."""
    calls: dict[str, str] = {}
    for path in sorted((REPO / "tasks").glob("*.py")):
        constants = module_strings(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run_stage"
                    and len(node.args) >= 2):
                continue
            stage = node.args[1]
            name = stage.value if isinstance(stage, ast.Constant) else constants.get(getattr(stage, "id", ""))
            if name is not None:
                calls[name] = path.relative_to(REPO).as_posix()
    return calls


def declared_stages() -> set[str]:
    """Every stage the code declares: the --from-stage choices, the layout's `*_STAGE` folders and every
    folder a `run_stage` call writes."""
    constants = {value for name, value in vars(layout).items()
                 if name.endswith("_STAGE") and isinstance(value, str)}
    return set(PIPELINE_STAGES) | constants | set(run_stage_calls())


def stage_name(folder: str) -> str:
    """A documented folder as a stage name: `judge_<suite>` is the judge stage."""
    return "judge" if folder == RunLayout.judge_stage("<suite>") else folder


def architecture_stage_rows() -> dict[str, str]:
    """docs/architecture.md's stage table: stage -> the module cell."""
    text = section((DOCS / "architecture.md").read_text(encoding="utf-8"), "## The stages")
    rows = [re.split(r"(?<!\\)\|", line)[1:3] for line in text.splitlines() if line.startswith("| `")]
    return {stage_name(code_spans(stage)[0]): module.strip() for stage, module in rows}


def test_architecture_stage_table_matches_the_run_layout():
    rows = architecture_stage_rows()
    declared = declared_stages()
    assert sorted(rows) == sorted(declared), (
        f"docs/architecture.md's stage table: missing {sorted(declared - set(rows))}, "
        f"not a stage {sorted(set(rows) - declared)}")
    wrong = {stage: (rows[stage], module) for stage, module in run_stage_calls().items()
             if rows[stage] != module}
    assert not wrong, f"stage table names the wrong module (table, code): {wrong}"
    missing_files = [module for module in rows.values() if not (REPO / module).is_file()]
    assert not missing_files, f"stage table names modules that do not exist: {missing_files}"


def test_architecture_picture_shows_every_stage():
    picture = section((DOCS / "architecture.md").read_text(encoding="utf-8"), "## One picture")
    words = {stage_name(word) for word in re.findall(r"[\w<>]+", picture)}
    missing = sorted(declared_stages() - words)
    assert not missing, f"docs/architecture.md's picture lacks the stages {missing}"
