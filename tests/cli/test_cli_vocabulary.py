"""One CLI vocabulary (issue 25): every command's options, read from the click commands the app
builds, against the shared declarations of counting/cli/options.py.

Shared options have one name, one default and one help text wherever they appear; every command
that computes descriptors has the cache, progress and quiet options; results are written with
--csv / --json / --jsonl only (older spellings are hidden aliases that still work and warn once);
every --help fits the terminal with nothing cut off (tests/cli/test_help_layout.py); diagnostics go to
stderr.
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
import tempfile
from pathlib import Path

import click
import pytest

from counting.cli.app import COMMANDS, _load_command, app
from counting.core import defaults

# Every command computes descriptors (report with --dataset/--root, compare always).
DESCRIPTOR_COMMANDS = ("count", "video", "evaluate", "report", "compare", "train", "features", "familiarize")
# A service counting live frames: nothing cached, no progress bar (it runs until stopped).
SERVICE_COMMANDS = ("serve",)
# Commands that read no pictures (`models fetch`): only the help checks below apply to them.
OTHER_COMMANDS = ("models",)
# Same name, default and help text in every command that has them.
SHARED = ("--progress", "--quiet", "--no-cache", "--cache-dir", "--smooth", "--runtime", "--threads", "--weights")
# --batch-size is shared by the commands that read pictures; video's counts frames with a smaller
# default (defaults.VIDEO_BATCH_SIZE: a frame waits for its batch, so a batch is latency).
BATCH_SIZE_EXCEPTIONS = {"video"}
# Where a command writes results; the panel holds these and nothing else.
RESULT_OPTIONS = {"--csv", "--json", "--jsonl"}
ARTIFACT_OPTIONS = {"--out", "--annotated", "--counts-dir"}  # a model, report or compare folder, a video
# Former spellings: hidden, still accepted.
DEPRECATED = {"video": {"--counts": "--csv"}, "evaluate": {"--predictions": "--csv"}}


@pytest.fixture(scope="module")
def commands() -> dict[str, click.Command]:
    return {name: _load_command(name) for name in COMMANDS}


def options_of(command: click.Command) -> dict[str, click.Parameter]:
    """Every option of ``command`` (--help included), keyed by its first long name."""
    context = click.Context(command)
    found = {}
    for param in command.get_params(context):
        if getattr(param, "param_type_name", "") != "option":
            continue
        long_names = [name for name in param.opts if name.startswith("--")]
        found[long_names[0]] = param
    return found


def test_every_command_is_checked(commands) -> None:
    assert set(commands) == set(DESCRIPTOR_COMMANDS) | set(SERVICE_COMMANDS) | set(OTHER_COMMANDS)


@pytest.mark.parametrize("name", DESCRIPTOR_COMMANDS)
def test_descriptor_commands_have_the_run_options(commands, name: str) -> None:
    options = options_of(commands[name])
    for option in ("--no-cache", "--cache-dir", "--progress", "--quiet"):
        assert option in options, f"{name} lacks {option}"
    assert options["--progress"].secondary_opts == ["--no-progress"]
    assert options["--quiet"].opts == ["--quiet", "-q"]
    assert options["--no-cache"].is_flag


def test_shared_options_have_one_name_default_and_help(commands) -> None:
    for option in (*SHARED, "--batch-size", "--grid", "--cluster", "--model", "--csv", "--json"):
        seen = {name: options_of(command).get(option) for name, command in commands.items()}
        seen = {name: param for name, param in seen.items() if param is not None}
        assert seen, option
        spellings = {(tuple(param.opts), tuple(param.secondary_opts)) for param in seen.values()}
        assert len(spellings) == 1, (option, spellings)  # the same flags (and short flag) everywhere
        if option not in SHARED:
            continue
        defaults_seen = {name: param.default for name, param in seen.items()}
        assert len(set(map(repr, defaults_seen.values()))) == 1, (option, defaults_seen)
        helps = {name: param.help for name, param in seen.items()}
        assert len(set(helps.values())) == 1, (option, helps)
    batch = {name: options_of(commands[name])["--batch-size"] for name in DESCRIPTOR_COMMANDS if name != "compare"}
    shared_batch = {name: param for name, param in batch.items() if name not in BATCH_SIZE_EXCEPTIONS}
    assert {param.default for param in shared_batch.values()} == {defaults.BATCH_SIZE}
    assert len({param.help for param in shared_batch.values()}) == 1
    assert batch["video"].default == defaults.VIDEO_BATCH_SIZE


def test_progress_is_on_where_a_terminal_shows_it_and_quiet_is_off(commands) -> None:
    for name in DESCRIPTOR_COMMANDS:
        options = options_of(commands[name])
        assert options["--progress"].default is True, name  # the bars show only on a terminal
        assert "terminal" in options["--progress"].help and "pipe" in options["--progress"].help
        assert options["--quiet"].default is False, name
    assert options_of(commands["serve"])["--quiet"].default is False


def test_one_smoothing_default_and_one_grid_default(commands) -> None:
    smooth = {name: options_of(command).get("--smooth") for name, command in commands.items()}
    smooth = {name: param for name, param in smooth.items() if param is not None}
    assert set(smooth) >= {"video", "evaluate", "report", "compare"}
    assert {param.default for param in smooth.values()} == {defaults.SMOOTHING_WINDOW}
    assert all(f"Default {defaults.SMOOTHING_WINDOW}" in param.help for param in smooth.values())  # says why
    grid_defaults = {name: options_of(commands[name])["--grid"].default for name in ("compare", "train", "features")}
    assert len(set(grid_defaults.values())) == 1, grid_defaults


def test_report_computes_descriptors_like_evaluate(commands) -> None:
    report, evaluate = options_of(commands["report"]), options_of(commands["evaluate"])
    for option in ("--cluster", "--batch-size", "--no-cache", "--cache-dir"):
        assert option in report and option in evaluate


def test_epochs_help_gives_the_regressors_default(commands) -> None:
    from agp import AGPRegressor

    max_epochs = inspect.signature(AGPRegressor.__init__).parameters["max_epochs"].default
    assert f"default {max_epochs}" in options_of(commands["train"])["--epochs"].help


def test_cluster_help_says_what_each_command_runs(commands) -> None:
    for name, command in commands.items():
        cluster = options_of(command).get("--cluster")
        if cluster is None:
            continue
        assert ("--sources" in cluster.help) == (name == "video"), (name, cluster.help)
        assert "local:N" in cluster.help and "tcp://HOST:8786" in cluster.help


def test_results_are_written_with_csv_json_jsonl_only(commands) -> None:
    for name, command in commands.items():
        for option, param in options_of(command).items():
            if param.hidden:
                continue
            if getattr(param, "rich_help_panel", None) == "Output":
                assert option in RESULT_OPTIONS | ARTIFACT_OPTIONS, (name, option)
            assert option not in {old for aliases in DEPRECATED.values() for old in aliases}, (name, option)
        for old, new in DEPRECATED.get(name, {}).items():
            alias = options_of(command)[old]
            assert alias.hidden and new in options_of(command), (name, old)
    assert "--jsonl" in options_of(commands["video"])  # video's rows stream


def test_flags_show_no_value_placeholder(runner) -> None:
    for name in (None, *COMMANDS):
        result = runner.invoke(app, [*([name] if name else []), "--help"], env={"COLUMNS": "100"})
        assert result.exit_code == 0
        assert "<bool>" not in result.output, name


@pytest.mark.parametrize("name", COMMANDS)
def test_help_fits_100_columns_with_nothing_cut_off(runner, commands, name: str) -> None:
    result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert "…" not in result.output  # rich's ellipsis: a cut-off word or option name
    for param in options_of(commands[name]).values():
        if not param.hidden:
            for spelling in (*param.opts, *param.secondary_opts):
                assert re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", result.output), (name, spelling)
    assert len(lines) < 160, (name, len(lines))


@pytest.mark.parametrize("columns", ["40", "60", "80"])
@pytest.mark.parametrize("name", COMMANDS)
def test_help_on_a_narrow_terminal_cuts_no_option_name(runner, commands, name: str, columns: str) -> None:
    """Below 100 columns rich squeezed the option column ("--no-prog…"); then help was drawn 100
    columns wide, which wrapped every line of a narrower terminal. Now it fits the terminal: an
    option a line, its help below, where a table would leave the help too little room."""
    result = runner.invoke(app, [name, "--help"], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= int(columns)
    assert "…" not in result.output
    for param in options_of(commands[name]).values():
        if not param.hidden:
            for spelling in (*param.opts, *param.secondary_opts):
                assert re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", result.output), (name, spelling)


def test_deprecated_spelling_warns_once_on_stderr(runner, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dataset"
    result = runner.invoke(
        app, ["evaluate", "-d", "mall", "-r", str(missing), "--predictions", str(tmp_path / "p.csv")]
    )
    assert result.exit_code == 1
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: --predictions is deprecated and will be removed; use --csv"]
    assert "warning" not in result.stdout
    both = runner.invoke(
        app,
        ["evaluate", "-d", "mall", "-r", str(missing), "--csv", str(tmp_path / "a.csv"), "--predictions", "b.csv"],
    )
    assert both.exit_code == 2 and "--predictions is the old spelling of --csv" in " ".join(both.stderr.split())


def test_deprecated_counts_still_writes_the_video_counts(trained, runner, short_video: Path, tmp_path: Path) -> None:
    model_path, _ = trained
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    common = ["video", str(short_video), "--model", str(model_path), "--max-frames", "3", "--no-progress"]
    result = runner.invoke(app, [*common, "--counts", str(old), "-q"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("warning: --counts is deprecated") == 1
    assert runner.invoke(app, [*common, "--csv", str(new), "-q"]).exit_code == 0
    assert old.read_text() == new.read_text() and len(new.read_text().splitlines()) == 4  # header + 3 rows
    # --quiet with a counts file: the file holds the results; stdout is empty, no summary line
    assert result.stdout == "" and "done: 3 frames" not in result.stderr
    assert "counts written" not in result.output


def test_video_output_format_follows_the_option_not_the_name(runner, short_video: Path, tmp_path: Path) -> None:
    # As in `count`: --csv writes CSV and --jsonl JSON lines whatever the file is called.
    as_csv, as_jsonl = tmp_path / "c.txt", tmp_path / "c.csv"
    common = ["video", str(short_video), "--max-frames", "3", "-q"]
    assert runner.invoke(app, [*common, "--csv", str(as_csv)]).exit_code == 0
    assert runner.invoke(app, [*common, "--jsonl", str(as_jsonl)]).exit_code == 0
    header, *rows = as_csv.read_text().splitlines()
    assert header.startswith("frame,") and len(rows) == 3
    records = [json.loads(line) for line in as_jsonl.read_text().splitlines()]
    assert [record["frame"] for record in records] == [int(row.split(",")[0]) for row in rows]


def test_skipped_files_are_diagnostics_on_stderr(runner, mall_root: Path, tmp_path: Path) -> None:
    # A short folder name: the table cuts long paths to its width ("a.j…"), and pytest-xdist's
    # temporary folders (.../popen-gw0/test_skipped_files_are_diagnos0/photos) are long.
    with tempfile.TemporaryDirectory(prefix="c", dir="/tmp") as short:
        folder = Path(short)
        shutil.copy(mall_root / "frames" / "seq_000001.jpg", folder / "a.jpg")
        (folder / "b.jpg").write_text("not a picture\n")
        out = tmp_path / "counts.csv"
        result = runner.invoke(app, ["count", str(folder), "--csv", str(out)])
        assert result.exit_code == 0, result.output
        assert "skipped:" in result.stderr and "b.jpg" in result.stderr
        assert "skipped:" not in result.stdout and "b.jpg" not in result.stdout
        assert "a.jpg" in result.stdout and "counts written to" in result.stdout
        quiet = runner.invoke(app, ["count", str(folder), "--csv", str(out), "-q"])
        assert quiet.exit_code == 0 and "a.jpg" in quiet.stdout  # results still printed
        assert "counts written" not in quiet.stdout and "b.jpg" in quiet.stderr  # diagnostics still printed


def test_dash_sends_count_results_to_stdout(runner, mall_root: Path, tmp_path: Path) -> None:
    frames = [str(mall_root / "frames" / f"seq_00000{k}.jpg") for k in (1, 2)]
    as_csv = runner.invoke(app, ["count", *frames, "--csv", "-"])
    assert as_csv.exit_code == 0, as_csv.output
    header, *rows = as_csv.stdout.splitlines()  # the CSV alone: no table, no "written" line
    assert header.startswith("image,count,low,high") and [row.split(",")[0] for row in rows] == frames
    # A folder name long enough that "counts written to ..." passes 80 columns: the diagnostic is
    # one line on a stderr that is not a terminal (rich broke it at 80 columns, mid-path).
    folder = tmp_path / ("a-long-folder-name-" * 4)
    folder.mkdir()
    as_json = runner.invoke(app, ["count", *frames, "--json", "-", "--csv", str(folder / "c.csv")])
    assert f"counts written to {folder / 'c.csv'}\n" in as_json.stderr, as_json.stderr
    document = json.loads(as_json.stdout)
    assert [row["image"] for row in document["images"]] == frames
    assert [f"{row['count']:.3f}" for row in document["images"]] == [row.split(",")[1] for row in rows]
    assert not (Path.cwd() / "-").exists()
    both = runner.invoke(app, ["count", *frames, "--csv", "-", "--json", "-"])
    assert both.exit_code == 2 and "stdout" in both.stderr


def test_dash_is_refused_where_an_output_cannot_be_stdout(runner, one_error_line, tmp_path: Path) -> None:
    line = one_error_line(runner.invoke(app, ["train", "-d", "mall", "-r", str(tmp_path), "-o", "-"]))
    assert line.startswith("error: -:") and "give a file name" in line


def test_two_spellings_of_one_output_are_a_usage_error_everywhere(runner, short_video: Path, tmp_path: Path) -> None:
    video = runner.invoke(app, ["video", str(short_video), "--csv", "a.csv", "--counts", str(tmp_path / "b.csv")])
    assert video.exit_code == 2 and "give one counts file" in " ".join(video.stderr.split())
