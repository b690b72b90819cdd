"""LiteLLM targets through the real proxy: two non-native APIs, all three inbound APIs, streamed and not.

The upstreams are real loopback servers speaking Ollama's and Gemini's own wire formats; LiteLLM's SDK
calls them with `api_base` pointed there. Callers are the real anthropic and openai SDKs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from tests.conftest import Proxy
from tests.fake_upstream import Reply, ToolCall, Turn
from tests.litellm.callers import INBOUNDS, ask
from tests.litellm.conftest import BACKUP_KEY, GEMINI_KEY, OLLAMA_KEY, TARGETS, Fakes
from tests.servers import free_port

TOOL_TURN = Turn(
    text="Reading both.",
    reasoning="Two files: read them in parallel.",
    tool_calls=[ToolCall("read", '{"path": "a.txt"}'), ToolCall("read", '{"path": "b.txt"}')],
    prompt_tokens=120,
    cached_tokens=20,
    completion_tokens=30,
    reasoning_tokens=10,
    fragment=4,
)


def declared_tools(fake: str, body: dict[str, Any]) -> list[str]:
    """The tool names the provider's own request body declares."""
    if fake == "gemini":
        return [f["name"] for tool in body["tools"] for f in tool["function_declarations"]]
    return [tool["function"]["name"] for tool in body["tools"]]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("inbound", INBOUNDS)
@pytest.mark.parametrize("fake", ["ollama", "gemini"])
def test_a_litellm_target_answers_text_reasoning_and_parallel_tool_calls(
    litellm_proxy: Callable[..., Proxy], fake: str, inbound: str, stream: bool
) -> None:
    proxy = litellm_proxy(TARGETS[fake])
    fakes: Fakes = proxy.extra["fakes"]
    server = fakes.gemini if fake == "gemini" else fakes.ollama
    server.script(TOOL_TURN)

    answer = ask(inbound, proxy.url, stream)

    assert answer.text == "Reading both."
    assert [(name, args) for _id, name, args in answer.calls] == [
        ("read", {"path": "a.txt"}),
        ("read", {"path": "b.txt"}),
    ]
    ids = [call_id for call_id, _name, _args in answer.calls]
    assert len(set(ids)) == 2 and all(ids)
    if inbound != "openai-responses":
        # Responses callers see reasoning only as a summary switch does not invent.
        assert answer.reasoning == "Two files: read them in parallel."
    (received,) = server.received
    body = received.json
    assert declared_tools(fake, body) == ["read"]
    if fake == "gemini":
        assert received.path.endswith(":streamGenerateContent?alt=sse" if stream else ":generateContent")
        assert received.headers["x-goog-api-key"] == GEMINI_KEY
    else:
        assert received.path == "/api/chat" and body["stream"] is stream and body["model"] == "llama3"
        assert received.headers["authorization"] == f"Bearer {OLLAMA_KEY}"
    (record,) = proxy.sink.wait(1)
    assert (record.provider, record.upstream_api, record.outcome, record.streamed) == (
        "gem" if fake == "gemini" else "local",
        "litellm",
        "completed",
        stream,
    )
    assert record.stop_reason == "tool_use" and record.usage_reported
    if fake == "gemini":
        # Gemini reports cached prompt tokens and thinking tokens; both reach the ledger.
        assert (record.input_tokens, record.cache_read_tokens, record.output_tokens) == (100, 20, 40)
        assert record.reasoning_tokens == 10
    else:
        assert (record.input_tokens, record.cache_read_tokens, record.output_tokens) == (120, 0, 30)


