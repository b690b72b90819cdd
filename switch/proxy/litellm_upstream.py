"""Targets served through LiteLLM's async SDK: any provider LiteLLM reaches, as `api = "litellm"` providers.

LiteLLM is the second `transport.Transport`: the translated path writes an OpenAI chat body for it (the
shape LiteLLM takes), this transport hands its fields to `litellm.acompletion` with the provider's key
passed per call, and LiteLLM's answer, chat-shaped again, comes back as status, headers and SSE chunks
that the translated path decodes as it would an HTTP upstream's. A provider's error status is an answer
with that status; anything else is an `UpstreamError` whose kind `failures` maps, as for HTTP.

LiteLLM is imported the first time such a target is used, in a worker thread (the import takes seconds),
or ahead of time in a background thread when the config names such a provider; the native and HTTP paths
never import it. Its remote cost-map fetch is turned off before the import and its own retries are off,
so nothing leaves for anywhere but the configured provider and fallback stays switch's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import traceback
import warnings
from collections.abc import AsyncIterator
from typing import Any

import orjson

from switch.config import Server, Settings
from switch.errors import UpstreamError, UpstreamTimeout
from switch.proxy.failures import scrub
from switch.proxy.transport import UpstreamAnswer, UpstreamRequest, WholeAnswer
from switch.proxy.upstream_apis import ChatUpstream, UpstreamApi
from switch.routing.resolve import Target

log = logging.getLogger("switch.relay")

KEYLESS_PROVIDERS = frozenset({"ollama", "ollama_chat", "hosted_vllm", "vllm", "lm_studio", "llamafile"})
"""LiteLLM providers that are usually a server on the user's machine: called without a key when none is set."""

# Chat body fields LiteLLM takes as its own parameters; anything else the chat writer adds is for a
# specific chat server (a cache-key field, vLLM's template arguments) and would leak into the provider's body.


class LiteLLMUpstream(ChatUpstream):
    """LiteLLM as an upstream: the chat API's body, decoder and reader, under its own name in messages."""

    name = "litellm"
    path = ""

    def needs_key(self, target: Target) -> bool:
        """Whether `target` needs a key: not for a provider that is usually a local server, or a keyless one."""
        provider = target.litellm_provider or target.provider
        return provider not in KEYLESS_PROVIDERS and not target.keyless


LITELLM_UPSTREAM: UpstreamApi = LiteLLMUpstream()

_PASSED = (
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "stop",
    "response_format",
    "user",
    "stream",
    "stream_options",
    "reasoning_effort",
    "thinking",
)
_MAX_MESSAGE = 600


class _Loader:
    """Imports LiteLLM once, off the event loop, with its network-reaching defaults turned off."""

    def __init__(self) -> None:
        self.module: Any = None
        self._lock = threading.Lock()
        self._warming: threading.Thread | None = None

    def load(self) -> Any:
        """The litellm module (blocking: call it from a worker thread)."""
        with self._lock:
            if self.module is None:
                # Read before the import: without it LiteLLM fetches its cost map from the internet.
                os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
                import litellm

                # Pydantic notices about LiteLLM's own types, once per process on stderr: nothing a user can act on.
                warnings.filterwarnings(
                    "ignore", message=r"Items? .* (is|are) using the `ReadOnly` qualifier", category=UserWarning
                )

                litellm.suppress_debug_info = True  # else every error prints a help banner on stdout
                litellm.turn_off_message_logging = True
                litellm.disable_streaming_logging = True
                for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
                    logging.getLogger(name).setLevel(logging.ERROR)
                self.module = litellm
        return self.module

    def warm(self) -> None:
        """Start importing LiteLLM in a background thread, so the first call does not wait for it."""
        with self._lock:
            if self.module is not None or self._warming is not None:
                return
            self._warming = threading.Thread(target=self._warm, name="switch-litellm-import", daemon=True)
        self._warming.start()

    def _warm(self) -> None:
        try:
            self.load()
        except Exception:
            # The first call imports it again and reports the failure to its caller.
            log.warning("could not import LiteLLM ahead of time", exc_info=True)

    async def get(self) -> Any:
        """The litellm module, imported in a worker thread the first time."""
        module = self.module
        if module is None:
            module = await asyncio.to_thread(self.load)
        return module


