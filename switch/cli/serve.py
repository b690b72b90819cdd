"""`switch serve`: run the proxy in the foreground."""

from __future__ import annotations

import ipaddress
import sys

import typer


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
    older-generation passes never rescan them.
    """
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 50)


def register(app: typer.Typer) -> None:
    """Add the command to `app`."""

    @app.command()
    def serve(
        host: str = typer.Option(None, help="Address to bind (default 127.0.0.1)."),
        port: int = typer.Option(None, help="Port to listen on (default 8742; 0 picks a free one)."),
        log_level: str = typer.Option("warning", help="uvicorn log level."),
    ) -> None:
        """Run the proxy in the foreground."""
        import uvicorn

        from switch import keys
        from switch.config import load_config
        from switch.errors import ConfigError
        from switch.proxy.app import create_app

        try:
            loaded = load_config()
            settings = loaded.settings
            # A damaged key file is the user's to fix; refusing to start says so once, where every
            # call would otherwise fail on it.
            keys.read_file()
        except (ConfigError, keys.KeysFileError) as exc:
            typer.echo(f"switch: {exc}", err=True)
            raise typer.Exit(2) from exc
        if host is not None:
            settings.server.host = host
        if port is not None:
            settings.server.port = port
        if not _is_loopback(settings.server.host) and not settings.server.access_token:
            typer.echo(
                f"switch: refusing to listen on {settings.server.host}: anyone who can reach it could "
                "spend your API keys. Set [server] access_token in config.toml to allow it.",
                err=True,
            )
            raise typer.Exit(2)
        from switch.ledger.pricer import Pricer
        from switch.ledger.recorder import Recorder

        pricer = Pricer(
            settings.prices,
            baseline_anthropic=settings.pricing.baseline_anthropic,
            baseline_openai=settings.pricing.baseline_openai,
        )
        recorder = Recorder(pricer)
        recorder.start()
        app = create_app(settings, sink=recorder, config=loaded)
        _tune_gc()
        config = uvicorn.Config(
            app,
            host=settings.server.host,
            port=settings.server.port,
            log_level=log_level,
            access_log=False,
            lifespan="on",
            timeout_keep_alive=75,
            # Live streams get this long to finish on SIGTERM; then uvicorn cancels them, and the
            # relay ends each with an in-band error and records it (see `Relay._watched`).
            timeout_graceful_shutdown=settings.server.shutdown_grace,
            proxy_headers=False,
            server_header=False,
        )
        server = uvicorn.Server(config)
        try:
            server.run()
        except OSError as exc:
            recorder.close()
            typer.echo(
                f"switch: cannot listen on {settings.server.host}:{settings.server.port}: {exc.strerror}",
                err=True,
            )
            raise typer.Exit(1) from exc
        recorder.close()
        if not server.started:
            sys.exit(1)
