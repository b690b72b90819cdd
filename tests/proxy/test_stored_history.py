"""A Responses answer kept for `previous_response_id` is the answer the caller saw, whether it was
streamed or not: the follow-up call sends the upstream the same reasoning and tool calls (custom
calls wrapped for a function-only upstream, namespaced ones flattened) as a caller sending the
whole history itself would."""

from __future__ import annotations

import openai
import orjson
import pytest

from tests.chat_grammar import assert_valid_chat_request
from tests.conftest import Proxy
from tests.proxy.test_responses_and_chat import (
    PATCH,
    TOOLS,
    client,
    script_three_calls,
    three_calls_answer,
    three_results,
)


@pytest.mark.parametrize("stream", [True, False])
def test_previous_response_id_replays_reasoning_and_every_kind_of_call(kimi_proxy: Proxy, stream: bool) -> None:
    assert kimi_proxy.upstream is not None
    sdk, request, first = three_calls_answer(kimi_proxy, stream)
    _reasoning, shell, patch, spawn = first.output
    outputs = three_results(shell, patch, spawn)
    second = sdk.responses.create(**{**request, "input": outputs, "previous_response_id": first.id})
    assert second.output_text == "All done."

    upstream_second = kimi_proxy.upstream.received[1].json
    assert_valid_chat_request(upstream_second)
    user, assistant, *results = upstream_second["messages"]
    assert user["content"] == "do it"
    assert assistant["reasoning_content"] == "I will run, patch and delegate."
    calls = assistant["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["exec_command", "apply_patch", "multi_agent_v1__spawn_agent"]
    assert orjson.loads(calls[0]["function"]["arguments"]) == {"cmd": "ls"}
    # The custom call went back wrapped once, as the upstream first sent it: not its raw text, not wrapped twice.
    assert orjson.loads(calls[1]["function"]["arguments"]) == {"input": PATCH}
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in calls]
    assert [m["content"] for m in results] == ["a.txt", "applied", "agent 7"]


def test_an_answer_the_caller_asked_not_to_store_cannot_be_continued(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    script_three_calls(kimi_proxy)
    sdk = client(kimi_proxy)
    with sdk.responses.stream(model="gpt-5.5", input="do it", tools=TOOLS, store=False) as events:  # type: ignore[arg-type]
        first = events.get_final_response()
    assert len(first.output) == 4
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.create(model="gpt-5.5", input="and then?", previous_response_id=first.id)
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]
