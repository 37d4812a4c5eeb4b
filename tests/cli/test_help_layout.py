"""--help fits the terminal it is read on (issue 49): it was drawn 100 columns wide whatever the
terminal, so on 80 columns every box line wrapped. Now each command's help is as wide as the
terminal, with every option name whole: a table where the help column keeps room to read, one
option a line with its help below on a narrower terminal (counting/cli/help_layout.py).
"""

from __future__ import annotations

import re

import click
import pytest

from counting.cli.app import COMMANDS, _load_command, app

WIDTHS = (100, 80, 60, 40)


@pytest.fixture(scope="module")
def commands() -> dict[str, click.Command]:
    return {name: _load_command(name) for name in COMMANDS}


def shown_spellings(command: click.Command) -> list[str]:
    """Every name of every option --help shows (hidden aliases left out)."""
    context = click.Context(command)
    return [
        spelling
        for param in command.get_params(context)
        if getattr(param, "param_type_name", "") == "option" and not param.hidden
        for spelling in (*param.opts, *param.secondary_opts)
    ]


def help_of(runner, name: str | None, columns: int) -> str:
    result = runner.invoke(app, [*([name] if name else []), "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_help_is_as_wide_as_the_terminal_with_every_name_whole(runner, commands, name, columns: int) -> None:
    text = help_of(runner, name, columns)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= columns, (name, columns)  # no box line wraps
    assert "…" not in text  # rich's ellipsis: a cut name or word
    boxes = [line for line in lines if line.startswith(("╭", "│", "╰"))]
    assert boxes and all(line.endswith(("╮", "│", "╯")) for line in boxes)  # every box closed on its line
    if name is not None:
        for spelling in shown_spellings(commands[name]):
            assert re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", text), (name, columns, spelling)


def test_a_wide_terminal_shows_a_table_and_a_narrow_one_an_option_a_line(runner) -> None:
    wide = help_of(runner, "count", 100)
    # The name, its placeholder and the start of its help on one line; the panels' columns line up.
    quiet = next(line for line in wide.splitlines() if "--quiet, -q" in line)
    assert "No progress bar" in quiet
    model = next(line for line in wide.splitlines() if "--model, -m" in line)
    assert quiet.index("No progress bar") == model.index("Model file")
    narrow = help_of(runner, "count", 60).splitlines()
    at = next(k for k, line in enumerate(narrow) if "--quiet, -q" in line)
    assert "No progress" not in narrow[at] and narrow[at + 1].startswith("│     No progress bar")


def test_flags_show_their_off_switch_beside_them(runner) -> None:
    wide = help_of(runner, "train", 100).splitlines()
    at = next(k for k, line in enumerate(wide) if "--progress /" in line)
    assert "--no-progress" in wide[at + 1]
    narrow = help_of(runner, "train", 60)
    assert "--progress / --no-progress" in narrow