LOADER = _Loader()


async def close_clients() -> None:
    """Close the connections LiteLLM opened on this event loop (the proxy is stopping); nothing if never loaded."""
    litellm = LOADER.module
    if litellm is None:
        return
    loop = asyncio.get_running_loop()
    cache = getattr(getattr(litellm, "in_memory_llm_clients_cache", None), "cache_dict", {})
    handlers = [*cache.values(), getattr(litellm, "base_llm_aiohttp_handler", None)]
    for handler in handlers:
        # LiteLLM's HTTP clients sit on aiohttp sessions it makes per event loop, kept after the loop
        # ends: close this loop's, leave any other loop's (another proxy in the same process) alone.
        client = getattr(handler, "client", None)
        for session in (getattr(getattr(client, "_transport", None), "client", None), client):
            if getattr(session, "_loop", None) is loop and getattr(session, "closed", True) is False:
                try:
                    await session.close()  # type: ignore[union-attr]
                except Exception:
                    log.debug("closing a LiteLLM session failed", exc_info=True)


def uses_litellm(settings: Settings) -> bool:
    """Whether any provider of `settings` is served through LiteLLM."""
    return any(provider.api == "litellm" for provider in settings.providers.values())


def _dump(item: Any) -> dict[str, Any]:
    """A LiteLLM response or chunk as the chat wire shape (LiteLLM fills cache reads and writes in it)."""
    body: dict[str, Any] = item.model_dump(exclude_none=True)
    return body


class _Streamed:
    """A LiteLLM stream as a transport answer: its chunks as SSE chat chunks, the first already in."""

    status_code = 200

    def __init__(self, result: Any, first: Any, key: str) -> None:
        self.result = result
        self.first = first
        self.key = key
        self.headers = {"content-type": "text/event-stream"}
        self.ended = False

    async def wait_body(self, timeout: float) -> bool:
        """The first chunk is here already."""
        return True

    def decode_content(self, enabled: bool) -> None:
        """Nothing to decode."""

    async def chunks(self) -> AsyncIterator[bytes]:
        """Each chunk of the stream as one SSE event."""
        dumps = orjson.dumps
        yield b"data: " + dumps(_dump(self.first)) + b"\n\n"
        try:
            async for chunk in self.result:
                yield b"data: " + dumps(_dump(chunk)) + b"\n\n"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _transport_error(exc, self.key, mid_stream=True) from None
        self.ended = True

    async def read(self, limit: int = 0) -> bytes:
        """The whole stream's events."""
        return b"".join([chunk async for chunk in self.chunks()])

    def close(self) -> None:
        """Hang up on the provider if the stream was left early (client gone, broken chunk)."""
        if not self.ended:
            self.ended = True
            closing = asyncio.ensure_future(_close(self.result))
            _CLOSING.add(closing)
            closing.add_done_callback(_CLOSING.discard)


_CLOSING: set[asyncio.Future[None]] = set()
"""Streams being closed after their answer was given up: held so the task is not collected half-way."""


