"""The HTTP side of `counting serve` (FastAPI): the API, /metrics and the dashboard page.

Routes (OpenAPI at /docs and /openapi.json; the docs page's Swagger UI files come from the
swagger-ui-bundle package, served at /docs-assets: no CDN, so /docs works offline):
  GET  /                              the dashboard (plain HTML/JS/CSS from this package)
  GET  /api/cameras                   cameras, their state, last error and latest counts
  GET  /api/latest                    {camera: latest record}
  GET  /api/history                   rows by camera, zone, time range; ?resolution=S averages per S seconds in SQL
  GET  /api/history.csv               the same as CSV
  GET  /api/cameras/{name}/frame.jpg  the latest counted frame with zones, heat map and count
  POST /api/count                     count one picture (raw image body, {"image": base64} or a multipart
                                      form with one file); count --json's document
  GET  /metrics                       Prometheus metrics
With a token, every route needs ``Authorization: Bearer TOKEN``; the page itself may be opened
as ``/?token=TOKEN`` (a browser cannot send a header when opening a page; the same for /docs and
the /openapi.json it reads) and sends the header
on its own requests. No route reads a file path from the request: cameras are looked up by
name among the configured ones; the page is one document built at start-up. The handlers
are grouped by what they serve, one APIRouter each (pages, cameras, history, pictures, health).
"""

from __future__ import annotations

import asyncio
import hmac
import time
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, HTTPException, Query, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST
from swagger_ui_bundle import swagger_ui_path

from counting.apply.serve.history import ROW_LIMIT
from counting.apply.serve.service import Service
from counting.apply.serve.uploads import UploadError, decode_upload, image_bytes
from counting.core.errors import CountingError, ModelFileError
from counting.core.version import __version__

# Swagger UI's files (the swagger-ui-bundle package), served by this process for /docs.
DOCS_ASSETS = "/docs-assets"
# Opened by a browser, which cannot send the header: the token may come as ?token=.
_PAGES = frozenset({"/", "/docs", "/openapi.json"})
_METHODS = frozenset({"GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"})
_STYLE = '<link rel="stylesheet" href="static/dashboard.css">'
_SCRIPT = '<script src="static/dashboard.js"></script>'


def dashboard_page() -> str:
    """The dashboard as one document: its stylesheet and script inlined, so that the page is
    the only request needing the token in its address (the script sends the header itself).
    They stay separate files in the package (static/) to be edited as CSS and JavaScript."""

    def read(name: str) -> str:
        return resources.files("counting.apply.serve").joinpath("static", name).read_text(encoding="utf-8")

    page = read("dashboard.html")
    if _STYLE not in page or _SCRIPT not in page:  # pragma: no cover - a packaging mistake
        raise RuntimeError("static/dashboard.html does not name its stylesheet and script as expected")
    page = page.replace(_STYLE, f"<style>\n{read('dashboard.css')}</style>")
    return page.replace(_SCRIPT, f"<script>\n{read('dashboard.js')}</script>")


def create_app(service: Service, token: str | None = None) -> FastAPI:
    """The app serving ``service``; ``token`` (if any) is required on every route."""
    app = FastAPI(
        title="counting serve",
        version=__version__,
        description="Live people counts per camera and zone, their history, and one-off counts of uploaded pictures.",
        docs_url=None,  # FastAPI's own page loads Swagger UI from a CDN: blank without internet
        redoc_url=None,
    )
    app.mount(DOCS_ASSETS, StaticFiles(directory=swagger_ui_path), name="docs-assets")
    add_guard_and_timing(app, service, token)
    # In this order: the OpenAPI document lists the routes as they are added.
    for router in (
        page_routes(dashboard_page(), token),
        camera_routes(service),
        history_routes(service),
        picture_routes(service),
        health_routes(service),
    ):
        app.include_router(router)
    return app


