"""docs/fidelity.md claims nothing the code does not do, where a test can tell (issue 35 item 6; pure: the
doc, the registries and the goal-tree files as they are now):

- every metric name it cites (a code span with a suite's metric prefix, or any `X@k`) is a metric of the
  judge registry (what `ccrs metrics` lists, judges/suite.py) or of the retrieval metrics
  (retrievers/metrics.py);
- every `ccrs COMMAND [SUBCOMMAND] --option` it cites is a command of the CLI (pipelines/cli.py
  SUBCOMMANDS), a subcommand that command's parser has, and options that parser (or its parent) takes;
  every `--option` cited on its own is an option of some command;
- every metric a goal tree (configs/gqm/*.yaml) marks as a proxy (`proxy_for`, or "proxy" in its label
  or on its line) is written as one in the GQM section ("`X` proxy for ...").
"""
from __future__ import annotations

import argparse
import fnmatch
import importlib
import re
from functools import cache
from pathlib import Path

import yaml

from pipelines.cli import SUBCOMMANDS
from tests.test_docs import DOCS, REPO, section

FIDELITY = DOCS / "fidelity.md"
GQM_HEADING = "## GQM (gqm-thesis)"
GOAL_TREES = sorted((REPO / "configs" / "gqm").glob("*.yaml"))
# A code span that names a metric: a suite's prefix, or a retrieval metric at cut-off k.
METRIC_SPAN = re.compile(r"^(?:(?:vera|rc|gqm|grouse|ccrs)_[a-z0-9_*]+|[A-Za-z]+@k)$")
AT_K = re.compile(r"(?<![\w@])([A-Za-z]+@k)\b")
# Code spans with a metric prefix that name code, not a metric.
NOT_METRICS = {"vera_summary_prompt"}  # judges/readers.py: the VERA summarisation reader prompt
COMMAND = re.compile(r"\bccrs ([a-z][a-z-]*)((?: [^`|]*)?)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
PROXY_MARK = re.compile(r"`([^`\n]+)`[\s,(]*(?:is |as )?(?:a )?proxy\b", flags=re.IGNORECASE)
CLI_OPTIONS = {"--verbose", "--secrets-file", "--help"}  # added by pipelines/cli.py to every command


def fidelity_text() -> str:
    return FIDELITY.read_text(encoding="utf-8")


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


@cache
def registered_metrics() -> frozenset[str]:
    """Judge metrics (judges.suite.all_metrics, as `ccrs metrics`) and the retrieval metrics: every name
    pattern retrievers/metrics.py declares ("R@{k}", ...), written at cut-off k as the docs write them."""
    from judges.suite import all_metrics
    from retrievers import metrics

    names = {m.name for m in all_metrics(None)}
    for value in vars(metrics).values():
        patterns = value if isinstance(value, tuple) else (value,)
        names |= {p.format(k="k") for p in patterns if isinstance(p, str) and "@{k}" in p}
    return frozenset(names)


def cited_metrics(text: str) -> set[str]:
    spans = {s for s in code_spans(text) if METRIC_SPAN.match(s)} - NOT_METRICS
    return spans | set(AT_K.findall(text))


def is_registered(name: str) -> bool:
    return any(fnmatch.fnmatchcase(metric, name) for metric in registered_metrics())


@cache
def command_parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"ccrs {command}")
    importlib.import_module(SUBCOMMANDS[command][0]).add_arguments(parser, command)
    return parser


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def command_problems(command: str, rest: str) -> list[str]:
    """What is wrong with `ccrs COMMAND REST` (empty when the CLI has it all)."""
    if command not in SUBCOMMANDS:
        return [f"`ccrs {command}`: no such command"]
    parser = command_parser(command)
    allowed = options(parser) | CLI_OPTIONS
    words = rest.split()
    subs = subparsers(parser)
    if subs and words and re.fullmatch(r"[a-z][a-z-]*", words[0]):
        if words[0] not in subs:
            return [f"`ccrs {command} {words[0]}`: no such subcommand (has {sorted(subs)})"]
        allowed |= options(subs[words[0]])
    return [f"`ccrs {command}{rest}`: no option {flag}"
            for flag in OPTION.findall(rest) if flag not in allowed]


def every_option() -> set[str]:
    found = set(CLI_OPTIONS)
    for command in SUBCOMMANDS:
        parser = command_parser(command)
        found |= options(parser)
        for sub in subparsers(parser).values():
            found |= options(sub)
    return found