class LiteLLMTransport:
    """Calls LiteLLM's `acompletion` with a chat body: the second `Transport`, next to the HTTP pool."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def send(self, request: UpstreamRequest) -> UpstreamAnswer:
        """Hand the chat body to LiteLLM; its answer once the first chunk (or the whole response) is in."""
        target, key = request.target, request.key
        provider = target.litellm_provider or target.provider
        body = orjson.loads(request.body)
        arguments = {name: body[name] for name in _PASSED if name in body}
        wanted = body.get("max_completion_tokens")
        if wanted is not None:
            arguments["max_tokens"] = wanted  # the spelling every LiteLLM provider maps
        arguments.update(
            model=f"{provider}/{target.model}",
            api_key=key or None,
            timeout=self.server.read_timeout,
            num_retries=0,
            max_retries=0,
            drop_params=True,
        )
        if target.base_url:
            arguments["api_base"] = target.base_url
        try:
            litellm = await LOADER.get()
        except Exception as exc:
            log.exception("could not import LiteLLM")
            raise UpstreamError(
                f"switch could not load LiteLLM ({type(exc).__name__}); see the log", kind="local"
            ) from None
        try:
            result, first = await asyncio.wait_for(_start(litellm, arguments), request.header_timeout)
        except TimeoutError:
            raise UpstreamTimeout("sent nothing within the time-to-first-token limit") from None
        except StopAsyncIteration:
            raise UpstreamError("ended its stream before sending anything", kind="empty") from None
        except Exception as exc:
            status = _status_of(exc)
            if status is None:
                raise _transport_error(exc, key, mid_stream=False) from None
            # The provider answered with an error status: an answer like an HTTP upstream's, for `failures`.
            error = {"error": {"message": _message(exc, key)}}
            headers = {"content-type": "application/json"}
            retry_after = _retry_after(exc)
            if retry_after is not None:
                headers["retry-after"] = retry_after
            return WholeAnswer(status, orjson.dumps(error), headers)
        if first is None:
            return WholeAnswer(200, orjson.dumps(_dump(result)))
        return _Streamed(result, first, key)

    async def aclose(self) -> None:
        """Close the connections LiteLLM opened on this event loop."""
        await close_clients()


async def _start(litellm: Any, arguments: dict[str, Any]) -> tuple[Any, Any]:
    """Call LiteLLM; for a stream, wait for its first chunk too, so a failure before it can fall back."""
    result = await litellm.acompletion(**arguments)
    if not arguments.get("stream"):
        return result, None
    first = await anext(result)
    return result, first


async def _close(stream: Any) -> None:
    close = getattr(stream, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:
        log.debug("closing a LiteLLM stream failed", exc_info=True)


def _cause(exc: BaseException) -> BaseException:
    """The exception that says what happened: a stream's failure before its first chunk comes wrapped
    (MidStreamFallbackError, always 503), its cause says whether it was a refused connection, a timeout
    or the provider's status."""
    original = getattr(exc, "original_exception", None)
    while isinstance(original, Exception) and original is not exc:
        exc = original
        original = getattr(exc, "original_exception", None)
    return exc


def _status_of(exc: BaseException) -> int | None:
    """The provider's HTTP status behind a LiteLLM exception, if it answered with one."""
    cause = _cause(exc)
    litellm = LOADER.module
    if litellm is not None and isinstance(cause, (litellm.Timeout, litellm.APIConnectionError)):
        return None
    status = getattr(cause, "status_code", None)
    return status if isinstance(status, int) and 400 <= status <= 599 else None


def _retry_after(exc: BaseException) -> str | None:
    headers = getattr(getattr(_cause(exc), "response", None), "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    return value if isinstance(value, str) else None


def _message(exc: BaseException, key: str) -> str:
    """A LiteLLM exception's message without the key, or the traceback it appends to some."""
    return scrub(str(_cause(exc)).partition("\nTraceback")[0].strip(), key)[:_MAX_MESSAGE]


def _transport_error(exc: BaseException, key: str, *, mid_stream: bool) -> UpstreamError:
    """A LiteLLM failure without a provider status, in the transport's terms (`failures` maps them on)."""
    cause = _cause(exc)
    litellm = LOADER.module
    message = _message(exc, key)
    if litellm is not None and isinstance(cause, litellm.Timeout):
        return UpstreamTimeout(f"timed out: {message}")
    if litellm is not None and isinstance(cause, litellm.APIConnectionError):
        return UpstreamError(f"could not be reached: {message}", kind="connect")
    if mid_stream:
        return UpstreamError(message, kind="in_band")
    # Not a provider's answer: a LiteLLM failure before or after the call, named for the log.
    # The traceback is logged as text, scrubbed: the exception's own message may quote the key.
    trace = scrub("".join(traceback.format_exception(cause)), key)
    log.warning("LiteLLM call failed\n%s", trace)
    return UpstreamError(f"LiteLLM failed: {message}", kind="failed")
