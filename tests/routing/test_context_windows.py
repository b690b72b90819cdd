"""Context windows through the real proxy: overflow answers in the caller's shape, output limits, and
long-context routing (a `long_context` target, and along the fallback list) without calling a target
that must refuse the prompt."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest

from switch.routing.presets import set_active
from tests.conftest import FAKE_BASETEN_KEY, FAKE_CLIENT_KEY, Proxy
from tests.fake_upstream import FakeChatUpstream, Reply, Turn
from tests.servers import serve

# A prompt of about 170k tokens by switch's estimate (3.6 characters a token): more than GLM-4.5's
# 128k window in LiteLLM's table (`zai/glm-4.5`), less than Kimi K3's 1M.
LONG_TEXT = "word " * 124_000


def error_reply(status: int, message: str) -> Reply:
    return Reply(
        status, [orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})], "application/json"
    )


@pytest.fixture
def fakes() -> Iterator[tuple[FakeChatUpstream, str, FakeChatUpstream, str]]:
    small, large = FakeChatUpstream(), FakeChatUpstream()
    with serve(small) as small_url, serve(large) as large_url:
        yield small, small_url, large, large_url


@pytest.fixture
def windows(
    fakes: tuple[FakeChatUpstream, str, FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., Proxy]:
    """A proxy with a small-window provider (`zai`, LiteLLM's table gives glm-4.5 128k in, 32k out) and a
    large one (`baseten`), under a preset given as text."""
    small, small_url, large, large_url = fakes
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    monkeypatch.setenv("ZAI_API_KEY", "sk-fake-zai-key")

    def start(preset_text: str, extra_config: str = "") -> Proxy:
        (isolated_home / "presets").mkdir(exist_ok=True)
        (isolated_home / "presets" / "test.toml").write_text(preset_text, encoding="utf-8")
        set_active("test")
        config = (
            f'[providers.zai]\nbase_url = "{small_url}/v1"\napi_key_env = "ZAI_API_KEY"\n'
            f'[providers.baseten]\nbase_url = "{large_url}/v1"\n' + extra_config
        )
        proxy = start_proxy(config, read_timeout=5.0)
        proxy.extra.update(small=small, large=large)
        return proxy

    return start


ON_SMALL = '[default]\norchestrator = "zai/glm-4.5"\n'


def anthropic_client(proxy: Proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)


OVERFLOWS = [
    pytest.param(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 150000 tokens.",
        150000,
        id="openai-400",
    ),
    pytest.param(400, "Invalid request: Your request exceeded model token limit: 128000", 128001, id="kimi-400"),
    pytest.param(
        400,
        "This model's maximum context length is 128000 tokens. However, you requested 131000 tokens "
        "(129000 in the messages, 2000 in the completion). Please reduce the length of the messages or completion.",
        131000,
        id="vllm-400",
    ),
    pytest.param(
        400, "The input (140000 tokens) is longer than the model's context length (128000 tokens).", 140000, id="vllm"
    ),
    pytest.param(413, "Request Entity Too Large", 128001, id="plain-413"),
    pytest.param(
        422,
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 128000. Given: 129000 `inputs` tokens "
        "and 200 `max_new_tokens`",
        129000,
        id="tgi-422",
    ),
]


@pytest.mark.parametrize(("status", "message", "reported"), OVERFLOWS)
@pytest.mark.parametrize("stream", [True, False])
def test_upstream_overflow_reaches_an_anthropic_caller_as_prompt_is_too_long(
    windows: Callable[..., Proxy], status: int, message: str, reported: int, stream: bool
) -> None:
    proxy = windows(ON_SMALL)
    proxy.extra["small"].script(error_reply(status, message))
    client = anthropic_client(proxy)
    with pytest.raises(anthropic.BadRequestError) as caught:
        arguments: dict[str, Any] = {
            "model": "claude-opus-5-5",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}],
        }
        if stream:
            with client.messages.stream(**arguments) as events:
                events.get_final_message()
        else:
            client.messages.create(**arguments)
    assert caught.value.status_code == 400
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "invalid_request_error"
    # N from the upstream's message where it gave one (else one over the window), M the target's window.
    assert body["error"]["message"] == f"prompt is too long: {reported} tokens > 128000 maximum"
    record = proxy.sink.wait(1)[0]
    assert (record.outcome, record.http_status, record.served_model) == ("context_overflow", 400, "glm-4.5")
    assert record.error is not None and message[:40] in record.error


@pytest.mark.parametrize(("status", "message", "reported"), OVERFLOWS[:2])
def test_upstream_overflow_reaches_openai_callers_as_context_length_exceeded(
    windows: Callable[..., Proxy], status: int, message: str, reported: int
) -> None:
    proxy = windows(ON_SMALL)
    small = proxy.extra["small"]
    small.script(error_reply(status, message), error_reply(status, message))
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=FAKE_CLIENT_KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(model="gpt-5.5", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(model="gpt-5.5", input="hi")
    for caught, param in ((chat, "messages"), (responses, "input")):
        assert caught.value.code == "context_length_exceeded"
        assert caught.value.param == param
        assert "maximum context length is 128000 tokens" in caught.value.message
        assert f"resulted in {reported} tokens" in caught.value.message
    assert [r.outcome for r in proxy.sink.wait(2)] == ["context_overflow", "context_overflow"]


def test_other_upstream_400_is_passed_on_unchanged(windows: Callable[..., Proxy]) -> None:
    proxy = windows(ON_SMALL)
    proxy.extra["small"].script(error_reply(400, "tool_use ids must be unique"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(proxy).messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert "tool_use ids must be unique" in caught.value.message
    assert proxy.sink.wait(1)[0].outcome == "upstream_error"


def ask(proxy: Proxy, max_tokens: int) -> None:
    """One streamed call, as Claude Code makes it (the SDK refuses a large max_tokens unstreamed)."""
    with anthropic_client(proxy).messages.stream(
        model="claude-opus-5-5", max_tokens=max_tokens, messages=[{"role": "user", "content": "hi"}]
    ) as events:
        events.get_final_message()


def test_max_tokens_sent_upstream_never_exceeds_the_table_output_limit(windows: Callable[..., Proxy]) -> None:
    proxy = windows(ON_SMALL)
    ask(proxy, 128000)
    # LiteLLM's table: zai/glm-4.5 gives at most 32000 output tokens.
    assert proxy.extra["small"].received[0].json["max_completion_tokens"] == 32000


def test_max_tokens_follows_a_config_output_limit_and_smaller_requests_pass(windows: Callable[..., Proxy]) -> None:
    proxy = windows(
        '[default]\norchestrator = "baseten/moonshotai/Kimi-K3"\n',
        '[models."baseten/moonshotai/Kimi-K3"]\nmax_output_tokens = 4000\n',
    )
    ask(proxy, 128000)
    ask(proxy, 100)
    # A config.toml override wins over the table's 262144.
    assert [r.json["max_completion_tokens"] for r in proxy.extra["large"].received] == [4000, 100]


@pytest.mark.parametrize(
    "preset",
    [
        pytest.param(
            '[default]\norchestrator = "zai/glm-4.5"\nlong_context = "baseten/moonshotai/Kimi-K3"\n', id="long_context"
        ),
        pytest.param(
            '[default]\norchestrator = "zai/glm-4.5"\nlong_context = { orchestrator = "baseten/moonshotai/Kimi-K3" }\n',
            id="long_context-per-role",
        ),
        pytest.param(
            '[default]\norchestrator = "zai/glm-4.5"\nfallback = ["baseten/moonshotai/Kimi-K3"]\n', id="fallback-list"
        ),
    ],
)
def test_a_prompt_over_the_window_goes_to_a_target_that_holds_it(windows: Callable[..., Proxy], preset: str) -> None:
    proxy = windows(preset)
    small, large = proxy.extra["small"], proxy.extra["large"]
    large.script(Turn(text="read it all"))
    message = anthropic_client(proxy).messages.create(
        model="claude-opus-5-5", max_tokens=100, messages=[{"role": "user", "content": LONG_TEXT}]
    )
    assert message.content[0].text == "read it all"  # type: ignore[union-attr]
    assert small.received == []  # never asked what it must refuse
    assert large.received[0].json["model"] == "moonshotai/Kimi-K3"
    records = proxy.sink.wait(1)
    assert len(records) == 1
    assert (records[0].served_model, records[0].fallback_trigger, records[0].fallback_attempt) == (
        "moonshotai/Kimi-K3",
        "context_window",
        1,
    )


def test_a_short_prompt_stays_on_its_target_and_never_reaches_long_context(windows: Callable[..., Proxy]) -> None:
    proxy = windows('[default]\norchestrator = "zai/glm-4.5"\nlong_context = "baseten/moonshotai/Kimi-K3"\n')
    small, large = proxy.extra["small"], proxy.extra["large"]
    small.script(Reply(500, [b'{"error":{"message":"down"}}'], "application/json"))
    with pytest.raises(anthropic.InternalServerError):
        anthropic_client(proxy).messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    # A long_context target is for prompts the role's own targets cannot hold, not a general fallback.
    assert large.received == [] and len(small.received) == 1


def test_no_target_holds_the_prompt_refused_without_calling_any_upstream(windows: Callable[..., Proxy]) -> None:
    proxy = windows(
        '[default]\norchestrator = "zai/glm-4.5"\nfallback = ["baseten/moonshotai/Kimi-K3"]\n',
        '[models."baseten/moonshotai/Kimi-K3"]\ncontext_window = 150000\n',
    )
    small, large = proxy.extra["small"], proxy.extra["large"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client(proxy).messages.create(
            model="claude-opus-5-5", max_tokens=100, messages=[{"role": "user", "content": LONG_TEXT}]
        )
    assert small.received == [] and large.received == []
    message = caught.value.message
    assert "prompt is too long: " in message and " tokens > 128000 maximum" in message
    assert caught.value.response.headers["x-switch-route"] == "test; role=orchestrator; model=none"
    record = proxy.sink.wait(1)[0]
    # Refused before any provider, like a 400 or 413 of switch's own: no model, no cost.
    assert (record.outcome, record.http_status, record.provider, record.served_model) == (
        "context_overflow",
        400,
        "",
        "",
    )
    assert record.input_tokens == 0 and record.error is not None and "no target of this route" in record.error


def test_an_upstream_refusing_the_prompt_hands_it_to_a_larger_window(windows: Callable[..., Proxy]) -> None:
    proxy = windows('[default]\norchestrator = "zai/glm-4.5"\nlong_context = "baseten/moonshotai/Kimi-K3"\n')
    small, large = proxy.extra["small"], proxy.extra["large"]
    small.script(error_reply(400, "Invalid request: Your request exceeded model token limit: 128000"))
    large.script(Turn(text="fits here"))
    message = anthropic_client(proxy).messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "short by switch's estimate"}]
    )
    assert message.content[0].text == "fits here"  # type: ignore[union-attr]
    records = proxy.sink.wait(2)
    assert [(r.outcome, r.fallback_trigger) for r in records] == [
        ("context_overflow", None),
        ("completed", "context_window"),
    ]


def test_windows_are_not_enforced_when_context_window_fallback_is_off(windows: Callable[..., Proxy]) -> None:
    proxy = windows(
        '[default]\norchestrator = "zai/glm-4.5"\nfallback = ["baseten/moonshotai/Kimi-K3"]\n',
        '[routing]\nfallback_on = ["connect", "5xx"]\n',
    )
    small = proxy.extra["small"]
    anthropic_client(proxy).messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": LONG_TEXT}])
    assert len(small.received) == 1