def test_each_litellm_provider_gets_only_its_own_key_and_the_environment_is_untouched(
    litellm_proxy: Callable[..., Proxy], isolated_home: Any
) -> None:
    from switch.routing.presets import set_active

    before = dict(os.environ)
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "two.toml").write_text(
        f'[default]\norchestrator = "{TARGETS["gemini"]}"\nsubagent = "{TARGETS["ollama"]}"\n'
    )
    set_active("two")
    proxy = litellm_proxy()
    fakes: Fakes = proxy.extra["fakes"]
    ask("anthropic", proxy.url, stream=False)
    ask("openai-chat", proxy.url, stream=True, role="subagent")
    assert len(fakes.gemini.received) == 1 and len(fakes.ollama.received) == 1
    gemini_seen = str(fakes.gemini.received[0].headers) + fakes.gemini.received[0].body.decode()
    ollama_seen = str(fakes.ollama.received[0].headers) + fakes.ollama.received[0].body.decode()
    assert GEMINI_KEY in gemini_seen and OLLAMA_KEY not in gemini_seen and BACKUP_KEY not in gemini_seen
    assert OLLAMA_KEY in ollama_seen and GEMINI_KEY not in ollama_seen and BACKUP_KEY not in ollama_seen
    assert "sk-ant-caller" not in gemini_seen and "sk-caller" not in ollama_seen
    after = dict(os.environ)
    # Only LiteLLM's offline cost-map switch may be added; no key goes into the process environment.
    after.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
    before.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
    assert after == before
    import litellm

    assert litellm.api_key is None and litellm.ollama_key is None


def test_a_claude_code_capture_completes_its_tool_loop_on_a_litellm_target(
    litellm_proxy: Callable[..., Proxy],
) -> None:
    from tests.conftest import FAKE_CLIENT_KEY, load_capture

    proxy = litellm_proxy(TARGETS["gemini"])
    fakes: Fakes = proxy.extra["fakes"]
    capture = load_capture("claude_code_subagent/03_POST_v1_messages.json")
    body = capture["body"]
    tool = body["tools"][0]["name"]
    fakes.gemini.script(
        Turn(text="Looking.", tool_calls=[ToolCall(tool, orjson.dumps(_example_input(body["tools"][0])).decode())]),
        Turn(text="All done: the file says hello."),
    )
    skip = {"host", "content-length", "connection", "accept-encoding", "x-api-key", "authorization"}
    headers = {k: v for k, v in capture["headers"] if k.lower() not in skip}
    headers["x-api-key"] = FAKE_CLIENT_KEY
    first = httpx.post(proxy.url + "/v1/messages?beta=true", json=body, headers=headers, timeout=30)
    assert first.status_code == 200, first.text
    events = _anthropic_events(first.content) if body.get("stream") else None
    use = _tool_use(first.content, events)
    assert use["name"] == tool

    follow_up = {
        **body,
        "messages": [
            *body["messages"],
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": use["id"], "name": tool, "input": use["input"]}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "hello"}]},
        ],
    }
    second = httpx.post(proxy.url + "/v1/messages?beta=true", json=follow_up, headers=headers, timeout=30)
    assert second.status_code == 200, second.text
    assert _said(second.content, body.get("stream") is True) == "All done: the file says hello."
    sent = fakes.gemini.received[1].json
    # Gemini got the call and its result as its own function call / response parts, paired by name.
    parts = [part for content in sent["contents"] for part in content["parts"]]
    called = [_field(p, "call") for p in parts if _field(p, "call")]
    answered = [_field(p, "response") for p in parts if _field(p, "response")]
    assert [c["name"] for c in called] == [tool] and [r["name"] for r in answered] == [tool]
    assert "hello" in orjson.dumps(answered[0]).decode()
    records = proxy.sink.wait(2)
    assert [(r.outcome, r.stop_reason, r.provider) for r in records] == [
        ("completed", "tool_use", "gem"),
        ("completed", "end_turn", "gem"),
    ]


def _field(part: dict[str, Any], kind: str) -> Any:
    """A Gemini part's function call or response, under either spelling LiteLLM may write."""
    return part.get(f"function_{kind}") or part.get(f"function{kind.capitalize()}")


def _said(raw: bytes, streamed: bool) -> str:
    if not streamed:
        return "".join(b["text"] for b in orjson.loads(raw)["content"] if b["type"] == "text")
    deltas = [e["delta"] for e in _anthropic_events(raw) if e["type"] == "content_block_delta"]
    return "".join(d["text"] for d in deltas if d["type"] == "text_delta")


def _example_input(tool: dict[str, Any]) -> dict[str, Any]:
    properties = tool.get("input_schema", {}).get("properties", {})
    return {name: "x" for name in tool.get("input_schema", {}).get("required", list(properties)[:1])}


def _anthropic_events(raw: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in raw.splitlines() if line.startswith(b"data: ")]


