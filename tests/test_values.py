"""`evolve` copies a record with changes exactly as `dataclasses.replace` would, and leaves the original alone."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.protocols.ir import Reasoning, Request, TextPart, Usage
from switch.proxy.meter import Meter
from switch.routing.classify import CallInfo
from switch.values import evolve

REQUEST = Request(model="m", system=(TextPart("s"),), messages=(), tools=(), provider_data={"k": 1})
METER = Meter(None, "anthropic", requested_model="r", attempt=2, usage=Usage(input_tokens=5))  # type: ignore[arg-type]
INFO = CallInfo("claude-code", "orchestrator", "session", None, "sonnet")

CHANGES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "Request": st.fixed_dictionaries(
        {},
        optional={
            "cache_key": st.none() | st.text(max_size=8),
            "max_output_tokens": st.none() | st.integers(1, 10**6),
            "reasoning": st.none() | st.builds(Reasoning, st.booleans()),
            "messages": st.just(()),
        },
    ),
    "Meter": st.fixed_dictionaries(
        {},
        optional={
            "attempt": st.integers(0, 9),
            "trigger": st.none() | st.sampled_from(["5xx", "context_window"]),
            "usage": st.builds(Usage, input_tokens=st.integers(0, 100)),
        },
    ),
    "CallInfo": st.fixed_dictionaries({}, optional={"kind": st.none() | st.just("fork"), "role": st.just("subagent")}),
}


@pytest.mark.parametrize("record", [REQUEST, METER, INFO], ids=["Request", "Meter", "CallInfo"])
@given(data=st.data())
def test_evolve_makes_what_replace_makes_and_keeps_the_original(record: Any, data: st.DataObject) -> None:
    changes = data.draw(CHANGES[type(record).__name__])
    before = dataclasses.replace(record)
    made = evolve(record, **changes)
    assert made == dataclasses.replace(record, **changes)
    assert made is not record and record == before


def test_evolve_refuses_a_field_the_record_does_not_have() -> None:
    with pytest.raises(AttributeError):
        evolve(REQUEST, not_a_field=1)
