"""The proxy's own process: start-up checks, the listening socket, the home lock, the server (`serving.py`).

A plain `switch serve` reads its options without typer (`cli/proxy_process.py`) and calls `main` from its
own process; when typer had to read them (a repeated option, say), the command execs this module (same PID), so
typer, click's help machinery and every other command stay out of a process that lives as long as the
proxy does:

    python -P -m switch.proxy.server_main [--host HOST] [--port PORT] [--log-level LEVEL] [--fail-open]

Its lines and exit codes are the ones `switch serve` printed when it served in the typer process.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import signal
import socket
import sys
from typing import Any

# As `switch --help` documents them (cli/commands.py): this process must answer with the same codes.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
INTERRUPTED = 130  # Ctrl-C, as typer ends a command it interrupts

WS_ENVELOPE_BYTES = 64 * 1024
"""Allowance over `[server] max_body_bytes` for one WebSocket message (its `type` and framing)."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _tune_gc() -> None:
    """Fewer, cheaper garbage collections for a long-running server.

    Each request allocates thousands of short-lived objects (parsed JSON); the default threshold
    runs a young-generation pass every 700 allocations. Objects alive at start-up are frozen so
    older-generation passes never rescan them. They are frozen without a collection first: one full pass
    over the imported modules cost 7-18 ms of start-up here and found ~180 unreachable objects (a few KB
    kept for good).
    """
    import gc

    gc.freeze()
    gc.set_threshold(50_000, 20, 50)


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on host:port, bound here so a busy port is explained before anything else starts."""
    from switch.errors import SwitchError

    try:
        family, _, _, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        raise SwitchError(
            f"cannot listen on {host}: {exc.strerror or exc}; check [server] host in config.toml"
        ) from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    # As uvicorn does: connections lingering in TIME_WAIT from a previous run do not make the port busy.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise SwitchError(_port_taken(host, port)) from None
        raise SwitchError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pick another with `switch serve --port N` "
            "or set [server] host and port in config.toml"
        ) from None
    return sock


def _port_taken(host: str, port: int) -> str:
    from switch import daemon

    health = daemon.healthy(port) if _is_loopback(host) else None
    if health is not None and daemon.is_ours(health):
        return (
            f"port {port} on {host} is already taken by this home's own switch proxy (pid "
            f"{health.get('pid', 'not reported')}): it is running; `switch status` shows it, `switch down` stops it"
        )
    stranger = "another program (it does not answer as a switch proxy)"
    holder = daemon.describe_other(health) if health is not None else stranger
    return (
        f"port {port} on {host} is already taken by {holder}; pick another with `switch serve --port N` "
        "or set [server] port in config.toml"
    )


def _refuse_a_second_proxy(configured: int, port: int) -> None:
    """Stop when this home's proxy already runs elsewhere: two would share one ledger and one spill file."""
    from switch import daemon
    from switch.errors import SwitchError

    running = daemon.status(configured)
    if running.get("running") and running.get("port") != port:
        raise SwitchError(
            f"this home's proxy already runs on 127.0.0.1:{running['port']} (pid {running.get('pid')}); use it, or "
            "stop it first with `switch down` (or Ctrl-C where `switch serve` runs): two proxies of one home "
            "would share its ledger"
        )


def server_for(app: Any, server_settings: Any, handle_signals: bool = True, lifespan_required: bool = True) -> Any:
    """A `serving.Serving` of `app` under `[server]`'s limits, as `switch serve` runs it (the tests too).

    `lifespan_required`: an app that raises before its start-up completes fails the start (the proxy's opens
    the ledger); the tests' fake upstreams, which take no lifespan, pass False.
    """
    from switch.proxy.connections import ConnectionLimits
    from switch.proxy.serving import Serving

    return Serving(
        app,
        ConnectionLimits(server_settings.header_timeout, server_settings.body_timeout, server_settings.max_connections),
        keep_alive=server_settings.idle_timeout,
        # Live streams get this long to finish on SIGTERM; then they are cancelled, and the relay ends each
        # with an in-band error and records it (see `Relay._watched`).
        grace=server_settings.shutdown_grace,
        # A Responses WebSocket message is a request body: the same cap, plus room for the envelope, so
        # the endpoint's own check (a close naming the limit) sees what is just over it.
        websocket_max_size=server_settings.max_body_bytes + WS_ENVELOPE_BYTES,
        handle_signals=handle_signals,
        lifespan_required=lifespan_required,
    )


def _stopped_line(recorder: Any) -> str:
    """What a stopped proxy says (Ctrl-C, SIGTERM): that it stopped, and where its calls went."""
    written = recorder.written
    waiting = f"; the rest wait in {recorder.spill} for the next start" if recorder.spill_pending() else ""
    return f"switch proxy stopped; {written} call{'s' if written != 1 else ''} written to the ledger{waiting}"


