"""The commands README.md and docs/*.md give still fit the code as written.

Running them all is hours (trainings, studies), so this checks what a move or a rename breaks:
every ``python scripts/NAME.py`` they cite exists and starts (``--help``: its imports resolve and
its arguments parse), and every ``counting ...`` command line in their bash blocks names a real
command and only options that command has. README's own command lines also run, in
tests/cli/test_readme.py.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer.main

from counting.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _bash_lines(page: Path) -> list[str]:
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
        lines += block.replace("\\\n", " ").splitlines()
    return lines


def cited_scripts() -> list[str]:
    names = {match for page in PAGES for match in re.findall(r"python3? (scripts/[a-z_0-9/]+\.py)", page.read_text())}
    return sorted(names)


def counting_commands() -> list[tuple[str, list[str]]]:
    """``(page, argument list)`` of every ``counting ...`` command in the pages' bash blocks."""
    found = []
    for page in PAGES:
        for line in _bash_lines(page):
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                continue
            segment: list[str] = []
            for word in [*words, "&&"]:
                if word in ("&&", "||", "|", ";"):
                    if segment and segment[0] == "counting":
                        found.append((page.name, segment))
                    segment = []
                else:
                    segment.append(word)
    return found


def test_the_pages_cite_scripts_and_commands() -> None:
    assert len(cited_scripts()) >= 20
    assert len(counting_commands()) >= 20


# Runs each script's --help as `python SCRIPT --help` would (runpy, as __main__), all in one child
# interpreter: one interpreter per script spent ~7 s each importing torch and scikit-learn again
# (37 scripts, about 4 minutes of CI); the child still keeps the test's own imports out of theirs.
# What one script imports, the next finds imported: a script can no longer be caught missing an
# import only its predecessors made, but every script still resolves and parses its arguments.
_START_ALL = """
import contextlib, io, json, os, runpy, sys, traceback
results = {}
for script in sys.argv[1:]:
    sys.argv = [script, "--help"]
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python SCRIPT` sets it
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        code, out = 1, io.StringIO(traceback.format_exc())
    results[script] = [code, out.getvalue()[-2000:]]
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def started_scripts() -> dict[str, list]:
    """``{script: [exit code, the end of its output]}`` of each cited script's ``--help``."""
    scripts = [script for script in cited_scripts() if (ROOT / script).is_file()]
    done = subprocess.run(
        [sys.executable, "-c", _START_ALL, *scripts], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # starts each cited script, in one child interpreter
@pytest.mark.parametrize("script", cited_scripts())
def test_every_cited_script_exists_and_starts(script: str, started_scripts: dict[str, list]) -> None:
    path = ROOT / script
    assert path.is_file(), f"{script} is cited by the docs but does not exist"
    code, output = started_scripts[script]
    assert code == 0, output


def _command(words: list[str]) -> tuple[click.Command, list[str]]:
    """The click command a ``counting`` argument list names (groups followed) and its arguments."""
    command: click.Command = typer.main.get_command(app)
    rest = words[1:]
    # counting's group loads its commands on first use: anything with get_command is a group.
    while hasattr(command, "get_command") and rest and not rest[0].startswith("-"):
        sub = command.get_command(click.Context(command), rest[0])
        assert sub is not None, f"counting has no command {rest[0]!r}"
        command, rest = sub, rest[1:]
    return command, rest


def option_problems(words: list[str]) -> list[str]:
    """What does not fit in one ``counting`` argument list: an unknown command or option."""
    try:
        command, rest = _command(words)
    except AssertionError as error:
        return [str(error).splitlines()[0]]
    known = {name for parameter in command.params for name in (*parameter.opts, *parameter.secondary_opts)}
    options = [word.split("=", 1)[0] for word in rest if word.startswith("-") and word != "-"]
    return [
        f"no option {option}" for option in options if option not in known and not re.fullmatch(r"-\d+(\.\d+)?", option)
    ]


def test_the_check_finds_an_unknown_command_and_option() -> None:
    assert option_problems(["counting", "count", "photos/", "--csv", "-", "-m", "m.npz"]) == []
    assert option_problems(["counting", "count", "--no-such-option", "x"]) == ["no option --no-such-option"]
    assert option_problems(["counting", "models", "fetch"]) == []
    assert option_problems(["counting", "counnt", "x"]) == ["counting has no command 'counnt'"]


def test_every_documented_counting_command_has_its_options() -> None:
    problems = [
        f"{page}: {' '.join(words)}: {problem}"
        for page, words in counting_commands()
        for problem in option_problems(words)
    ]
    assert problems == []
