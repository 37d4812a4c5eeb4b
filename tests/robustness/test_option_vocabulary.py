"""One vocabulary on the command line (issue 49): placeholders, the detector's name, what happens
to a picture that cannot be read, and no library's note to its own authors on the user's screen.

- Placeholders came from three sources: FILE and N, typer's type names (``--features <path>``,
  ``--methods <str>``, ``--flag-rate <float range>``) and one-offs (COUNT, P, KIND, MODE, LAYOUT).
  Every option now takes one of options.PLACEHOLDERS; a list of choices is NAME, named in the help.
- The COCO detector was ``--backbone centernet`` in one place and ``--descriptor detector`` in
  another; it is --descriptor detector, and --backbone's old spelling is read as that with a note.
- Bad input was skipped three ways (count always, features with --skip-bad, video with
  --ignore-errors): now all three skip and say so, and --strict makes it an error; the old flags
  still run and say they are retired.
- `compare` printed GPyTorch's `torch.jit.script is deprecated` warning.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import click
import cv2
import pytest
from robust_helpers import (
    DEFAULT_MODEL,
    assert_one_error,
    make_image,
    make_video,
    run_cli_process,
)

from counting.cli.app import COMMANDS, _load_command, app
from counting.cli.options import DETECTOR_BACKBONES, PLACEHOLDERS, detector_spelling
from counting.core import defaults
from counting.features.descriptors import OWN_BACKBONE

UNREADABLE_INPUT_COMMANDS = ("count", "features", "video")
RETIRED_FLAGS = {"features": "--skip-bad", "video": "--ignore-errors"}


@pytest.fixture(scope="module")
def commands() -> dict[str, click.Command]:
    return {name: _load_command(name) for name in COMMANDS}


def visible_options(command: click.Command) -> list[click.Parameter]:
    context = click.Context(command)
    return [
        param
        for param in command.get_params(context)
        if getattr(param, "param_type_name", "") == "option" and not param.hidden
    ]


def takes_a_value(param: click.Parameter) -> bool:
    return not getattr(param, "is_flag", False) and param.opts != ["--help"]


# -- placeholders ----------------------------------------------------------------------------------
def test_every_option_value_has_a_placeholder_of_the_vocabulary(commands) -> None:
    for name, command in commands.items():
        for param in visible_options(command):
            if takes_a_value(param):
                assert param.metavar in PLACEHOLDERS, (name, param.opts, param.metavar)


@pytest.mark.parametrize("name", COMMANDS)
def test_no_type_name_reaches_the_help(runner, name: str) -> None:
    result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    assert not re.search(r"<[a-z ]+>", result.output), re.findall(r"<[a-z ]+>", result.output)
    for old in ("COUNT", "P", "KIND", "MODE", "LAYOUT", "LAYER", "PIXELS"):  # the former one-off placeholders
        assert not re.search(rf"(?<![\w$]){old}(?!\w)", result.output), (name, old)
    assert "[onnxruntime|torch]" not in result.output


def test_a_name_option_lists_its_names_in_its_help(runner, commands) -> None:
    """NAME says "one of the names the help lists": an unknown name is refused with the names,
    and each of them is in the option's help."""
    checked = 0
    for name, command in commands.items():
        for param in visible_options(command):
            if param.metavar != "NAME" or name == "serve":
                continue
            option = param.opts[0]
            arguments = [name, option, "no-such-name"]
            if name in ("train", "evaluate", "report", "compare", "familiarize") and option != "--dataset":
                arguments += ["-d", "mall", "-r", "."]
            result = runner.invoke(app, arguments)
            assert result.exit_code == 2, (name, option, result.output)
            refused = " ".join(result.stderr.split())
            names = refused.split("is not one of ", 1)[1].split(" (see --help)")[0].split(", ")
            for choice in names:
                assert re.search(rf"(?<![\w-]){re.escape(choice)}(?![\w-])", param.help), (name, option, choice)
            checked += 1
    assert checked >= 15


# -- the detector's one name -----------------------------------------------------------------------
def test_the_detector_backbones_are_the_descriptors_own_networks() -> None:
    assert DETECTOR_BACKBONES == {backbone: kind for kind, backbone in OWN_BACKBONE.items()}


def test_backbone_offers_imagenet_backbones_and_points_at_the_detector(commands) -> None:
    for name in ("train", "features", "compare"):
        backbone = next(param for param in visible_options(commands[name]) if param.opts == ["--backbone"])
        assert "centernet" not in backbone.help and "--descriptor detector" in backbone.help


def test_backbone_centernet_is_read_as_descriptor_detector(cli, tmp_path: Path) -> None:
    assert detector_spelling("centernet", "scores") == (defaults.BACKBONE, "detector")
    assert detector_spelling("centernet-letterbox", "detector-letterbox") == (defaults.BACKBONE, "detector-letterbox")
    assert detector_spelling("resnet50", "pooled") == ("resnet50", "pooled")
    missing = tmp_path / "missing.jpg"
    result = cli("features", "--backbone", "centernet", missing)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: --backbone centernet is spelled --descriptor detector; read as that"]
    assert_one_error(result, str(missing), "no such file")
    clash = cli("features", "--backbone", "centernet", "--descriptor", "pooled", missing)
    assert_one_error(clash, "--backbone centernet is --descriptor detector", "pooled", code=2)