def startup_checks() -> tuple[Any, Any]:
    """What `switch serve` refuses to start without: a valid config, key file and active preset.

    Returns (the loaded config, active preset or None); raises SwitchError naming the file and the fix. `up` and `run`
    call it too, so their errors are the same one line rather than the tail of a failed proxy's log.
    """
    from switch import keys
    from switch.budgets.presets import check_budget_presets
    from switch.config import load_config
    from switch.routing.presets import load_active

    loaded = load_config()
    check_budget_presets(loaded.settings, loaded.path)
    settings = loaded.settings
    # A damaged key file is the user's to fix; refusing to start says so once, where every call would
    # otherwise fail on it.
    keys.read_file()
    # The running proxy keeps its last good preset when the file breaks; at start there is none to keep.
    return loaded, load_active(set(settings.providers), settings.defaults.model)


def degraded_start(problem: Any) -> tuple[Any, Any]:
    """(config, FailOpen) for a proxy that fails open on `problem` (a SwitchError from `startup_checks`).

    A config.toml that loads is used as it is (only the preset or the key file is broken); one that does
    not is replaced by the fail-open fallback settings, which the config watcher replaces once it loads.
    """
    from switch import locations
    from switch.budgets.presets import check_budget_presets
    from switch.config import LoadedConfig, file_signature, load_config
    from switch.config_schema import to_dict
    from switch.errors import SwitchError
    from switch.keys import KeysFileError
    from switch.proxy.fail_open import FailOpen, fallback_settings

    path = locations.config_file()
    config_broken = False
    try:
        loaded = load_config(path)
        check_budget_presets(loaded.settings, path)
    except SwitchError:
        settings = fallback_settings(path)
        # A digest no file has, so the first version of the file that loads is applied.
        loaded = LoadedConfig(settings, path, "fail-open", file_signature(path), to_dict(settings.server))
        config_broken = True
    state = FailOpen(
        problem.message,
        closed=not loaded.settings.server.fail_open,
        config_broken=config_broken,
        keys_broken=isinstance(problem, KeysFileError),
    )
    return loaded, state


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _routes_line(settings: Any, preset: Any) -> str:
    if preset is None:
        return (
            f"no preset: every call goes to {settings.defaults.model} ([defaults] model); "
            "choose one with `switch use NAME`"
        )
    return f"preset: {preset.name}" + (f" ({preset.description})" if preset.description else "")


def _say(line: str, err: bool = False) -> None:
    """One line on stdout (or stderr), flushed at once as typer.echo did: a supervisor reads it as it comes."""
    stream = sys.stderr if err else sys.stdout
    stream.write(line + "\n")
    stream.flush()


def _configure_logging(level: str) -> None:
    """switch's messages (and those of uvicorn's WebSocket protocol) on stderr from `level` up.

    Below warning, a handler prints each with its level and source; warnings and errors alone go out as
    Python's last-resort handler prints them, the bare message. Other libraries' loggers are left alone.
    """
    import logging

    from switch.child import PROXY_LOG_LEVELS

    number = PROXY_LOG_LEVELS[level]
    logging.addLevelName(PROXY_LOG_LEVELS["trace"], "TRACE")
    handler = None
    if number < logging.WARNING:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    for name in ("switch", "uvicorn"):
        logger = logging.getLogger(name)
        logger.setLevel(number)
        if handler is not None:
            logger.addHandler(handler)
            logger.propagate = False


