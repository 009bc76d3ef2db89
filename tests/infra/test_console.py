"""The quiet console: whatever third-party code writes (loggers, warnings, raw fd writes, subprocesses)
lands in the log file; our say() lines keep the terminal's stdout, progress bars and notes its stderr. Run
in a child process, whose sys.stdout and sys.stderr are plain file descriptors as in `ccrs run` (pytest
replaces them)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = """
import logging, os, subprocess, sys, warnings
from pathlib import Path
from infra.console import console_stream, is_quiet, progress_stream, quiet_console, say

with quiet_console(Path(sys.argv[1])) as path:
    assert is_quiet()
    logger = logging.getLogger("third-party")
    logger.addHandler(logging.StreamHandler())  # created inside: bound to sys.stderr, like Serve's
    logger.warning("a library's log record")
    print("a library's print")
    warnings.warn("a library's warning")
    os.write(2, b"a C extension's message\\n")
    child = "import sys; sys.stderr.write('a worker process\\\\n')"
    subprocess.run([sys.executable, "-c", child], check=True)
    say("stage progress")
    progress_stream().write("a progress bar\\n")
    say("a note", err=True)
assert not is_quiet() and console_stream() is sys.stdout
print("after the run")
"""
THEIRS = ("a library's log record", "a library's print", "a library's warning", "a C extension's message",
          "a worker process")


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120,
                          cwd=ROOT)


def test_third_party_output_goes_to_the_log_file_and_ours_to_the_terminal(tmp_path):
    log_file = tmp_path / "logs" / "console.log"
    done = _run("-c", SCENARIO, str(log_file))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["stage progress", "after the run"]
    assert done.stderr.splitlines() == ["a progress bar", "a note"]
    logged = log_file.read_text()
    assert all(record in logged for record in THEIRS)


def test_verbose_redirects_nothing(tmp_path):
    scenario = ("import os; from pathlib import Path; from infra.console import quiet_console\n"
                "with quiet_console(Path('x.log'), verbose=True) as path:\n"
                "    assert path is None\n    os.write(2, b'shown')\n")
    done = _run("-c", scenario)
    assert done.returncode == 0 and done.stderr == "shown" and not (ROOT / "x.log").exists()


def test_a_log_file_nothing_was_written_to_is_removed_with_the_folders_made_for_it(tmp_path):
    from infra.console import quiet_console

    with quiet_console(tmp_path / "out" / "logs" / "console.log") as path:
        assert path.parent.is_dir()
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "console.log"
    kept.write_text("")  # there before: left alone, even empty
    with quiet_console(kept):
        pass
    assert kept.exists()


def test_inside_a_test_our_lines_reach_its_capture_and_theirs_the_log_file(tmp_path, capsys):
    import logging

    from infra.console import quiet_console, say

    log_file = tmp_path / "console.log"
    with quiet_console(log_file):
        logger = logging.getLogger("ray.serve.test")
        handler = logging.StreamHandler()  # bound to sys.stderr while quiet, as Serve's
        logger.addHandler(handler)
        logger.warning("a library's log record")
        print("a library's print")
        say("our result")
        say("our note", err=True)
    logger.removeHandler(handler)
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("our result\n", "our note\n")
    assert "a library's log record" in log_file.read_text() and "a library's print" in log_file.read_text()


NESTED = """
import os, sys
from pathlib import Path
from infra.console import quiet_console, say

outer, inner = Path(sys.argv[1]), Path(sys.argv[2])
with quiet_console(outer):
    with quiet_console(inner):
        os.write(1, b"inner third-party\\n")
        say("inner progress")
    say("outer progress")
try:
    with quiet_console(Path(sys.argv[3])):
        pass
except OSError:
    say("unwritable log: clear error")
say("after")
"""


def test_nested_quiet_consoles_keep_the_terminal_and_an_unwritable_log_changes_nothing(tmp_path):
    a_folder = tmp_path / "a-folder"  # a log path that cannot be opened for writing
    a_folder.mkdir()
    done = _run("-c", NESTED, str(tmp_path / "outer.log"), str(tmp_path / "inner.log"), str(a_folder))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["inner progress", "outer progress", "unwritable log: clear error",
                                        "after"]
    assert (tmp_path / "inner.log").read_text() == "inner third-party\n"