# -- unreadable input: skipped and said by default, --strict makes it an error ------------------
def test_one_option_for_unreadable_input_in_every_command(commands) -> None:
    for name in UNREADABLE_INPUT_COMMANDS:
        options = {spelling for param in visible_options(commands[name]) for spelling in param.opts}
        assert "--strict" in options, name
        assert not options & {"--skip-bad", "--ignore-errors"}, name


def test_features_skip_an_unreadable_image_by_default(cli, tmp_path: Path) -> None:
    good = make_image(tmp_path / "a.png")
    bad = tmp_path / "b.png"
    bad.write_text("not a picture\n")
    out = tmp_path / "f.csv"
    result = cli("features", good, bad, "-o", out, "--no-progress", "--no-cache")
    assert result.exit_code == 0, result.output
    assert "b.png" in result.stderr and "1 of 2 images" in result.stderr + result.stdout
    assert [row[0] for row in csv.reader(out.open())][1:] == [str(good)]
    strict = cli("features", good, bad, "-o", tmp_path / "g.csv", "--no-progress", "--no-cache", "--strict")
    assert_one_error(strict, "b.png", "--strict")
    assert not (tmp_path / "g.csv").exists()


def test_retired_flags_still_run_and_say_so(cli, tmp_path: Path) -> None:
    good = make_image(tmp_path / "a.png")
    result = cli("features", good, "--skip-bad", "--no-progress", "--no-cache")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: --skip-bad is deprecated")
    assert "--strict" in warnings[0]


def test_count_strict_counts_the_rest_then_exits_1(cli, tmp_path: Path) -> None:
    good = make_image(tmp_path / "a.png")
    bad = tmp_path / "b.png"
    bad.write_text("not a picture\n")
    common = ("count", good, bad, "-m", DEFAULT_MODEL, "--no-progress")
    skipped = cli(*common, "--csv", tmp_path / "skipped.csv")
    assert skipped.exit_code == 0, skipped.output
    strict = cli(*common, "--csv", tmp_path / "strict.csv", "--strict")
    assert strict.exit_code == 1 and "1 of 2 images could not be read (--strict)" in strict.stderr
    assert "b.png" in strict.stderr
    # Nothing counted is lost: the good picture's row is written as without --strict.
    assert (tmp_path / "strict.csv").read_text() == (tmp_path / "skipped.csv").read_text()
    missing = cli("count", good, tmp_path / "missing.png", "-m", DEFAULT_MODEL, "--strict")
    assert_one_error(missing, "missing.png", "--strict")


@pytest.fixture
def truncated_video(tmp_path: Path) -> Path:
    clip = make_video(tmp_path / "long.avi", n_frames=120)
    data = clip.read_bytes()
    clip.write_bytes(data[: len(data) // 2])  # the header still says 120 frames
    capture = cv2.VideoCapture(str(clip))
    assert capture.get(cv2.CAP_PROP_FRAME_COUNT) == 120
    capture.release()
    return clip


def test_video_skips_undecodable_frames_by_default(cli, tmp_path: Path, truncated_video: Path) -> None:
    common = ("video", truncated_video, "-m", DEFAULT_MODEL, "--quiet", "--stride", "10")
    skipped = cli(*common, "--csv", tmp_path / "a.csv")
    assert skipped.exit_code == 0, skipped.output
    assert any("damaged or truncated" in line for line in skipped.stderr.splitlines() if line.startswith("warning:"))
    strict = cli(*common, "--csv", tmp_path / "b.csv", "--strict")
    assert_one_error(strict, "long.avi", "could not be decoded", "--strict")
    kept = list(csv.reader((tmp_path / "b.csv").open()))[1:]
    assert 3 <= len(kept) < 12  # the frames read before the damage are counted and kept
    retired = cli(*common, "--csv", tmp_path / "c.csv", "--ignore-errors")
    assert retired.exit_code == 0 and "warning: --ignore-errors is deprecated" in retired.stderr


# -- compare: no library's deprecation note ----------------------------------------------------------
@pytest.mark.slow
def test_compare_prints_no_library_deprecation_warning(mall_root: Path, tmp_path: Path) -> None:
    """GPyTorch's algebra library decorates its functions with torch.jit.script when imported, and
    torch warns that torch.jit.script is deprecated: a fresh interpreter, where the import happens."""
    process = run_cli_process(
        "compare",
        "-d",
        "mall",
        "-r",
        mall_root,
        "--split",
        "train=1-30,test=31-40",
        "--methods",
        "sparse-gp",
        "--tiled-methods",
        "",
        "--input-size",
        "112",
        "--centers",
        "4",
        "--no-progress",
        "--cache-dir",
        tmp_path / "cache",
        "-o",
        tmp_path,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr
    assert "deprecated" not in (process.stdout + process.stderr).lower()
    assert "Sparse GP" in process.stdout or "sparse-gp" in process.stdout


def test_models_unknown_action_names_both(cli) -> None:
    result = cli("models", "refresh")
    assert_one_error(result, "unknown action", "list or fetch")
