"""Real client requests mutated by type (see tests/mutations.py), through the real proxy app to each of
the three upstream APIs: switch never answers 5xx itself, every error parses in the caller's API
format, and every call leaves exactly one ledger row with the right outcome and what could be
learned about it (harness, session, requested model).

The bulk drives the ASGI app in-process, on one event loop with a real fake upstream served by
uvicorn on loopback (thousands of calls in seconds); one smoke test sends cases over real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from hypothesis import given

from switch.config import load_settings
from switch.ledger.record import CallRecord
from switch.proxy.app import create_app
from tests.conftest import MULTI_CONFIG, UPSTREAM_MODELS, ListSink, Proxy, write_config
from tests.fake_upstream import FakeUpstream
from tests.faults.test_upstream_faults import assert_error_shape, assert_stream_well_formed
from tests.mutations import FUZZ, INBOUND_APIS, PATHS, SEEDS, Case, Mutation, mutate, mutated_requests

UPSTREAM_APIS = tuple(UPSTREAM_MODELS)
KEY_ENV = ("FAKE_CHAT_KEY", "FAKE_ANTHROPIC_KEY", "FAKE_RESPONSES_KEY")
RESPONSE_OBJECTS = {"anthropic": ("type", "message"), "openai-chat": ("object", "chat.completion")}
RESPONSE_OBJECTS["openai-responses"] = ("object", "response")
HARNESS_OF_SEED = {"claude_code_": "claude-code", "codex_": "codex"}

Answer = tuple[int, dict[str, str], bytes]


class _LoopServer(uvicorn.Server):
    """uvicorn on the test's own event loop, leaving the process's signal handlers alone."""

    def capture_signals(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


class _Lifespan:
    """Runs an ASGI app's lifespan (its startup and shutdown hooks) as a server would."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        self.task = asyncio.create_task(self.app(scope, self.inbox.get, self.outbox.put))
        await self.inbox.put({"type": "lifespan.startup"})
        assert (await self.outbox.get())["type"] == "lifespan.startup.complete"

    async def stop(self) -> None:
        await self.inbox.put({"type": "lifespan.shutdown"})
        assert (await self.outbox.get())["type"] == "lifespan.shutdown.complete"
        assert self.task is not None
        await self.task


async def _asgi_post(app: Any, path: str, headers: tuple[tuple[bytes, bytes], ...], body: bytes) -> Answer:
    """One POST through `app`, as a server would hand it over; the client stays until the answer ends."""
    answered = asyncio.Event()
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    status = 0
    response_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            response_headers.update((k.decode("latin-1"), v.decode("latin-1")) for k, v in message["headers"])
        else:
            chunks.append(message.get("body", b""))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": list(headers),
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8742),
    }
    try:
        await app(scope, receive, send)
    finally:
        answered.set()
    return status, response_headers, b"".join(chunks)


