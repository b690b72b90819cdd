"""Targets served through LiteLLM's async SDK: any provider LiteLLM reaches, as `api = "litellm"` providers.

The request is built as an OpenAI chat body by the chat writer (LiteLLM takes that shape), its fields are
handed to `litellm.acompletion` with the provider's key passed per call, and LiteLLM's answer, which has
the chat shape again, goes through the same translator as an HTTP upstream's (`TranslatedPath.answer`).

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

from switch.config import Settings
from switch.errors import UpstreamError
from switch.protocols.ir import Request
from switch.protocols.openai_chat import outbound as chat_outbound
from switch.proxy.adapters import CHAT_UPSTREAM, UpstreamApi
from switch.proxy.failures import Attempt, Failure, answered_failure, fail, scrub
from switch.proxy.state import KeyCache, ReasoningCache
from switch.proxy.translated import TranslatedPath
from switch.proxy.upstream_body import upstream_body
from switch.routing.resolve import Target

log = logging.getLogger("switch.relay")

# The decoder and reader are the chat API's: LiteLLM answers in its shape. Only the name differs, in messages.
LITELLM_UPSTREAM = UpstreamApi(
    "litellm",
    "",
    CHAT_UPSTREAM.request_body,
    CHAT_UPSTREAM.auth_headers,
    CHAT_UPSTREAM.response_to_ir,
    CHAT_UPSTREAM.new_decoder,
    CHAT_UPSTREAM.error_message,
    CHAT_UPSTREAM.function_only,
)

KEYLESS_PROVIDERS = frozenset({"ollama", "ollama_chat", "hosted_vllm", "vllm", "lm_studio", "llamafile"})
"""LiteLLM providers that are usually a server on the user's machine: called without a key when none is set."""

# Chat body fields LiteLLM takes as its own parameters; anything else the chat writer adds is for a
# specific chat server (a cache-key field, vLLM's template arguments) and would leak into the provider's body.
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


class _Answer:
    """LiteLLM's output read like an HTTP answer: a stream as SSE chat chunks, a whole response as JSON."""

    def __init__(self, result: Any, first: Any, classify: Any) -> None:
        self.result = result
        self.first = first
        self.classify = classify
        self.headers = {"content-type": "text/event-stream" if first is not None else "application/json"}

    async def chunks(self) -> AsyncIterator[bytes]:
        """Each chunk of a streamed answer as one SSE event."""
        dumps = orjson.dumps
        yield b"data: " + dumps(_dump(self.first)) + b"\n\n"
        try:
            async for chunk in self.result:
                yield b"data: " + dumps(_dump(chunk)) + b"\n\n"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = self.classify(exc)
            raise UpstreamError(failure.message, kind=_KINDS.get(failure.trigger, "in_band")) from None

    async def read(self, limit: int = 0) -> bytes:
        """A whole answer as one JSON body."""
        return orjson.dumps(_dump(self.result))


_KINDS = {"connect": "connect", "timeout": "timeout"}


class LiteLLMPath:
    """Serves a call on a LiteLLM target, answering through the translated path's encoders."""

    def __init__(self, translated: TranslatedPath, keys: KeyCache, reasoning: ReasoningCache) -> None:
        self.translated = translated
        self.keys = keys
        self.reasoning = reasoning

    async def serve(self, attempt: Attempt, request: Request, target: Target) -> Failure | None:
        """Serve one attempt through LiteLLM; a `Failure` when the next target should serve instead."""
        provider = target.litellm_provider or target.provider
        key = self.keys.get(target.provider)
        if not key and provider not in KEYLESS_PROVIDERS and not target.keyless:
            status, message = self.keys.unavailable(target.provider, target.api_key_env)
            return await fail(attempt, Failure(status, message, "rejected", "no_key"))
        assert target.chat is not None
        chat = target.chat
        body = await upstream_body(
            attempt,
            request,
            CHAT_UPSTREAM.name,
            lambda sent: chat_outbound.request_from_ir(sent, chat, self.reasoning.get),
        )
        if body is None:
            return None
        arguments = {name: body[name] for name in _PASSED if name in body}
        wanted = body.get("max_completion_tokens")
        if wanted is not None:
            arguments["max_tokens"] = wanted  # the spelling every LiteLLM provider maps
        arguments.update(
            model=f"{provider}/{target.model}",
            api_key=key or None,
            timeout=self.translated.settings.server.read_timeout,
            num_retries=0,
            max_retries=0,
            drop_params=True,
        )
        if target.base_url:
            arguments["api_base"] = target.base_url
        ttft_timeout = self.translated.settings.routing.ttft_timeout if attempt.can_fall_back else None

        def classify(exc: BaseException) -> Failure:
            return _failure(LOADER.module, exc, target.provider, key)

        try:
            litellm = await LOADER.get()
        except Exception as exc:
            log.exception("could not import LiteLLM")
            message = f"switch could not load LiteLLM for {target.provider} ({type(exc).__name__}); see the log"
            return await fail(attempt, Failure(502, message, "proxy_error", "connect"))
        try:
            result, first = await asyncio.wait_for(self._start(litellm, arguments), ttft_timeout)
        except TimeoutError:
            message = f"upstream {target.provider} sent nothing within the time-to-first-token limit"
            return await fail(attempt, Failure(504, message, "transport_error", "timeout"))
        except StopAsyncIteration:
            message = f"upstream {target.provider} ended its stream before sending anything"
            return await fail(attempt, Failure(502, message, "incomplete_stream", "5xx"))
        except Exception as exc:
            return await fail(attempt, classify(exc))
        answer = _Answer(result, first, classify)
        try:
            return await self.translated.answer(attempt, LITELLM_UPSTREAM, request, answer, key or "")
        finally:
            if first is not None:
                # A stream left early (client gone, broken chunk) must hang up on the provider too.
                await _close(result)

    @staticmethod
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


def _failure(litellm: Any, exc: BaseException, provider: str, key: str | None) -> Failure:
    """A LiteLLM exception as switch's outcome, status and fallback trigger, its message without the key."""
    original = getattr(exc, "original_exception", None)
    if isinstance(original, Exception) and original is not exc:
        # A stream's failure before its first chunk comes wrapped (MidStreamFallbackError, always 503): the
        # cause says whether it was a refused connection, a timeout or the provider's status.
        return _failure(litellm, original, provider, key)
    # LiteLLM appends the traceback to some messages: the caller gets the message, the log the traceback.
    message = scrub(str(exc).partition("\nTraceback")[0].strip(), key)[:_MAX_MESSAGE]
    if litellm is not None and isinstance(exc, litellm.Timeout):
        return Failure(504, f"upstream {provider} timed out: {message}", "transport_error", "timeout")
    if litellm is not None and isinstance(exc, litellm.APIConnectionError):
        return Failure(502, f"upstream {provider} could not be reached: {message}", "transport_error", "connect")
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or not 400 <= status <= 599:
        # Not a provider's answer: a LiteLLM failure before or after the call, named for the log.
        # The traceback is logged as text, scrubbed: the exception's own message may quote the key.
        trace = scrub("".join(traceback.format_exception(exc)), key)
        log.warning("LiteLLM call to %s failed\n%s", provider, trace)
        return Failure(502, f"upstream {provider} via LiteLLM failed: {message}", "upstream_error", "5xx")
    headers = getattr(getattr(exc, "response", None), "headers", None)
    retry_after = headers.get("retry-after") if headers is not None else None
    return answered_failure(status, message, provider, retry_after)