def add_guard_and_timing(app: FastAPI, service: Service, token: str | None) -> None:
    """Every request: refused (401) without the token when one is set, and timed in the
    metrics by its route's template."""

    @app.middleware("http")
    async def guard_and_time(request: Request, call_next: Any) -> Response:
        started = time.perf_counter()
        if token is not None and not _authorised(request, token):
            response: Response = JSONResponse(
                {"detail": "missing or wrong token: send Authorization: Bearer TOKEN"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        else:
            response = await call_next(request)
        route = request.scope.get("route")
        label = getattr(route, "path", "unmatched")  # the template (/api/cameras/{name}/...), never the raw path
        method = request.method if request.method in _METHODS else "other"  # labels from a fixed set only
        service.metrics.requests.labels(method, label, str(response.status_code)).observe(time.perf_counter() - started)
        return response


def page_routes(page: str, token: str | None) -> APIRouter:
    """The pages a browser opens: the dashboard (``page``) and the API's docs."""
    router = APIRouter()

    @router.get("/docs", include_in_schema=False)
    def docs(request: Request) -> Response:
        given = request.query_params.get("token")  # only reached with a valid one when a token is set
        schema = "/openapi.json" + (f"?{urlencode({'token': given})}" if token is not None and given else "")
        return get_swagger_ui_html(
            openapi_url=schema,
            title="counting serve - API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )

    @router.get("/", include_in_schema=False)
    def dashboard() -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-store"})

    return router


def camera_routes(service: Service) -> APIRouter:
    """The cameras, their state and their latest counts."""
    router = APIRouter()

    @router.get("/api/cameras", summary="Cameras, their state and latest counts")
    def cameras() -> list[dict[str, Any]]:
        return service.cameras()

    @router.get("/api/latest", summary="The latest count of each camera (None before its first frame)")
    def latest() -> dict[str, Any]:
        return {camera["name"]: camera["latest"] for camera in service.cameras()}

    return router


def checked_camera(service: Service, camera: str | None) -> str | None:
    """``camera`` when it is one of the configured cameras (or None), else a 404."""
    if camera is not None and camera not in service.workers:
        raise HTTPException(404, f"no camera named {camera!r:.80}")
    return camera


_TIME_HELP = "Unix time in seconds"
_RESOLUTION_HELP = "Average the rows over buckets of this many seconds (computed in SQL); none: every row"
_POINTS_HELP = "Average over buckets wide enough for about this many points per camera and zone over the rows in range"


def history_routes(service: Service) -> APIRouter:
    """The history of the counts: rows as JSON (at most ROW_LIMIT) or all of them as CSV."""
    router = APIRouter()

    def history_query(
        camera: str | None,
        zone: str | None,
        start: float | None,
        end: float | None,
        resolution: float | None,
        points: int | None,
    ) -> dict[str, Any]:
        return {
            "camera": checked_camera(service, camera),
            "zone": zone,
            "start": start,
            "end": end,
            "resolution": resolution,
            "points": points,
        }

    @router.get("/api/history", summary="Counts over a time range, optionally averaged per time bucket")
    def history(
        camera: str | None = Query(None, max_length=64),
        zone: str | None = Query(None, max_length=64, description="'' is the whole frame; none: every zone"),
        start: float | None = Query(None, description=_TIME_HELP),
        end: float | None = Query(None, description=_TIME_HELP),
        resolution: float | None = Query(None, gt=0, le=366 * 86400, description=_RESOLUTION_HELP),
        points: int | None = Query(None, ge=1, le=5000, description=_POINTS_HELP),
    ) -> dict[str, Any]:
        query = history_query(camera, zone, start, end, resolution, points)
        rows = service.history.query(**query, limit=ROW_LIMIT + 1)
        # More than the limit: the first ROW_LIMIT, and "truncated" says so (narrow the range, or use CSV).
        return {"query": query, "rows": rows[:ROW_LIMIT], "truncated": len(rows) > ROW_LIMIT}

    @router.get("/api/history.csv", summary="The history as CSV", response_class=StreamingResponse)
    def history_csv(
        camera: str | None = Query(None, max_length=64),
        zone: str | None = Query(None, max_length=64),
        start: float | None = Query(None, description=_TIME_HELP),
        end: float | None = Query(None, description=_TIME_HELP),
        resolution: float | None = Query(None, gt=0, le=366 * 86400, description=_RESOLUTION_HELP),
        points: int | None = Query(None, ge=1, le=5000, description=_POINTS_HELP),
    ) -> StreamingResponse:
        query = history_query(camera, zone, start, end, resolution, points)
        return StreamingResponse(
            service.history.export_csv(**query),
            media_type="text/csv",
            headers={"Content-Disposition": 'attachment; filename="counting-history.csv"'},
        )

    return router


# What POST /api/count accepts, in the OpenAPI document (the body is read by the handler itself).
_UPLOAD_BODY = {
    "requestBody": {
        "content": {
            "image/jpeg": {"schema": {"type": "string", "format": "binary"}},
            "image/png": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {
                "schema": {"type": "object", "properties": {"image": {"type": "string", "format": "base64"}}}
            },
            # What HTML forms and `curl -F file=@photo.jpg` send (Swagger UI shows a file picker).
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                }
            },
        }
    }
}


def picture_routes(service: Service) -> APIRouter:
    """Pictures out and in: a camera's latest counted frame, and one uploaded picture counted."""
    router = APIRouter()
    config = service.config

    @router.get(
        "/api/cameras/{name}/frame.jpg",
        summary="The camera's latest counted frame: zones, heat map (density models), count",
        response_class=Response,
        responses={200: {"content": {"image/jpeg": {}}}},
    )
    def frame(name: str) -> Response:
        checked_camera(service, name)
        jpeg = service.frame_jpeg(name)
        if jpeg is None:
            raise HTTPException(404, f"camera {name!r} has not counted a frame yet")
        return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "no-store"})

    @router.post(
        "/api/count", summary="Count one picture: the JSON `counting count --json` writes", openapi_extra=_UPLOAD_BODY
    )
    async def count(request: Request, camera: str | None = Query(None, max_length=64)) -> Any:
        checked_camera(service, camera)
        try:
            body = await _bounded_body(request, config.max_upload_bytes)
            # In a thread: a 10 MB form or base64 document takes 30-80 ms to take apart, which
            # would hold up every other request (the dashboard's, the metrics') on the event loop.
            kind = request.headers.get("content-type")
            data = await asyncio.to_thread(image_bytes, body, kind, config.max_upload_bytes)
            rgb = await asyncio.to_thread(decode_upload, data, config.max_upload_pixels)
            return await asyncio.to_thread(service.count_upload, rgb, camera)
        except UploadError as error:
            return JSONResponse({"detail": error.message}, status_code=error.status)
        except ModelFileError as error:
            # The model, not the picture: loaded at the first upload, a broken file was a 422
            # blaming the picture. The service cannot count until the file is replaced.
            problem = str(error).splitlines()[0]
            return JSONResponse({"detail": f"cannot count: {problem}"}, status_code=503)
        except CountingError as error:
            # A picture the model refuses, e.g. one of another size than the camera's region of
            # interest (a 1024x768 photo with ?camera= of a 640x480 Mall camera): a 500 before.
            counted_by = f"the model of camera {camera!r:.80}" if camera is not None else "the upload model"
            problem = str(error).splitlines()[0] if str(error) else type(error).__name__
            return JSONResponse({"detail": f"{counted_by} cannot count this picture ({problem})"}, status_code=422)

    return router