def _tool_use(raw: bytes, events: list[dict[str, Any]] | None) -> dict[str, Any]:
    if events is None:
        return next(block for block in orjson.loads(raw)["content"] if block["type"] == "tool_use")
    use: dict[str, Any] = {}
    arguments = ""
    for event in events:
        if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
            use = dict(event["content_block"])
        elif event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
            arguments += event["delta"]["partial_json"]
    use["input"] = orjson.loads(arguments or "{}")
    return use


FALLBACK_PRESET = '[default]\norchestrator = ["{first}", "backup/backup-model"]\n'


@pytest.mark.parametrize("failure", ["503", "429", "connect"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_failing_litellm_target_falls_back_to_the_next_target(
    litellm_proxy: Callable[..., Proxy],
    fakes: Fakes,
    isolated_home: Any,
    failure: str,
    stream: bool,
) -> None:
    from switch.routing.presets import set_active

    first = TARGETS["gemini"]
    extra = ""
    if failure == "connect":
        first = "dead/gemini-2.5-pro"
        extra = (
            f'[providers.dead]\napi = "litellm"\nlitellm_provider = "gemini"\n'
            f'base_url = "http://127.0.0.1:{free_port()}"\napi_key_env = "GEM_KEY"\n'
        )
    else:
        status = int(failure)
        error = {"error": {"code": status, "message": "overloaded, try later", "status": "UNAVAILABLE"}}
        fakes.gemini.script(Reply(status, [orjson.dumps(error)], "application/json"))
    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "lt.toml").write_text(FALLBACK_PRESET.format(first=first))
    set_active("lt")
    fakes.backup.script(Turn(text="backup answered"))
    proxy = litellm_proxy(extra=extra)

    answer = ask("anthropic", proxy.url, stream)

    assert answer.text == "backup answered"
    records = proxy.sink.wait(2)
    assert [(r.provider, r.outcome, r.fallback_attempt) for r in records] == [
        (first.split("/")[0], "transport_error" if failure == "connect" else "upstream_error", 0),
        ("backup", "completed", 1),
    ]
    assert records[1].fallback_trigger == ("connect" if failure == "connect" else "5xx" if failure == "503" else "429")
    assert GEMINI_KEY not in str(fakes.backup.received[0].headers)


@pytest.mark.parametrize("inbound", INBOUNDS)
def test_a_litellm_target_error_reaches_the_caller_in_its_own_format(
    litellm_proxy: Callable[..., Proxy], fakes: Fakes, inbound: str
) -> None:
    error = {"error": {"code": 400, "message": f"bad request: key {GEMINI_KEY} refused", "status": "INVALID_ARGUMENT"}}
    fakes.gemini.script(Reply(400, [orjson.dumps(error)], "application/json"))
    proxy = litellm_proxy()
    expected: type[Exception] = anthropic.BadRequestError if inbound == "anthropic" else openai.BadRequestError
    with pytest.raises(expected) as raised:
        ask(inbound, proxy.url, stream=False)
    caught: Any = raised.value
    assert caught.status_code == 400
    body = caught.body
    if inbound == "anthropic":
        assert caught.response.json()["type"] == "error"
        message = caught.response.json()["error"]["message"]
    else:
        message = body["message"] if "message" in body else body["error"]["message"]
    assert "upstream gem returned 400" in message and "bad request" in message
    assert GEMINI_KEY not in caught.response.text
    (record,) = proxy.sink.wait(1)
    assert (record.outcome, record.provider, record.upstream_api) == ("upstream_error", "gem", "litellm")
    assert record.error is not None and GEMINI_KEY not in record.error
    # The proxy keeps serving.
    assert ask(inbound, proxy.url, stream=False).text == "Hello from the fake."


def test_a_missing_key_is_a_clear_error_and_nothing_is_called(
    litellm_proxy: Callable[..., Proxy], fakes: Fakes
) -> None:
    extra = f'[providers.nokey]\napi = "litellm"\nlitellm_provider = "gemini"\nbase_url = "{fakes.gemini_url}"\n'
    proxy = litellm_proxy("nokey/gemini-2.5-pro", extra=extra)
    with pytest.raises(anthropic.AuthenticationError) as raised:
        ask("anthropic", proxy.url, stream=False)
    assert "no API key for provider 'nokey'" in raised.value.message
    assert "switch keys set nokey" in raised.value.message
    assert fakes.gemini.received == []
    (record,) = proxy.sink.wait(1)
    assert record.outcome == "rejected"


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.mark.parametrize("fake", ["ollama", "gemini"])
def test_an_image_reaches_a_litellm_provider_in_its_own_format(litellm_proxy: Callable[..., Proxy], fake: str) -> None:
    proxy = litellm_proxy(TARGETS[fake])
    fakes: Fakes = proxy.extra["fakes"]
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-caller", max_retries=0)
    image: Any = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}}
    message = client.messages.create(
        model="claude-opus-5-5",
        max_tokens=100,
        messages=[{"role": "user", "content": [image, {"type": "text", "text": "What is this?"}]}],
    )
    assert message.content[0].type == "text"
    body = (fakes.gemini if fake == "gemini" else fakes.ollama).received[0].json
    if fake == "gemini":
        parts = body["contents"][0]["parts"]
        inline = [p.get("inline_data") or p.get("inlineData") for p in parts if "inline_data" in p or "inlineData" in p]
        assert inline and inline[0]["data"] == PIXEL
        assert inline[0].get("mime_type", inline[0].get("mimeType")) == "image/png"
    else:
        (user,) = body["messages"]
        assert user["images"] == [PIXEL] and "What is this?" in user["content"]


