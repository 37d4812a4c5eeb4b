"""The HTTP API on a free loopback port: POST /api/count (the JSON of count --json), hostile
uploads refused with a 4xx and a message while the server stays up, the token, the docs."""

from __future__ import annotations

import base64
import io
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image
from serve_helpers import FAST_MODEL, RunningServer, write_config

from counting.apply.api import count as count_pictures

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("api")
    config = write_config(
        folder / "serve.toml",
        f'model = "{FAST_MODEL}"\ndatabase = "h.sqlite"\nmax_upload_bytes = 2000000\nmax_upload_pixels = 1000000\n',
    )
    running = RunningServer(config, token=TOKEN)
    yield running
    running.close()


@pytest.fixture(scope="module")
def mall_jpeg(mall_root: Path) -> bytes:
    return (mall_root / "frames" / "seq_000005.jpg").read_bytes()


def assert_up(server: RunningServer) -> None:
    assert server.client.get("/api/health").status_code == 200


@pytest.mark.slow  # loads the model (and exports its network to ONNX in a fresh session)
def test_a_posted_picture_gets_what_count_json_writes(server: RunningServer, mall_root: Path, mall_jpeg: bytes) -> None:
    response = server.client.post("/api/count", content=mall_jpeg, headers={"Content-Type": "image/jpeg"})
    assert response.status_code == 200, response.text
    document = response.json()
    expected = count_pictures(
        [np.asarray(Image.open(io.BytesIO(mall_jpeg)).convert("RGB"))], model=FAST_MODEL
    ).as_dict()
    assert set(document) == {"model", "images", "skipped"} and document["skipped"] == []
    assert document["model"] == expected["model"]
    (row,) = document["images"]
    assert row["image"] == "upload" and list(row) == list(expected["images"][0])  # the same columns
    assert list(row)[:4] == ["image", "count", "low", "high"] and row["unfamiliar"] is False
    assert row["familiarity"] == pytest.approx(expected["images"][0]["familiarity"], abs=1e-9)
    assert row["count"] == pytest.approx(expected["images"][0]["count"], abs=1e-6)
    assert row["low"] == pytest.approx(expected["images"][0]["low"], abs=1e-6)
    assert row["low"] < row["count"] < row["high"] and 10 < row["count"] < 60  # Mall frames hold 13-53 people
    as_json = server.client.post("/api/count", json={"image": base64.b64encode(mall_jpeg).decode()})
    assert as_json.status_code == 200 and as_json.json()["images"][0]["count"] == pytest.approx(row["count"], abs=1e-9)