class ProxyRig:
    """One proxy app per upstream API, all routed to one fake upstream, on one event loop."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.loop = asyncio.new_event_loop()
        self.fake = FakeUpstream()
        self.server = _LoopServer(
            uvicorn.Config(self.fake, host="127.0.0.1", port=0, log_level="critical", access_log=False, lifespan="off")
        )
        self.apps: dict[str, tuple[Any, ListSink, _Lifespan]] = {}

    def __enter__(self) -> ProxyRig:
        server_task = self.loop.create_task(self.server.serve())
        try:
            self.loop.run_until_complete(self._started(server_task))
            port = self.server.servers[0].sockets[0].getsockname()[1]
            for upstream in UPSTREAM_APIS:
                write_config(
                    self.home, MULTI_CONFIG.format(model=UPSTREAM_MODELS[upstream], url=f"http://127.0.0.1:{port}")
                )
                sink = ListSink()
                app = create_app(load_settings(), sink=sink)
                lifespan = _Lifespan(app)
                self.apps[upstream] = (app, sink, lifespan)
                self.loop.run_until_complete(lifespan.start())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.server_task = server_task
        return self

    async def _started(self, server_task: asyncio.Task[None]) -> None:
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert not server_task.done() and time.monotonic() < deadline, "the fake upstream did not start"
            await asyncio.sleep(0.001)

    def __exit__(self, *_exc: object) -> None:
        try:
            for _app, _sink, lifespan in self.apps.values():
                if lifespan.task is not None:
                    self.loop.run_until_complete(lifespan.stop())
            self.server.should_exit = True
            pending = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
            self.loop.run_until_complete(asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 10))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()

    def post(self, upstream: str, path: str, case: Case, body: bytes) -> tuple[Answer, list[CallRecord]]:
        """Send `body` to the app routing to `upstream`; the answer and the ledger rows it left."""
        app, sink, _ = self.apps[upstream]
        answer = self.loop.run_until_complete(_asgi_post(app, path, case.headers, body))
        records = list(sink.records)
        sink.records.clear()
        self.fake.received.clear()  # thousands of bodies would otherwise pile up in memory
        return answer, records


def _expected_model(body: bytes) -> str:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    model = document.get("model") if isinstance(document, dict) else None
    return model if isinstance(model, str) else ""


def check_answer(api: str, case: Case, body: bytes, answer: Answer, records: list[CallRecord]) -> None:
    """The checks every mutated call must pass, whatever the upstream."""
    status, headers, payload = answer
    assert len(records) == 1, f"{len(records)} ledger rows for one call"
    record = records[0]
    assert status < 500, f"switch answered {status}: {record.error}"
    assert record.http_status == status and record.inbound_api == api
    if record.outcome == "rejected":
        assert status in (400, 413), status
        assert_error_shape(api, orjson.loads(payload))
        assert headers.get("x-should-retry") == "false", "SDKs must not retry a malformed request"
        if api == "anthropic":
            assert orjson.loads(payload)["error"]["type"] in ("invalid_request_error", "request_too_large")
    elif record.outcome == "completed":
        assert status == 200
        if headers.get("content-type", "").startswith("text/event-stream"):
            assert_stream_well_formed(api, payload.decode(), True)
        else:
            field, kind = RESPONSE_OBJECTS[api]
            assert orjson.loads(payload)[field] == kind
    else:
        # The fake upstream itself refuses some odd but well-formed requests; its 4xx is relayed.
        assert record.outcome == "upstream_error" and 400 <= status < 500, (record.outcome, record.error)
        assert_error_shape(api, orjson.loads(payload))
    assert record.requested_model == _expected_model(body)
    if not case.headers_mutated:
        harness = next((h for prefix, h in HARNESS_OF_SEED.items() if case.seed.startswith(prefix)), None)
        if harness is not None:
            assert record.harness == harness
        session = dict(case.headers).get(b"x-claude-code-session-id")
        if session is not None:
            assert record.session_id == session.decode()


@pytest.fixture
def fake_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_ENV:
        monkeypatch.setenv(name, "sk-fake-" + name.lower())


@pytest.fixture
def rig(isolated_home: Path, fake_keys: None) -> Iterator[ProxyRig]:
    with ProxyRig(isolated_home) as started:
        yield started


@pytest.mark.parametrize("api", INBOUND_APIS)
def test_mutated_requests_get_an_answer_in_format_and_one_ledger_row(rig: ProxyRig, api: str) -> None:
    calls: Counter[str] = Counter()

    @FUZZ
    @given(case=mutated_requests(api))
    def check(case: Case) -> None:
        body = case.body()
        for upstream in UPSTREAM_APIS:
            answer, records = rig.post(upstream, PATHS[api], case, body)
            check_answer(api, case, body, answer, records)
            calls[upstream] += 1

    check()
    assert min(calls[upstream] for upstream in UPSTREAM_APIS) >= FUZZ.max_examples


def _fixed_cases(api: str, count: int) -> list[Case]:
    """Deterministic mutated cases (no hypothesis), for the socket-level smoke test."""
    seeds = SEEDS[api]
    cases = []
    for number in range(count):
        mutation = Mutation.decode(number * 7919)
        cases.append(mutate(seeds[number % len(seeds)], [mutation], []))
    return cases


@pytest.mark.parametrize("api", INBOUND_APIS)
def test_mutated_requests_over_real_sockets(multi_proxy: Callable[[str], Proxy], api: str) -> None:
    proxy = multi_proxy("openai-chat")
    with httpx.Client(base_url=proxy.url, timeout=20) as client:
        for case in _fixed_cases(api, 40):
            body = case.body()
            headers = [(k, v) for k, v in case.headers if k != b"host"]
            response = client.post(PATHS[api], content=body, headers=headers)
            records = proxy.sink.wait(1)
            answer = (response.status_code, dict(response.headers), response.content)
            check_answer(api, case, body, answer, list(records))
            proxy.sink.records.clear()