def serve(host: str | None, port: int | None, log_level: str, fail_open: bool) -> int:
    """Run the proxy until it is stopped; the exit code (SwitchError and OSError propagate to `main`)."""
    _configure_logging(log_level)
    from switch import locations
    from switch.errors import SwitchError
    from switch.service.activation import inherited_socket

    # Taken first: its variables must not outlive this check, whatever happens next.
    inherited = inherited_socket()
    degraded = None
    # Config errors (SwitchError) end in `main` as one `switch: …` line, as commands._ReportingGroup ends them.
    try:
        loaded, preset = startup_checks()
    except SwitchError as exc:
        if not fail_open:
            raise
        loaded, degraded = degraded_start(exc)
        preset = None
    settings = loaded.settings
    if host is not None:
        settings.server.host = host
    if port is not None:
        settings.server.port = port
    if inherited is not None:
        settings.server.host, settings.server.port = inherited.getsockname()[:2]
    if not _is_loopback(settings.server.host) and not settings.server.access_token:
        _say(
            f"switch: refusing to listen on {settings.server.host}: anyone who can reach it could "
            "spend your API keys. Set [server] access_token in config.toml to allow it.",
            err=True,
        )
        return EXIT_USAGE
    from switch.home_lock import hold_home

    if inherited is None:
        # (With a socket handed over, the service manager holds the port: probing it would wait on ourselves.)
        # Probed first, so a proxy that answers is named with its port; the lock then catches the rest
        # (one still starting, or one on a port nobody asked about).
        _refuse_a_second_proxy(int(loaded.server["port"]), settings.server.port)
    listener = inherited if inherited is not None else _listen(settings.server.host, settings.server.port)
    # A service restart hands the socket to us while the last instance may still finish its streams.
    hold_home(wait=settings.server.shutdown_grace + 5.0 if inherited is not None else 0.0)
    # The proxy's own modules load once the socket listens: a client that connects meanwhile (a harness
    # started right after `switch up`) waits in the backlog for the first answer instead of being refused.
    from switch.config import litellm_names
    from switch.ledger.pricer import Pricer
    from switch.ledger.recorder import Recorder
    from switch.proxy.app import create_app

    pricer = Pricer(
        settings.prices,
        litellm_names=litellm_names(settings),
        baseline_anthropic=settings.pricing.baseline_anthropic,
        baseline_openai=settings.pricing.baseline_openai,
    )
    recorder = Recorder(pricer)
    # The app registers the budgets and metrics on the recorder's stream of committed rows before
    # its writer starts (and replays the spill file): they see every row stored from then on.
    app = create_app(settings, sink=recorder, config=loaded, fail_open=degraded)
    recorder.start()
    shipper = None
    if settings.team is not None:
        # Its own daemon thread, reading only the ledger: the request path never waits for it.
        from switch.team.shipper import start_shipper

        shipper = start_shipper(settings)
    _tune_gc()
    server = server_for(app, settings.server)
    # The socket already listens: connections from here on wait in its backlog until the server serves them.
    _say(f"switch proxy listening on {_url(listener)} (home {locations.home()}, pid {os.getpid()})")
    if degraded is not None:
        _say(f"{degraded.health()['notice']}: {degraded.reason}", err=True)
        _say(f"preset: {degraded.preset.name} (until the problem above is fixed)")
    else:
        _say(_routes_line(settings, preset))
    _say(f"ledger: {recorder.database}")
    if settings.team is not None:
        from switch.team.config import where

        _say(f"team ledger: shipping to {where(settings.team)} as {settings.team.member}")
    try:
        caught = server.run([listener])
    finally:
        listener.close()
        recorder.close()
        if shipper is not None:
            shipper.stop()
        if server.started:
            _say(_stopped_line(recorder))
    if caught:
        # Ended as the last signal would have ended it (Ctrl-C: `main` exits 130; SIGTERM: by the signal, which
        # is what a service manager expects of a clean stop), now that the calls and the ledger are closed.
        signal.raise_signal(caught[-1])
    return EXIT_OK if server.started else EXIT_FAILED


def _options(argv: list[str]) -> tuple[str | None, int | None, str, bool]:
    """(host, port, log level, fail open) from the argv `switch serve` passes."""
    from switch.child import serve_options

    options = serve_options(argv)
    if options is None:
        raise SystemExit(f"switch: {' '.join(argv)}: not the proxy process's options; run it as `switch serve`")
    return options


def _report(exc: BaseException) -> int | None:
    """The exit code for `exc` after its one `switch: …` line, as commands._ReportingGroup gives it; None: not ours."""
    import sqlite3

    from switch.errors import SwitchError

    if isinstance(exc, SwitchError):
        _say(f"switch: {exc.message}", err=True)
        return EXIT_USAGE
    if isinstance(exc, sqlite3.DatabaseError):
        from switch import locations
        from switch.ledger.db import unreadable_message

        _say(f"switch: {unreadable_message(locations.ledger_file(), exc)}", err=True)
        return EXIT_USAGE
    if isinstance(exc, OSError):
        if exc.errno == errno.EPIPE:
            return EXIT_FAILED  # a closed pipe, quiet as typer leaves it
        where = f": {exc.filename}" if exc.filename else ""
        _say(f"switch: {exc.strerror or exc}{where}", err=True)
        return EXIT_FAILED
    return None


def main(argv: list[str] | None = None) -> int:
    """Serve with the options in `argv` (sys.argv's by default); the process's exit code."""
    options = _options(sys.argv[1:] if argv is None else argv)
    try:
        return serve(*options)
    except KeyboardInterrupt:
        return INTERRUPTED
    except Exception as exc:
        code = _report(exc)
        if code is None:
            raise
        return code


if __name__ == "__main__":
    sys.exit(main())
