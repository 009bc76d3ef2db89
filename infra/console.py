"""The console of a long command: our progress and results on the terminal, third-party log records in a
file.

Ray, Ray Serve, vLLM, httpx, MLflow and Triton write log records from the driver process through many
channels: Python loggers with handlers of their own (Serve adds a stream handler when the app is
deployed, Ray configures the `ray` logger, vLLM formats JSON records), `warnings`, C++ code writing
to file descriptor 2 (the raylet's messages), and subprocesses. Filtering each channel misses the next
library's; `quiet_console()` instead points file descriptors 1 and 2 at a log file for the duration, so
every one of them lands there, and keeps a duplicate of the terminal for our own output: `say()` lines,
progress bars (`progress_stream()`) and the verdict. With `verbose=True` nothing is redirected.
"""
from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

_CONSOLE: list[TextIO] = []  # the terminal while quiet_console() is active (a stack: nesting is allowed)


def console_stream() -> TextIO:
    """Where our own output goes: the terminal kept by quiet_console(), else the current stdout."""
    return _CONSOLE[-1] if _CONSOLE else sys.stdout


def progress_stream() -> TextIO:
    """Where progress bars go: the terminal kept by quiet_console(), else the current stderr."""
    return _CONSOLE[-1] if _CONSOLE else sys.stderr


def is_quiet() -> bool:
    return bool(_CONSOLE)


def say(text: str = "") -> None:
    stream = console_stream()
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
    appended; our output keeps the terminal. Yields the log file, or None when verbose."""
    if verbose:
        yield None
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    terminal = io.TextIOWrapper(os.fdopen(os.dup(saved[1]), "wb", buffering=0), write_through=True,
                                encoding=getattr(sys.stdout, "encoding", None) or "utf-8",
                                errors="replace")
    log_fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
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
        terminal.close()
