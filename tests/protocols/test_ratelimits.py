"""Rate-limit headers are outside input: any value is read or left out, never raised, never out of range."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from switch.protocols.ratelimits import MAX_RETRY_SECONDS, read_snapshot
from switch.proxy.plan_quota import PlanQuotas

NOW = 1_800_000_000.0
NAMES = [
    "anthropic-ratelimit-unified-status",
    "anthropic-ratelimit-unified-5h-utilization",
    "anthropic-ratelimit-unified-5h-reset",
    "anthropic-ratelimit-unified-5h-status",
    "anthropic-ratelimit-unified-7d-utilization",
    "anthropic-ratelimit-unified-7d-reset",
    "anthropic-ratelimit-unified-representative-claim",
    "anthropic-ratelimit-unified-reset",
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "x-codex-primary-used-percent",
    "x-codex-primary-window-minutes",
    "x-codex-primary-reset-at",
    "x-codex-secondary-used-percent",
    "x-codex-rate-limit-reached-type",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "retry-after",
]
VALUES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["allowed", "allowed_warning", "rejected", "nan", "inf", "-1", "1e400", "6m0s", "20ms", "1h"]),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["2026-12-02T01:00:00Z", "2026-13-45T99:00:00Z", "0000-01-01T00:00:00+00:00"]),
)
HEADERS = st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=len(NAMES))


@settings(max_examples=200, deadline=None)
@given(headers=HEADERS, status=st.sampled_from([200, 400, 429, 529]))
# Year 0 matches the timestamp's four digits but is no calendar year: the parser raised on it.
@example(
    headers={"anthropic-ratelimit-requests-limit": "1", "anthropic-ratelimit-requests-reset": "0000-01-01T00:00:00.0"},
    status=200,
)
def test_any_header_values_give_a_sane_snapshot_or_none(headers: dict[str, str], status: int) -> None:
    snapshot = read_snapshot("anthropic", "key-abc", status, headers, NOW)
    if snapshot is None:
        return
    assert snapshot.status in (None, "allowed", "allowed_warning", "rejected")
    for window in snapshot.windows:
        assert 0.0 <= window.utilization <= 1.0
        assert window.resets_at is None or math.isfinite(window.resets_at)
    if snapshot.retry_until is not None:
        assert math.isfinite(snapshot.retry_until)
        assert snapshot.retry_until <= max(NOW + MAX_RETRY_SECONDS, 1e11)
    if snapshot.binding is not None:
        assert len(snapshot.binding) <= 32


@settings(max_examples=100, deadline=None)
@given(headers=HEADERS, status=st.sampled_from([200, 429]))
def test_the_tracker_never_raises_and_never_keeps_the_credential(headers: dict[str, str], status: int) -> None:
    written: list[object] = []

    class Sink:
        def submit_quota(self, snapshot: object) -> None:
            written.append(snapshot)

    quotas = PlanQuotas(Sink(), clock=lambda: NOW)
    secret = "sk-ant-oat01-secret-credential"
    request = {"authorization": f"Bearer {secret}"}
    quotas.observe("anthropic", request, status, headers)
    quotas.observe("anthropic", request, status, headers)
    assert len(written) <= 1  # the same answer twice is written once
    for pending in written:
        assert secret not in repr(pending.snapshot()) and secret not in repr(pending.headers)  # type: ignore[attr-defined]
    until = quotas.resting_until("anthropic", request)
    assert until is None or until > NOW


def test_a_rejected_plan_rests_until_its_reset_and_an_allowed_answer_ends_it() -> None:
    clock = [NOW]
    quotas = PlanQuotas(clock=lambda: clock[0])
    request = {"x-api-key": "k"}
    rejected = {"anthropic-ratelimit-unified-status": "rejected", "anthropic-ratelimit-unified-reset": str(NOW + 60)}
    quotas.observe("anthropic", request, 429, rejected)
    assert quotas.resting_until("anthropic", request) == NOW + 60
    assert quotas.resting_until("anthropic", {"x-api-key": "another account"}) is None
    assert quotas.resting_until("openai", request) is None
    clock[0] = NOW + 61
    assert quotas.resting_until("anthropic", request) is None  # reset passed: native is asked again
    quotas.observe("anthropic", request, 429, {**rejected, "anthropic-ratelimit-unified-reset": str(NOW + 600)})
    assert quotas.resting_until("anthropic", request) == NOW + 600
    quotas.observe("anthropic", request, 200, {"anthropic-ratelimit-unified-status": "allowed"})
    assert quotas.resting_until("anthropic", request) is None


def test_header_formats_from_the_documentation() -> None:
    api_key = read_snapshot(
        "anthropic",
        "a",
        200,
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "40",
            "anthropic-ratelimit-requests-reset": "2026-12-02T01:00:00Z",
        },
        NOW,
    )
    assert api_key is not None and api_key.source == "api"
    (requests,) = api_key.windows
    assert (requests.name, requests.utilization) == ("requests", pytest.approx(0.2))
    assert requests.resets_at == datetime(2026, 12, 2, 1, tzinfo=UTC).timestamp()
    openai = read_snapshot(
        "openai",
        "a",
        200,
        {
            "x-ratelimit-limit-requests": "100",
            "x-ratelimit-remaining-requests": "25",
            "x-ratelimit-reset-requests": "1h2m3.5s",
        },
        NOW,
    )
    assert openai is not None and openai.windows[0].resets_at == NOW + 3723.5
    assert openai.windows[0].utilization == pytest.approx(0.75)
    bare = read_snapshot("openai", "a", 429, {}, NOW)
    assert bare is None  # nothing to record, nothing to wait for
    later = read_snapshot("openai", "a", 429, {"retry-after": "99999999"}, NOW)
    assert later is not None and later.retry_until == NOW + MAX_RETRY_SECONDS and later.status == "rejected"
