"""What a command option is, declared once (inspect_ai's shared option group, in our terms): its name, its
argparse kind, its one meaning (the help every command shows), its default on each command that takes it,
where its value lands in a run config, and its old spellings. pipelines/options.py declares the shared
options with it and each run extension its own (pipelines/extensions/registry.py `ExtensionOption`); a
command adds an option with `Option.add(parser, command)` and never spells its help or type again.

The bottom of pipelines/: it imports nothing of the project (the registry and the options both use it).
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

ANY_COMMAND = "*"
_DEFAULT_CLAUSE = re.compile(r" \(default [^()]*(\([^()]*\)[^()]*)*\)$")
Lands = str | Callable[[Any], dict[str, Any]] | None


class DeprecatedAlias(argparse.Action):
    """An old spelling kept for one release: hidden from --help, it stores into the new option's dest and
    says so in one line on stderr."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        kwargs.update(default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: {option_string} is deprecated, use {self.new} (the old spelling goes in the "
              "next release)", file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        given_options = set(getattr(namespace, "_given", set()))
        setattr(namespace, "_given", given_options | {self.dest})


class RecordGiven(argparse._StoreAction):
    """A store that remembers the option was given (a preset may fill only what was not)."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        given_options = set(getattr(namespace, "_given", set()))
        setattr(namespace, "_given", given_options | {self.dest})


def add_alias(parser: argparse.ArgumentParser, old: str, new: argparse.Action) -> None:
    """`old` as a deprecated spelling of the option `new` (the action add_argument returned)."""
    flag = new.nargs == 0  # a store_true/store_false option: the alias stores its constant
    parser.add_argument(old, action=DeprecatedAlias, dest=new.dest, new=new.option_strings[0],
                        **({"nargs": 0, "const": new.const} if flag else
                           {"type": new.type, "nargs": new.nargs, "metavar": new.metavar,
                            "choices": new.choices}))


@dataclass(frozen=True)
class Option:
    """One option. `meaning`: its help, the same on every command; `defaults`: {command: (value, shown)},
    `*` for every other command (`shown`: how --help names the default, None for none); `lands`: the dotted
    run-config key its value sets (or a function of the value giving dotted overrides), None where the
    command reads it itself; `aliases`: old spellings, hidden, each saying so in one line."""

    flag: str
    meaning: str
    kind: Mapping[str, Any] = field(default_factory=dict)  # argparse's type, metavar, action, nargs, choices
    defaults: Mapping[str, tuple[Any, str | None]] = field(default_factory=dict)
    lands: Lands = None
    aliases: tuple[str, ...] | Mapping[str, tuple[str, ...]] = ()  # or {command: its old spellings}

    @property
    def dest(self) -> str:
        return self.kind.get("dest") or self.flag.lstrip("-").replace("-", "_")

    def default(self, command: str) -> tuple[Any, str | None]:
        return self.defaults.get(command) or self.defaults.get(ANY_COMMAND) or (None, None)

    def help(self, command: str) -> str:
        _, shown = self.default(command)
        return f"{self.meaning} (default {shown})" if shown else self.meaning

    def add(self, parser: argparse.ArgumentParser, command: str, *, lands: bool = True,
            **local: Any) -> argparse.Action:
        """The option on `parser` as `command` takes it; `local` may only narrow its `choices`, make it
        `required` or give the command's own `default` as (value, shown) where it is another module's
        constant. `lands=False`:
        this command reads the value itself (it reaches no run config)."""
        if set(local) - {"choices", "required", "default"}:
            raise TypeError(f"{self.flag}: a command may narrow `choices`, set `required` or give its own "
                            f"default (value, shown) only, not {sorted(local)}")
        value, shown = local.pop("default", self.default(command))
        settings = {**self.kind, **local}
        if settings.get("action") not in ("store_true", "store_false") and "default" not in settings:
            settings["default"] = value
        help_text = f"{self.meaning} (default {shown})" if shown else self.meaning
        action = parser.add_argument(self.flag, help=help_text, **settings)
        action.schema = self  # what the option test reads: the declaration the action came from
        for old in self.aliases.get(command, ()) if isinstance(self.aliases, Mapping) else self.aliases:
            add_alias(parser, old, action)
        if lands and self.lands is not None:
            landing = dict(parser.get_default("_lands") or {})
            parser.set_defaults(_lands=landing | {action.dest: self})
        return action

    def overrides(self, value: Any) -> dict[str, Any]:
        """The dotted run-config overrides of a value of this option (none for None)."""
        if value is None or self.lands is None:
            return {}
        return self.lands(value) if callable(self.lands) else {self.lands: value}


def meaning_of(help_text: str | None) -> str:
    """A help text without its default clause: what must read the same on every command."""
    return _DEFAULT_CLAUSE.sub("", help_text or "")


def landing_overrides(values: Mapping[str, Any]) -> dict[str, Any]:
    """The run-config overrides of the options a parser declared as landing (`_lands`) in `values` (an
    argparse Namespace's vars)."""
    overrides: dict[str, Any] = {}
    for dest, option in (values.get("_lands") or {}).items():
        overrides.update(option.overrides(values.get(dest)))
    return overrides
