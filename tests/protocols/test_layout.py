"""The protocol packages keep their shape: the same files in each, nothing
imported from outside `switch.protocols` but `switch.values`, no clock (the time a response carries
is the caller's argument), and routing describes chat targets without importing a protocol.
"""

from __future__ import annotations

import ast
from pathlib import Path

import orjson
from hypothesis import given
from hypothesis import strategies as st

from switch.protocols.ir import Request, Response, TextPart, Usage
from switch.protocols.openai_chat import inbound as chat_inbound
from switch.protocols.openai_chat import stream as chat_stream
from switch.protocols.openai_responses import inbound as responses_inbound
from switch.protocols.openai_responses import stream as responses_stream

SWITCH = Path(__file__).resolve().parents[2] / "switch"
PROTOCOLS = SWITCH / "protocols"
PACKAGES = ("anthropic_messages", "openai_chat", "openai_responses")
LAYOUT = {"__init__.py", "inbound.py", "outbound.py", "stream.py", "errors.py"}
CLOCKS = {"time", "datetime"}
REQUEST = Request(model="kimi", system=(), messages=())
RESPONSE = Response("up_1", "kimi", (TextPart("hello"),), "end_turn", Usage(3, 0, 0, 2))
UNIX_TIMES = st.integers(min_value=0, max_value=2**40)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_each_protocol_package_has_the_same_files() -> None:
    for package in PACKAGES:
        files = {path.name for path in (PROTOCOLS / package).glob("*.py")}
        assert LAYOUT <= files, (package, sorted(LAYOUT - files))
        assert not files & {"request.py", "response.py"}, package


def test_protocols_import_only_themselves_and_values_and_read_no_clock() -> None:
    for path in PROTOCOLS.rglob("*.py"):
        for name in _imports(path):
            where = str(path.relative_to(SWITCH))
            if name == "switch" or name.startswith("switch."):
                assert name.startswith("switch.protocols") or name == "switch.values", (where, name)
            assert name.split(".")[0] not in CLOCKS, (where, name)


def test_routing_does_not_import_a_protocol() -> None:
    for path in (SWITCH / "routing").rglob("*.py"):
        assert not any(name.startswith("switch.protocols") for name in _imports(path)), path.name


@given(created=UNIX_TIMES)
def test_chat_answers_carry_the_time_they_are_given(created: int) -> None:
    body = chat_inbound.response_from_ir(RESPONSE, REQUEST, "chatcmpl-1", created)
    assert body["created"] == created
    encoder = chat_stream.StreamEncoder("chatcmpl-1", REQUEST, created)
    encoder.text_delta("hi")
    encoder.end()
    chunks = [line[6:] for line in encoder.take().split(b"\n") if line.startswith(b"data: {")]
    assert chunks and all(orjson.loads(chunk)["created"] == created for chunk in chunks)


@given(created=UNIX_TIMES)
def test_responses_answers_carry_the_time_they_are_given(created: int) -> None:
    body = responses_inbound.response_from_ir(RESPONSE, REQUEST, "resp_1", lambda: "x", created)
    assert body["created_at"] == created
    encoder = responses_stream.StreamEncoder("resp_1", REQUEST, lambda: "x", created)
    encoder.text_delta("hi")
    encoder.end()
    events = [orjson.loads(line[6:]) for line in encoder.take().split(b"\n") if line.startswith(b"data: ")]
    snapshots = [event["response"] for event in events if "response" in event]
    assert len(snapshots) == 3  # created, in_progress, completed
    assert all(snapshot["created_at"] == created for snapshot in snapshots)