def health_routes(service: Service) -> APIRouter:
    """What watches the service: Prometheus metrics and liveness."""
    router = APIRouter()

    @router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    def metrics() -> Response:
        return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @router.get("/api/health", summary="Liveness: the cameras' states and the history's last write error")
    def health() -> dict[str, Any]:
        return {
            "uptime_s": time.time() - service.started,
            "cameras": {name: worker.status.state for name, worker in service.workers.items()},
            "history_rows_written": service.history.rows_written,
            "history_error": service.history.error,
        }

    return router


def _authorised(request: Request, token: str) -> bool:
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return True
    if request.url.path.startswith(f"{DOCS_ASSETS}/"):
        return True  # Swagger UI's own script and stylesheet: a library's files, no data
    if request.url.path in _PAGES:  # pages a browser opens: /?token=...
        given = request.query_params.get("token", "")
        return hmac.compare_digest(given.encode(), token.encode())
    return False


async def _bounded_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) as soon as it passes ``limit`` bytes: a declared
    Content-Length over the limit is refused before reading anything."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise UploadError(413, f"the body ({declared} bytes) is larger than the {limit} bytes accepted")
        except ValueError:
            raise UploadError(400, "Content-Length is not a number") from None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise UploadError(413, f"the body is larger than the {limit} bytes accepted")
        chunks.append(chunk)
    return b"".join(chunks)
