"""The Ray head commands the docs give a user (docs/cluster.md, repeated in the README's cluster section),
read from the docs so that the tests start a head and submit to it exactly as written."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLUSTER_DOC = REPO / "docs" / "cluster.md"
FENCED_BASH = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def ray_commands(markdown: str) -> list[tuple[dict[str, str], list[str]]]:
    """Every `ray ...` line of the text's bash blocks: (the environment the line sets, its words), comments
    dropped."""
    commands = []
    for block in FENCED_BASH.findall(markdown):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            env = {}
            while words and ASSIGNMENT.match(words[0]):
                name, value = words.pop(0).split("=", 1)
                env[name] = value
            if words and words[0] == "ray":
                commands.append((env, words))
    return commands


def ray_command(markdown: str, *verb: str) -> tuple[dict[str, str], list[str]]:
    """The one `ray <verb...>` line of the text (e.g. ray_command(text, "start")); its (env, words)."""
    found = [(env, words) for env, words in ray_commands(markdown) if words[1:1 + len(verb)] == list(verb)]
    assert len(found) == 1, f"expected one `ray {' '.join(verb)}` line, found {len(found)}"
    return found[0]


def section(markdown: str, heading: str) -> str:
    """The text under a heading line, up to the next heading of its level or higher (fenced code skipped)."""
    lines = markdown.splitlines()
    start, level, fenced = lines.index(heading) + 1, len(heading) - len(heading.lstrip("#")), False
    for end in range(start, len(lines)):
        fenced ^= lines[end].startswith("```")
        if not fenced and re.match(rf"#{{1,{level}}} ", lines[end]):
            return "\n".join(lines[start:end]) + "\n"
    return "\n".join(lines[start:]) + "\n"


def _token_section() -> str:
    return section(CLUSTER_DOC.read_text(), "## Submitting to a head with token authentication")


def head_start_words() -> list[str]:
    """`ray start --head ...` as docs/cluster.md's token-authentication section gives it."""
    env, words = ray_command(_token_section(), "start")
    assert not env and "--head" in words, words
    return words


def submit_env() -> dict[str, str]:
    """The environment that section's `ray job submit` line sets (RAY_AUTH_MODE=token)."""
    return ray_command(_token_section(), "job", "submit")[0]