@pytest.mark.parametrize("inbound", ["openai-chat", "anthropic"])
def test_cache_writes_reported_through_litellm_reach_the_ledger(
    litellm_proxy: Callable[..., Proxy], inbound: str
) -> None:
    from tests.fake_upstream import FakeAnthropicUpstream
    from tests.servers import serve

    # Anthropic's API through LiteLLM (not switch's own Anthropic path): it reports cache reads and writes.
    claude = FakeAnthropicUpstream()
    with serve(claude) as url:
        extra = f'[providers.viallm]\napi = "litellm"\nlitellm_provider = "anthropic"\nbase_url = "{url}"\n'
        extra += 'api_key_env = "GEM_KEY"\n'
        proxy = litellm_proxy("viallm/claude-opus-5-5", extra=extra)
        answer = ask(inbound, proxy.url, stream=True)
    assert answer.text == "Native hello"
    assert claude.received[0].headers["x-api-key"] == GEMINI_KEY
    (record,) = proxy.sink.wait(1)
    assert (record.input_tokens, record.cache_read_tokens, record.cache_write_tokens) == (812, 4000, 100)
    assert record.output_tokens == 57


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_silent_litellm_target_falls_back_after_the_time_to_first_token_limit(
    litellm_proxy: Callable[..., Proxy], fakes: Fakes, isolated_home: Any, stream: bool
) -> None:
    from switch.routing.presets import set_active

    (isolated_home / "presets").mkdir()
    (isolated_home / "presets" / "lt.toml").write_text(FALLBACK_PRESET.format(first=TARGETS["gemini"]))
    set_active("lt")
    # Silent for six times the limit: only the limit hands the call over before the answer would come.
    fakes.gemini.script(Reply(200, [b"{}"], "application/json", delay_before=6))
    fakes.backup.script(Turn(text="backup answered"))
    proxy = litellm_proxy(ttft_timeout=1)

    assert ask("openai-chat", proxy.url, stream).text == "backup answered"
    records = proxy.sink.wait(2)
    assert [(r.provider, r.outcome) for r in records] == [("gem", "transport_error"), ("backup", "completed")]
    assert records[1].fallback_trigger == "timeout"


def test_a_pdf_reaches_a_litellm_provider_as_its_extracted_text(litellm_proxy: Callable[..., Proxy]) -> None:
    from tests.document_helpers import b64, make_pdf

    proxy = litellm_proxy(TARGETS["ollama"])
    fakes: Fakes = proxy.extra["fakes"]
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-caller", max_retries=0)
    pdf: Any = {
        "type": "document",
        "title": "plan.pdf",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(make_pdf(["first page", "last"]))},
    }
    message = client.messages.create(
        model="claude-opus-5-5",
        max_tokens=100,
        messages=[{"role": "user", "content": [pdf, {"type": "text", "text": "Summarise it."}]}],
    )
    assert message.content[0].type == "text"
    (user,) = fakes.ollama.received[0].json["messages"]
    said = str(user["content"])
    assert 'document "plan.pdf"' in said and "--- page 2 ---" in said and "first page" in said
    assert "Summarise it." in said
