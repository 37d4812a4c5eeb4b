"""`counting serve CONFIG`: live counts of the configured cameras, their history, an HTTP API,
Prometheus metrics and a dashboard, in one process."""

from __future__ import annotations

import contextlib
import ipaddress
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from counting.cli.common import console, informational, use_runtime
from counting.cli.options import QuietOption, RuntimeOption, ThreadsOption
from counting.core import defaults
from counting.core.errors import CountingError
from counting.model.default_path import default_model_path

if TYPE_CHECKING:
    import uvicorn

    from counting.apply.serve.config import ServeConfig
    from counting.apply.serve.service import Service

SERVER = "Server"


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


@contextlib.contextmanager
def signals_wait_for(what: str, say: Callable[[str], None], restore: bool = True) -> Iterator[None]:
    """Ctrl-C and SIGTERM inside the block say that ``what`` is finishing instead of stopping it.

    A second Ctrl-C during serve's stop (people press it twice) broke off the history's last
    commit and the cameras' threads (exit 130, rows lost). The stop is short and has timeouts of
    its own, so waiting for it is safe; outside the main thread (no signal handlers) it only runs.
    ``restore=False`` keeps the handlers after the block: serve's stop is its end, and a SIGTERM
    in the second the interpreter takes to exit made a clean stop exit 143 for a supervisor.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.getsignal(number) for number in wanted}

    def wait(number: int, frame: object) -> None:
        say(f"{what} are still being finished; this ends in a few seconds")

    for number in wanted:
        signal.signal(number, wait)
    try:
        yield
    finally:
        for number, handler in previous.items():
            # Without restore the process is exiting: such a signal has nothing left to stop.
            signal.signal(number, handler if restore else signal.SIG_IGN)


def started_line(cameras: int, url: str, settings: ServeConfig) -> str:
    """What serve says once it listens (rich markup, the names escaped)."""
    where = f"at {escape(url)} (history: {escape(str(settings.database))}); Ctrl-C stops"
    if cameras:
        return f"serving {cameras} camera{'s' if cameras != 1 else ''} {where}"
    # A config without [[camera]] is an upload service, not a mistake: say what it does.
    model = settings.model if settings.model is not None else default_model_path()
    return (
        f"serving no camera ({escape(str(settings.path))} has no {escape('[[camera]]')} table): pictures "
        f"posted to /api/count are counted by {escape(str(model))}, {where}"
    )


ConfigArgument = Annotated[
    Path,
    typer.Argument(
        metavar="CONFIG",
        help="The TOML config: [server] and [[camera]] tables (see examples/serve.toml).",
        show_default=False,
    ),
]
HostOption = Annotated[
    Optional[str],
    typer.Option(
        "--host",
        metavar="ADDRESS",
        help="Address to listen on (default: the config's, else 127.0.0.1); anything but loopback needs --token.",
        show_default=False,
        rich_help_panel=SERVER,
    ),
]
PortOption = Annotated[
    Optional[int],
    typer.Option(
        "--port",
        min=0,
        max=65535,
        metavar="N",
        help="Port (default: the config's, else 8000; 0: any free port, printed at start, on stdout under --quiet).",
        show_default=False,
        rich_help_panel=SERVER,
    ),
]
TokenOption = Annotated[
    Optional[str],
    typer.Option(
        "--token",
        envvar="COUNTING_SERVE_TOKEN",
        metavar="TOKEN",
        help="Bearer token required on the API, /metrics and the page (open it as /?token=TOKEN). "
        "Also read from $COUNTING_SERVE_TOKEN, which keeps it out of the process list.",
        show_default=False,
        rich_help_panel=SERVER,
    ),
]


def serve(
    config: ConfigArgument,
    host: HostOption = None,
    port: PortOption = None,
    token: TokenOption = None,
    runtime: RuntimeOption = defaults.RUNTIME,
    threads: ThreadsOption = None,
    quiet: QuietOption = False,
) -> None:
    """Serve live counts of cameras: dashboard, HTTP API, /metrics, history in SQLite."""
    from counting.apply.serve.config import load_config

    settings = load_config(config)
    bind = host if host is not None else settings.host
    chosen_port = port if port is not None else settings.port
    check_token(token, bind)
    use_runtime(runtime, threads)
    say = informational(quiet, on_stderr=True)
    # The port is bound before the models load, so a taken port fails at once, in one line.
    listener = listening_socket(bind, chosen_port)
    service, server = service_and_server(listener, settings, token)
    shown = f"[{bind}]" if ":" in bind else bind
    url = f"http://{shown}:{listener.getsockname()[1]}/"
    service.start()
    say(started_line(len(service.workers), url, settings))
    if quiet and chosen_port == 0:
        console.print(escape(url))  # the port --port 0 picked: the one thing a quiet start must say
    serve_until_stopped(server, service, listener, say)
    if service.history.unwritten:  # the database went wrong while serving (full disk, removed file)
        problem = service.history.error or f"{settings.database}: cannot write the history"
        raise CountingError(f"{problem}; {service.history.unwritten} counted rows are not in it")


def check_token(token: str | None, bind: str) -> None:
    """A token too long to guess, and one wherever the address reaches beyond this machine."""
    if token is not None and len(token) < 8:
        raise CountingError(
            "--token (or $COUNTING_SERVE_TOKEN): use at least 8 characters (a random string: python -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    if not is_loopback(bind) and token is None:
        raise CountingError(
            f"--host {bind}: listening beyond this machine needs --token (or $COUNTING_SERVE_TOKEN), "
            "so that only people who have it see the cameras"
        )


def listening_socket(bind: str, port: int) -> socket.socket:
    """A socket listening on ``bind:port``, or one line saying why it cannot."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((bind.strip("[]"), port))
        # Listening from here on: a client that reads the start line (or the address printed
        # under --quiet) and connects before the web server runs waits in the queue instead of
        # being refused (uvicorn accepts from this socket when it starts).
        listener.listen(2048)
    except OSError as error:
        listener.close()
        raise CountingError(f"{bind}:{port}: cannot listen there ({error.strerror or error})") from None
    return listener


def service_and_server(
    listener: socket.socket, settings: ServeConfig, token: str | None
) -> tuple[Service, uvicorn.Server]:
    """The service of ``settings`` (its models loaded) and the web server of its app, which
    accepts from ``listener``; the listener is closed if either cannot be made."""
    try:
        # The service (the models, torch) and the web server are imported once the config, the
        # options and the port have passed: a mistake in any of them is said at once, not after
        # 6 s of imports (scripts/bench_cli_startup.py times the same imports for --help).
        import uvicorn

        from counting.apply.serve.app import create_app
        from counting.apply.serve.service import Service

        service = Service(settings)
        app = create_app(service, token)
    except BaseException:
        listener.close()
        raise
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5, lifespan="off")
    return service, uvicorn.Server(config)


def serve_until_stopped(
    server: uvicorn.Server, service: Service, listener: socket.socket, say: Callable[[str], None]
) -> None:
    """Serve until Ctrl-C or SIGTERM, then stop the cameras and the history, and say what was done."""
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:
        pass  # uvicorn shut down on Ctrl-C or SIGTERM and passes the signal on: stopping is the normal end
    finally:
        with signals_wait_for("stopping: the cameras and the history's last rows", say, restore=False):
            service.stop()  # bounded: each camera's thread and the history's writer have a timeout
        listener.close()
        frames = sum(worker.status.frames for worker in service.workers.values())
        say(f"stopped; {frames} frames counted, {service.history.rows_written} history rows written this run")
