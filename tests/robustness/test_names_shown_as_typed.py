"""File names and option values are shown as the user typed them: rich markup and :emoji: codes in a
name stay text, and a usage error echoes the value as typed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from counting.model.counting_model import default_model_path


@pytest.mark.parametrize("name", ["[/bold]y.png", "[red]x[bold].png", "a:smile:.png"])  # "[/b..." is folder "["
def test_markup_and_emoji_codes_in_names_are_shown_as_named(cli, tmp_path: Path, name: str) -> None:
    """A name holding "[/x]" raised rich's MarkupError (a traceback, no outputs written); ":smile:"
    and "[red]" were shown as an emoji and styling instead of the file's name."""
    from robust_helpers import make_image

    folder = tmp_path / "mk"
    image = folder / name
    image.parent.mkdir(parents=True)
    make_image(image)
    model = Path(shutil.copy(default_model_path(), image.with_name(f"m{image.name}.npz")))
    out_csv, out_json = tmp_path / "o.csv", tmp_path / "o.json"
    result = cli("count", image, "--model", model, "--csv", out_csv, "--json", out_json, "--no-progress")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "😄" not in result.output
    assert name in result.stdout.replace("\n", "")  # the table shows the name itself
    assert out_csv.exists() and out_json.exists()


def test_usage_errors_echo_the_value_as_typed(cli, tmp_path: Path) -> None:
    from robust_helpers import make_image

    image = make_image(tmp_path / "a.png")
    grid = cli("features", image, "-o", tmp_path / "f.npy", "--grid", "3x3x3")
    assert grid.exit_code == 2 and "grid '3x3x3': expected ROWSxCOLS" in grid.stderr
    cluster = cli("count", image, "--cluster", "inproc://x")
    assert cluster.exit_code == 2 and "not enough values" not in cluster.stderr
    assert "inproc://x: expected local:N" in cluster.stderr
