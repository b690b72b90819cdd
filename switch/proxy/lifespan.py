"""What runs beside the calls while the proxy serves: start-up, the file watcher, the cycle collector, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from switch.proxy.config_follower import ConfigFollower
from switch.proxy.endpoints import Routes
from switch.proxy.fail_open import FailOpen
from switch.proxy.relay import Relay
from switch.routing.presets import PresetManager

log = logging.getLogger("switch.app")

GC_INTERVAL_S = 60.0
LAST_CALLS_S = 3.0  # at shutdown, how long cancelled calls may take to end their streams and record
KEY_START_WAIT_S = 15.0
WATCH_INTERVAL_S = 0.5


async def watch_files(
    follower: ConfigFollower | None, presets: PresetManager, fail_open: FailOpen | None, relay: Relay
) -> None:
    """Apply config.toml and preset edits as they land, and leave fail-open once they load again."""
    # A stat of a handful of small files every half second: `switch use` and config.toml edits
    # take effect within a second, and requests never wait for it.
    while True:
        await asyncio.sleep(WATCH_INTERVAL_S)
        if follower is not None:
            try:
                follower.poll()
            except OSError as exc:
                log.warning("could not read config.toml: %s", exc)
            except Exception:  # the watcher must keep running: the next edit may be fine
                log.exception("could not apply config.toml")
        try:
            presets.refresh()
        except OSError as exc:
            log.warning("could not read presets: %s", exc)
        if fail_open is not None and fail_open.active:
            config_ok = follower is None or follower.rejected is None
            if fail_open.settle(config_ok, presets):
                relay.refusal = None


async def collect_cycles() -> None:
    """A timed pass of the cycle collector over the young generations."""
    # `switch serve` raises the collector's thresholds so requests do not pay for young-generation
    # passes; requests free almost everything by refcount, so the count that triggers a pass can
    # take hours to reach. Our code leaves no cycles behind, but libraries can (uvicorn's protocol
    # and its parser, for one, per closed client connection): a timed pass over the young
    # generations bounds them. Long-lived tables move to the old generation on the first pass.
    while True:
        await asyncio.sleep(GC_INTERVAL_S)
        began = time.perf_counter()
        found = gc.collect(1)
        log.debug("collected %d objects in %.1f ms", found, (time.perf_counter() - began) * 1000)


def lifespan(
    relay: Relay,
    sink: Any,
    fail_open: FailOpen | None,
    tasks: list[Callable[[], Any]],
    calls: Routes,
) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """The app's lifespan: keys read and `tasks` started before serving; at the end, the last `calls`
    awaited, then upstreams and the ledger closed."""

    @contextlib.asynccontextmanager
    async def run(_app: Any) -> AsyncIterator[None]:
        # Keys are read before the first call is accepted, on the key thread, never on this loop.
        relay.keys.start()
        if not await asyncio.to_thread(relay.keys.wait_loaded, KEY_START_WAIT_S):
            log.warning("still reading provider keys after %.0f s; serving meanwhile", KEY_START_WAIT_S)
        running = [asyncio.create_task(task()) for task in tasks]
        try:
            yield
        finally:
            for task in running:
                task.cancel()
            # The server starts this once the grace period is over and it has cancelled the calls still
            # running; they are ending their streams and recording themselves: wait for that.
            deadline = time.monotonic() + LAST_CALLS_S
            while calls.busy and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            relay.keys.stop()
            if fail_open is not None:
                fail_open.clear_marker()
            await relay.http.aclose()
            await relay.litellm.aclose()
            # Write out queued records here, inside the server's shutdown, wherever the app is served:
            # uvicorn (the tests' other servers) re-raises a caught SIGTERM inside `run()`, which ends the
            # process on the spot.
            close_sink = getattr(sink, "close", None)
            if close_sink is not None:
                await asyncio.to_thread(close_sink)

    return run