def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` pixels, with (almost) no pixel data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("name", "body", "content_type", "status", "message"),
    [
        ("oversize", b"\xff\xd8" + b"\x00" * 2_100_000, "image/jpeg", 413, "larger than the 2000000 bytes"),
        ("not an image", b"hello, this is text" * 10, "image/jpeg", 415, "not a picture of a supported kind"),
        ("wrong content type", b"whatever", "text/plain", 415, "Content-Type 'text/plain'"),
        ("more pixels than accepted", png_declaring(5_000, 5_000), "image/png", 413, "5000x5000 pixels is more than"),
        ("decompression bomb", png_declaring(50_000, 50_000), "image/png", 413, "declares too many pixels"),
        ("bad json", b'{"image": ', "application/json", 400, "not valid JSON"),
        ("path-like field", b'{"path": "/etc/passwd"}', "application/json", 400, "unknown field 'path'"),
        ("path as the image", b'{"image": "/etc/passwd"}', "application/json", 400, "not valid base64"),
        ("empty body", b"", "image/jpeg", 400, "empty"),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 40 else "",
)
def test_hostile_uploads_get_a_4xx_with_a_message_and_the_server_stays_up(
    server: RunningServer, name: str, body: bytes, content_type: str, status: int, message: str
) -> None:
    uploads_before = server.service.metrics.uploads._value.get()
    response = server.client.post("/api/count", content=body, headers={"Content-Type": content_type})
    assert response.status_code == status, (name, response.text)
    assert message in response.json()["detail"]
    assert server.service.metrics.uploads._value.get() == uploads_before  # nothing counted
    assert server.service.history.count_rows() == 0  # nothing stored
    assert_up(server)


def test_a_truncated_picture_is_refused_as_damaged(server: RunningServer, mall_jpeg: bytes) -> None:
    response = server.client.post(
        "/api/count", content=mall_jpeg[: len(mall_jpeg) // 2], headers={"Content-Type": "image/jpeg"}
    )
    assert response.status_code == 400 and "truncated or damaged" in response.json()["detail"]
    assert_up(server)


def test_a_body_longer_than_its_declared_length_limit_is_cut_off_while_streaming(server: RunningServer) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
        for _ in range(30):
            yield b"\x00" * 100_000

    response = server.client.post("/api/count", content=chunks(), headers={"Content-Type": "image/jpeg"})
    assert response.status_code == 413
    assert_up(server)


def test_an_unknown_camera_is_a_404_not_a_lookup_of_anything_else(server: RunningServer, mall_jpeg: bytes) -> None:
    for camera in ("../../etc/passwd", "nope"):
        response = server.client.post(
            "/api/count", params={"camera": camera}, content=mall_jpeg, headers={"Content-Type": "image/jpeg"}
        )
        assert response.status_code == 404
    assert server.client.get("/static/..%2F..%2Fconfig.py").status_code == 404
    assert server.client.get("/api/cameras/nope/frame.jpg").status_code == 404


@pytest.mark.parametrize("path", ["/api/cameras", "/api/history", "/metrics", "/openapi.json", "/", "/docs"])
def test_every_route_needs_the_token(server: RunningServer, path: str) -> None:
    assert httpx.get(server.url + path).status_code == 401
    wrong = httpx.get(server.url + path, headers={"Authorization": "Bearer wrong-token-xx"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert server.client.get(path).status_code == 200


def test_the_page_alone_opens_with_the_token_in_its_address(server: RunningServer) -> None:
    page = httpx.get(server.url + "/", params={"token": TOKEN})
    assert page.status_code == 200 and '<svg id="chart"' in page.text
    assert httpx.get(server.url + "/api/cameras", params={"token": TOKEN}).status_code == 401
    assert httpx.get(server.url + "/", params={"token": "wrong"}).status_code == 401


def test_the_api_docs_work_offline_with_the_token_in_their_address(server: RunningServer) -> None:
    docs = httpx.get(server.url + "/docs", params={"token": TOKEN})
    assert docs.status_code == 200 and "cdn" not in docs.text.lower()
    assets = re.findall(r"(?:href|src)=['\"]([^'\"]+)['\"]", docs.text)
    assert len(assets) >= 2 and all(asset.startswith("/docs-assets/") for asset in assets)
    for asset in assets:  # Swagger UI's files are served here, without the token (no data in them)
        served = httpx.get(server.url + asset)
        assert served.status_code == 200 and len(served.content) > 500, asset
    schema = re.search(r"url: '([^']+)'", docs.text).group(1)
    assert schema == f"/openapi.json?token={TOKEN}"
    assert "/api/count" in httpx.get(server.url + schema).json()["paths"]
    assert httpx.get(server.url + "/docs-assets/../openapi.json").status_code == 401


def test_openapi_lists_the_routes_and_metrics_time_the_requests(server: RunningServer) -> None:
    paths = server.client.get("/openapi.json").json()["paths"]
    for path in ("/api/cameras", "/api/latest", "/api/history", "/api/history.csv", "/api/count", "/metrics"):
        assert path in paths
    assert server.client.get("/docs").status_code == 200
    assert server.client.get("/api/history").json() == {
        "query": {"camera": None, "zone": None, "start": None, "end": None, "resolution": None, "points": None},
        "rows": [],
        "truncated": False,
    }
    assert server.client.get("/api/history", params={"resolution": "0"}).status_code == 422  # checked, with a message
    metrics = server.client.get("/metrics").text
    assert 'counting_http_request_duration_seconds_count{method="POST",route="/api/count",status="413"}' in metrics
    assert 'route="/api/cameras/{name}/frame.jpg",status="404"' in metrics  # the template, not the raw path
