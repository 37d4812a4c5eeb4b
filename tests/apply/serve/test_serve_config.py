"""The serve config: what a valid file gives, and one line naming the file and key for each problem."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from counting.apply.serve.config import ConfigError, ReconnectPolicy, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_full_config_is_read_with_paths_relative_to_its_folder(tmp_path: Path) -> None:
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "a.avi").write_bytes(b"x")
    (tmp_path / "zones.toml").write_text("", encoding="utf-8")
    path = write(
        tmp_path,
        """
[server]
port = 9001
database = "db/history.sqlite"
retention_hours = 2.5
max_upload_bytes = 1000

[[camera]]
name = "door"
source = "videos/a.avi"
fps = 4
zones = "zones.toml"
reconnect = { max_retries = 3, backoff = 0.5, max_backoff = 2 }

[[camera]]
name = "street cam"
source = "rtsp://user:secret@10.0.0.5/stream"
zones = ["left:0,0,0.5,0,0.5,1,0,1"]

[[camera]]
name = "webcam"
source = 0
""",
    )
    config = load_config(path)
    assert (config.host, config.port, config.retention_hours, config.max_upload_bytes) == ("127.0.0.1", 9001, 2.5, 1000)
    assert config.database == tmp_path.resolve() / "db" / "history.sqlite"
    door, street, webcam = config.cameras
    assert door.source == str(tmp_path.resolve() / "videos" / "a.avi")
    assert door.fps == 4.0 and door.zones_file == tmp_path.resolve() / "zones.toml"
    assert door.reconnect == ReconnectPolicy(max_retries=3, backoff=0.5, max_backoff=2.0)
    assert street.source == "rtsp://user:secret@10.0.0.5/stream" and street.zones_inline == (
        "left:0,0,0.5,0,0.5,1,0,1",
    )
    assert street.fps == 2.0 and street.model is None and street.reconnect.max_retries == 0
    assert webcam.source == "0"


def test_the_reconnect_delays_double_up_to_the_cap_and_zero_retries_means_for_ever() -> None:
    policy = ReconnectPolicy(max_retries=3, backoff=0.5, max_backoff=1.5)
    assert [policy.delay(k) for k in (1, 2, 3, 4)] == [0.5, 1.0, 1.5, 1.5]
    assert not policy.gives_up(3) and policy.gives_up(4)
    assert not ReconnectPolicy(max_retries=0).gives_up(10_000)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[server]\nport = 70000\n", "server.port: must be a whole number from 0 to 65535"),
        ("[server]\nprot = 80\n", "server.prot: unknown key"),
        ("[server]\nretention_hours = -1\n", "server.retention_hours: must be a number above 0"),
        ("[server]\nmodel = 'missing.npz'\n", "server.model: "),
        ("[[camera]]\nsource = 'rtsp://x'\n", "camera[0].name: missing"),
        ("[[camera]]\nname = 'a'\n", "camera[0].source: missing"),
        ("[[camera]]\nname = 'a'\nsource = 'nope.avi'\n", "camera[0].source: "),
        ("[[camera]]\nname = 'a'\nsource = 'rtsp://x'\nfps = 0\n", "camera[0].fps: must be a number above 0"),
        ("[[camera]]\nname = 'a'\nsource = 'rtsp://x'\nfps = 100\n", "camera[0].fps: 100.0 frames per second"),
        ("[[camera]]\nname = 'a'\nsource = 'rtsp://x'\nzones = 3\n", "camera[0].zones: a zones file name"),
        ("[[camera]]\nname = 'a/b'\nsource = 'rtsp://x'\n", "camera[0].name: 'a/b'"),
        (
            "[[camera]]\nname = 'a'\nsource = 'rtsp://x'\n[[camera]]\nname = 'a'\nsource = 'rtsp://y'\n",
            "camera[1].name: 'a' names two cameras",
        ),
        (
            "[[camera]]\nname = 'a'\nsource = 'rtsp://x'\nreconnect = { retries = 2 }\n",
            "camera[0].reconnect.retries: unknown key",
        ),
        ("[server\n", "not valid TOML"),
        ("camera = 3\n", "camera: cameras are [[camera]] tables"),
    ],
)
def test_each_problem_is_one_line_naming_the_file_and_the_key(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and expected in message
    assert "\n" not in message


def test_a_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.toml")


def test_inline_zones_may_be_strings_or_tables(tmp_path: Path) -> None:
    from counting.apply.serve.counter import camera_zones
    from counting.apply.zone_specs import ZoneError

    path = write(
        tmp_path,
        """
[[camera]]
name = "a"
source = "rtsp://x"
zones = ["left:0,0,0.5,0,0.5,1,0,1", { name = "right", points = [[320, 0], [640, 0], [640, 480], [320, 480]] }]
""",
    )
    (camera,) = load_config(path).cameras
    zones = camera_zones(camera.zones_file, camera.zones_inline, f"{path}: camera[0].zones")
    assert [(zone.name, zone.relative) for zone in zones] == [("left", True), ("right", False)]
    assert zones[1].points == ((320.0, 0.0), (640.0, 0.0), (640.0, 480.0), (320.0, 480.0))
    with pytest.raises(ZoneError, match="camera\\[0\\].zones: zone name 'left' is given twice"):
        camera_zones(None, ["left:0,0,1,0,1,1", "left:0,0,1,0,0,1"], f"{path}: camera[0].zones")


def shown(markup: str) -> str:
    """What the user reads of a line of rich markup."""
    console = Console(file=io.StringIO(), width=1000)
    console.print(markup)
    return console.file.getvalue().strip()


def test_the_start_line_says_cameras_or_that_it_serves_uploads_only(tmp_path: Path) -> None:
    from counting.cli.serve import started_line

    (tmp_path / "mine.npz").write_bytes(b"")  # the config checks that the file is there, not what it holds
    uploads_only = tmp_path / "uploads.toml"
    uploads_only.write_text('[server]\nmodel = "mine.npz"\n')
    line = shown(started_line(0, "http://127.0.0.1:8000/", load_config(uploads_only)))
    assert line.startswith("serving no camera") and "has no [[camera]] table" in line
    assert f"counted by {tmp_path / 'mine.npz'}" in line and "/api/count" in line
    bare = tmp_path / "bare.toml"
    bare.write_text("")
    from counting.model.default_path import default_model_path

    plain = shown(started_line(0, "http://127.0.0.1:8000/", load_config(bare)))
    assert f"counted by {default_model_path()}" in plain and "has no [[camera]] table" in plain
    one = started_line(1, "http://127.0.0.1:8000/", load_config(bare))
    assert one.startswith("serving 1 camera at http://127.0.0.1:8000/") and "Ctrl-C stops" in one
    assert started_line(2, "http://[::1]:8000/", load_config(bare)).startswith(
        "serving 2 cameras at http://[::1]:8000/"
    )