def cited_commands(text: str) -> list[tuple[str, str]]:
    """(command, the rest of its code span) for every `ccrs ...` in a code span."""
    return [(m.group(1), m.group(2)) for span in code_spans(text) for m in COMMAND.finditer(span)]


def proxies(tree: Path) -> set[str]:
    """The metrics a goal tree marks as a proxy: a `proxy_for` key, "proxy" in the label, or a line
    `name: X ... proxy ...` (the YAML comment form)."""
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if "name" in node and ("proxy_for" in node or "proxy" in str(node.get("label", "")).lower()):
                found.add(str(node["name"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    text = tree.read_text(encoding="utf-8")
    walk(yaml.safe_load(text))
    found |= {m.group(1) for m in re.finditer(r"\bname: ([^,}\s]+)[^\n]*proxy", text, flags=re.IGNORECASE)}
    return found


def marked_proxies(gqm_section: str) -> set[str]:
    """Names written as a proxy: "`X` proxy for ...", "`X` (proxy ...", "`X` is a proxy", "`X`, a proxy"."""
    return set(PROXY_MARK.findall(gqm_section))


def test_the_helpers_find_what_they_look_for(tmp_path):
    assert cited_metrics("`vera_faithfulness`, `rc_*`, `vera_summary_prompt`, `n_used`; P@k and `SD@k`") == {
        "vera_faithfulness", "rc_*", "P@k", "SD@k"}
    assert is_registered("rc_*") and is_registered("SD@k") and not is_registered("vera_made_up")
    assert cited_commands("`ccrs vera qrels --limit 3` and `ccrs run`") == [("vera", " qrels --limit 3"),
                                                                           ("run", "")]
    assert command_problems("vera", " qrels --limit 3") == []
    assert command_problems("vera", " nope") and command_problems("nope", "")
    assert command_problems("run", " --no-such-flag") == [
        "`ccrs run --no-such-flag`: no option --no-such-flag"]
    tree = tmp_path / "t.yaml"
    tree.write_text("goals:\n  - metrics:\n      - {name: A, proxy_for: x}\n"
                    "      - {name: B}  # proxy for y\n      - {name: C, label: 'C proper'}\n")
    assert proxies(tree) == {"A", "B"}
    marks = "`A` proxy for x; `B` (a proxy); `C`, `D` and proxies; `E` is a proxy"
    assert marked_proxies(marks) == {"A", "B", "E"}


def test_every_metric_the_doc_cites_is_registered():
    unknown = sorted(name for name in cited_metrics(fidelity_text()) if not is_registered(name))
    assert not unknown, f"docs/fidelity.md cites metrics that no registry has: {unknown}"


def test_every_command_the_doc_cites_is_in_the_cli():
    text = fidelity_text()
    problems = [p for command, rest in cited_commands(text) for p in command_problems(command, rest)]
    known = every_option()
    spans = [s for s in code_spans(text) if "ccrs " not in s]
    problems += [f"`{flag}`: no command takes it"
                 for span in spans for flag in OPTION.findall(span) if flag not in known]
    assert not problems, "docs/fidelity.md:\n" + "\n".join(sorted(set(problems)))


def test_every_proxy_of_the_goal_trees_is_marked_proxy_in_the_doc():
    assert GOAL_TREES, "no goal tree under configs/gqm/"
    marked = marked_proxies(section(fidelity_text(), GQM_HEADING))
    missing = {tree.name: sorted(proxies(tree) - marked) for tree in GOAL_TREES}
    assert not any(missing.values()), f"proxies not marked 'proxy' in fidelity.md's GQM section: {missing}"


# Statistics rows: the CCRS statistics table, and the VERA rows of stats/vera.py's statistics.
CCRS_STATS_HEADING = "## CCRS statistics (stats/, tasks/reduce.py, `ccrs stats`)"
VERA_HEADING = "## VERA (vera-paper)"
VERA_STATISTICS = ("Bootstrap", "Topicality")
# A place in a paper: a section, appendix, listing, table or figure with its number.
PAPER_PLACE = re.compile(r"(?:\b(?:[Ss]ec|App|Fig|Figs)\.|\b(?:Appendix|Listing|Tables?)\b|§)\s*[0-9A-Z]")
NOT_IN_PAPER = re.compile(r"None in the (?P<paper>CCRS|VERA) paper.*Source: \S", flags=re.DOTALL)


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the markdown tables in `text`, as their cells (header and rule rows left out)."""
    rows, in_table = [], 0  # in_table: the line's place in its table (1 = header, 2 = rule)
    for line in text.splitlines():
        in_table = in_table + 1 if line.startswith("|") else 0
        if in_table > 2:
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def unsourced(rows: list[list[str]]) -> list[str]:
    """Rows whose paper cell (the second) neither cites a place in the paper nor says that the paper has
    none and names the source instead."""
    return [row[0] for row in rows if not (PAPER_PLACE.search(row[1]) or NOT_IN_PAPER.search(row[1]))]


def test_the_row_helpers_find_the_unsourced_rows():
    table = ("| statistic | paper | ours |\n|---|---|---|\n| HSD | sec. 4.1.3 | x |\n"
             "| CI | **None in the CCRS paper**. Source: Efron | x |\n| Made up | said somewhere | x |\n")
    assert [row[0] for row in table_rows(table)] == ["HSD", "CI", "Made up"]
    assert unsourced(table_rows(table)) == ["Made up"]


def test_each_statistics_row_names_the_paper_it_comes_from():
    text = fidelity_text()
    ccrs = table_rows(section(text, CCRS_STATS_HEADING))
    vera = [row for row in table_rows(section(text, VERA_HEADING)) if row[0].startswith(VERA_STATISTICS)]
    assert len(ccrs) >= 14 and len(vera) == len(VERA_STATISTICS)
    assert "Bootstrap CI (`ci95`)" in [row[0] for row in ccrs], "the CCRS table lacks its bootstrap CI row"
    missing = unsourced(ccrs) + unsourced(vera)
    assert not missing, f"statistics rows of docs/fidelity.md that name no paper place or source: {missing}"


# Goal trees: the goal and question counts the docs state, and the metric names the GQM section cites.
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
COUNT_CLAIM = re.compile(r"\b(\w+) goals and (\w+) questions\b")


def tree_data(tree: Path) -> dict:
    return yaml.safe_load(tree.read_text(encoding="utf-8"))


def goal_and_question_counts(tree: Path) -> tuple[int, int]:
    goals = tree_data(tree)["goals"]
    return len(goals), sum(len(goal["questions"]) for goal in goals)


def tree_metric_names(tree: Path) -> set[str]:
    return {metric["name"] for goal in tree_data(tree)["goals"] for question in goal["questions"]
            for metric in question["metrics"]}


def count_claims(text: str) -> list[tuple[int | None, int | None]]:
    """(goals, questions) of every "N goals and M questions" in `text`, a number word read as its value."""
    return [(NUMBER_WORDS.get(goals.lower()), NUMBER_WORDS.get(questions.lower()))
            for goals, questions in COUNT_CLAIM.findall(text)]


def test_count_claims_reads_number_words():
    assert count_claims("the same five goals and eight questions; Five goals and six questions") == [
        (5, 8), (5, 6)]
    assert count_claims("many goals and more questions") == [(None, None)]


def test_the_goal_and_question_counts_the_docs_state_are_the_trees():
    counts = {goal_and_question_counts(tree) for tree in GOAL_TREES}
    texts = {"docs/fidelity.md GQM section": section(fidelity_text(), GQM_HEADING),
             "docs/gqm-vera.md": (DOCS / "gqm-vera.md").read_text(encoding="utf-8")}
    texts |= {f"{tree.name} line 1": tree.read_text(encoding="utf-8").splitlines()[0] for tree in GOAL_TREES}
    claims = {where: count_claims(text) for where, text in texts.items()}
    assert claims["docs/fidelity.md GQM section"], "the GQM section states no goal and question count"
    wrong = {where: found for where, found in claims.items() if any(claim not in counts for claim in found)}
    assert not wrong, f"goal/question counts that no tree has (trees: {sorted(counts)}): {wrong}"


def test_the_gqm_section_cites_the_metrics_of_the_goal_trees():
    cited = cited_metrics(section(fidelity_text(), GQM_HEADING))
    thesis = REPO / "configs" / "gqm" / "thesis-goals.yaml"
    missing = {tree.name: sorted(name for name in tree_metric_names(tree) - cited
                                 if tree == thesis or name.startswith("gqm_"))
               for tree in GOAL_TREES}
    assert not any(missing.values()), f"goal-tree metrics fidelity.md's GQM section never names: {missing}"

