"""The console of a command: our progress and results on the terminal, third-party log records in a file.

Ray, Ray Serve, vLLM, httpx, MLflow and Triton write log records from the driver process through many
channels: Python loggers with handlers of their own (Serve adds a stream handler when the app is
deployed, Ray configures the `ray` logger, vLLM formats JSON records), `warnings`, C++ code writing
to file descriptor 2 (the raylet's messages), and subprocesses. Filtering each channel misses the next
library's; `quiet_console()` instead points file descriptors 1 and 2 at a log file for the duration, so
every one of them lands there, and keeps a duplicate of the terminal for our own output: `say()` lines
and the verdict on stdout, progress bars (`progress_stream()`), notes and errors (`say(..., err=True)`)
on stderr. With `verbose=True` nothing is redirected. `pipelines/cli.py` runs every command that starts
Ray, Serve, vLLM or an HTTP client inside it.
"""
from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple, TextIO

from infra.process import ccrs_home


class _Terminal(NamedTuple):
    out: TextIO
    err: TextIO


_CONSOLE: list[_Terminal] = []  # the terminal while quiet_console() is active (a stack: nesting is allowed)


def console_stream() -> TextIO:
    """Where our own output goes: the terminal's stdout kept by quiet_console(), else the current stdout."""
    return _CONSOLE[-1].out if _CONSOLE else sys.stdout


def progress_stream() -> TextIO:
    """Where progress bars, notes and errors go: the terminal's stderr kept by quiet_console(), else the
    current stderr (never stdout, which may be a pipe carrying a command's JSON)."""
    return _CONSOLE[-1].err if _CONSOLE else sys.stderr


def is_quiet() -> bool:
    return bool(_CONSOLE)


def say(text: str = "", err: bool = False) -> None:
    """A line for the user: results on stdout; with err=True a note or an error on stderr."""
    stream = progress_stream() if err else console_stream()
    stream.write(f"{text}\n")
    stream.flush()


def print_markdown(text: str) -> None:
    """Markdown (tables included) rendered for the terminal by Rich; at least 160 columns wide when the
    output is not a terminal (a file or a pipe), so that tables are not folded."""
    from rich.console import Console
    from rich.markdown import Markdown

    stream = console_stream()
    width = None if stream.isatty() else 160
    Console(file=stream, width=width, soft_wrap=False).print(Markdown(text))
    stream.flush()


@contextmanager
def quiet_console(log_file: Path, verbose: bool = False) -> Iterator[Path | None]:
    """Send everything written to fds 1 and 2 (by anyone in this process or its children) to log_file,
    appended; our output keeps the terminal. Yields the log file, or None when verbose. A log file that
    this call created and that nothing was written to is removed again, with the folders made for it."""
    if verbose:
        yield None
        return
    made = [folder for folder in (log_file.parent, *log_file.parent.parents) if not folder.exists()]
    created = not log_file.exists()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)  # fails before any change
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    if _CONSOLE:  # nested: fds 1 and 2 already lead to the outer log; the terminal is the outer one's
        kept, terminal = [], _CONSOLE[-1]
    else:
        kept = [_keep_terminal(stream, saved) for stream in (sys.stdout, sys.stderr)]
        terminal = _Terminal(out=kept[0][0], err=kept[1][0])
    replaced = _point_sys_streams_at_fds()
    try:
        for fd in (1, 2):
            os.dup2(log_fd, fd)
        _CONSOLE.append(terminal)
        yield log_file
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(log_fd)
        _CONSOLE.remove(terminal)
        sys.stdout, sys.stderr = replaced
        for stream, owned in kept:
            if owned:
                stream.close()
        if created and log_file.exists() and not log_file.stat().st_size:
            _remove_empty(log_file, made)


def _fileno(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None


def _keep_terminal(stream: TextIO, saved: dict[int, int]) -> tuple[TextIO, bool]:
    """A stream on the terminal that survives the redirection: a new one on a duplicate of the fd when
    `stream` writes to fd 1 or 2, else `stream` itself (e.g. a test's capture). (stream, owned)."""
    fd = _fileno(stream)
    if fd not in saved:
        return stream, False
    raw = os.fdopen(os.dup(saved[fd]), "wb", buffering=0)
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return io.TextIOWrapper(raw, write_through=True, encoding=encoding, errors="replace"), True


def _point_sys_streams_at_fds() -> tuple[TextIO, TextIO]:
    """Make sys.stdout/sys.stderr write to fds 1/2 (so into the log) where they do not already (a test's
    capture); returns the streams to restore. The new streams are never closed: a handler bound to one
    while quiet writes to the terminal afterwards, as one bound to a real sys.stderr does."""
    before = (sys.stdout, sys.stderr)
    if _fileno(sys.stdout) != 1:
        sys.stdout = open(1, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")  # noqa: SIM115
    if _fileno(sys.stderr) != 2:
        sys.stderr = open(2, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")  # noqa: SIM115
    return before


def _remove_empty(log_file: Path, made: list[Path]) -> None:
    log_file.unlink()
    for folder in made:  # innermost first
        try:
            folder.rmdir()
        except OSError:  # not empty (something else was written there meanwhile)
            return


def log_file_in(folder: str | Path) -> Path:
    """The log file of a command that writes into `folder` (`ccrs run`'s is RunLayout.console_log)."""
    return Path(folder) / "console.log"


def home_log_file(name: str) -> Path:
    """The log file of a command without an output folder: $CCRS_HOME/logs/<name>-<UTC time>.log."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return ccrs_home() / "logs" / f"{name}-{stamp}.log"
