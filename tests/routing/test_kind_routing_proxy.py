"""Through the real proxy: forks and compaction turns are served by the orchestrator's target (their history
is cached there) unless the preset routes their kind, and every call records its kind and parent agent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from switch.routing.presets import set_active
from tests.conftest import FAKE_BASETEN_KEY, Proxy, presets_of
from tests.fake_upstream import FakeChatUpstream
from tests.routing.test_routing_proxy import capture_request, write_preset
from tests.servers import serve, wait_until

SPLIT = """
[default]
orchestrator = "baseten/main-model"
subagent = "helper/helper-model"
background = "helper/helper-model"
"""


@pytest.fixture
def proxy_for(
    start_proxy: Callable[..., Proxy], isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], tuple[Proxy, FakeChatUpstream, FakeChatUpstream]]]:
    main, helper = FakeChatUpstream(False), FakeChatUpstream(False)
    with serve(main) as main_url, serve(helper) as helper_url:
        monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
        monkeypatch.setenv("HELPER_API_KEY", "sk-fake-helper-key")
        config = (
            f'[providers.baseten]\nbase_url = "{main_url}/v1"\n'
            f'[providers.helper]\nbase_url = "{helper_url}/v1"\napi_key_env = "HELPER_API_KEY"\n'
        )

        def start(preset_text: str) -> tuple[Proxy, FakeChatUpstream, FakeChatUpstream]:
            write_preset(isolated_home, "kinds", preset_text)
            set_active("kinds")
            return start_proxy(config), main, helper

        yield start


def _models(upstream: FakeChatUpstream) -> list[str]:
    return [received.json["model"] for received in upstream.received]


def _replay(proxy: Proxy, folder: str, count: int) -> list[Any]:
    for seq in range(1, count + 1):
        answer = capture_request(proxy, f"{folder}/{seq:02d}_POST_v1_messages.json")
        assert answer.status_code == 200, answer.text
    return proxy.sink.wait(count)


@pytest.mark.parametrize("folder", ["claude_code_fork", "claude_code_fork_hinted"])
def test_fork_is_served_by_the_orchestrators_target_and_counted_as_a_subagent(
    proxy_for: Callable[..., Any], folder: str
) -> None:
    proxy, main, helper = proxy_for(SPLIT)
    records = _replay(proxy, folder, 4)
    assert _models(main) == ["main-model"] * 4 and helper.received == []
    fork = records[1]
    assert (fork.role, fork.request_kind, fork.served_model) == ("subagent", "fork", "main-model")
    assert fork.agent_id and fork.session_id == records[0].session_id
    assert [(r.role, r.request_kind) for r in (records[0], *records[2:])] == [("orchestrator", None)] * 3
    # The fork's history went upstream as the orchestrator's had: same leading messages, same model.
    first, forked = main.received[0].json["messages"], main.received[1].json["messages"]
    assert forked[: len(first)] == first


def test_a_preset_that_routes_forks_sends_them_there(proxy_for: Callable[..., Any]) -> None:
    proxy, main, helper = proxy_for(SPLIT + 'fork = "helper/fork-model"\n')
    records = _replay(proxy, "claude_code_fork", 2)
    assert _models(main) == ["main-model"] and _models(helper) == ["fork-model"]
    assert (records[1].role, records[1].request_kind) == ("subagent", "fork")


def test_ordinary_subagents_still_go_to_the_subagent_target(proxy_for: Callable[..., Any]) -> None:
    proxy, main, helper = proxy_for(SPLIT)
    records = _replay(proxy, "claude_code_nested_subagent", 6)
    assert _models(helper) == ["helper-model"] * 3
    by_agent = {r.agent_id: r for r in records if r.agent_id}
    nested = next(r for r in records if r.parent_agent_id)
    assert nested.parent_agent_id in by_agent and by_agent[nested.parent_agent_id].parent_agent_id is None
    assert {r.request_kind for r in records} == {None}


@pytest.mark.parametrize("folder", ["claude_code_compaction", "claude_code_compaction_hinted"])
def test_compaction_stays_on_the_orchestrators_target(proxy_for: Callable[..., Any], folder: str) -> None:
    proxy, main, helper = proxy_for(SPLIT)
    records = _replay(proxy, folder, 2)
    assert _models(main) == ["main-model"] * 2 and helper.received == []
    assert [(r.role, r.request_kind) for r in records] == [("orchestrator", None), ("orchestrator", "compaction")]


def test_a_preset_that_routes_compaction_sends_it_there(proxy_for: Callable[..., Any]) -> None:
    proxy, main, helper = proxy_for(SPLIT + 'compaction = "helper/compact-model"\n')
    records = _replay(proxy, "claude_code_compaction", 2)
    assert _models(main) == ["main-model"] and _models(helper) == ["compact-model"]
    assert records[1].request_kind == "compaction"


def test_a_fork_after_switch_use_keeps_the_preset_its_orchestrator_started_on(
    proxy_for: Callable[..., Any], isolated_home: Path
) -> None:
    proxy, main, helper = proxy_for(SPLIT)
    _replay(proxy, "claude_code_fork", 1)
    write_preset(isolated_home, "moved", 'description = "m"\n[default]\norchestrator = "helper/moved-model"\n')
    set_active("moved")
    wait_until(lambda: presets_of(proxy).active.name == "moved", what="the proxy to load the new preset")
    answer = capture_request(proxy, "claude_code_fork/02_POST_v1_messages.json")
    assert answer.status_code == 200, answer.text
    fork = proxy.sink.wait(2)[1]
    assert (fork.request_kind, fork.preset, fork.served_model) == ("fork", "kinds", "main-model")
    assert helper.received == []
