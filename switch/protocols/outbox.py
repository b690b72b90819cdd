"""What every stream sink that ends a stream keeps besides its own state machine.

`Reported` is what the upstream said about the stream as a whole (its usage and why the model
stopped), kept by the collector and every encoder. `Outbox` adds what a client stream encoder
keeps for the relay: the bytes encoded but not yet sent, the tool-call ids and reasoning (to
restore reasoning on a later turn), and how much text went out (to estimate usage when the
upstream never said).
"""

from __future__ import annotations

from switch.protocols.ir import StopReason, Usage


class Reported:
    """The usage and stop reason a stream reported, as the `StreamSink` calls deliver them."""

    def __init__(self) -> None:
        self.final_usage = Usage()
        self.usage_seen = False
        self.stop_reason: StopReason | None = None
        self.stop_sequence: str | None = None

    def usage(self, usage: Usage) -> None:
        """Remember the upstream's usage for the end of the stream."""
        self.final_usage = usage
        self.usage_seen = True

    def finish(self, stop_reason: StopReason, stop_sequence: str | None = None) -> None:
        """Remember why the model stopped."""
        self.stop_reason = stop_reason
        self.stop_sequence = stop_sequence


class Outbox(Reported):
    """The shared half of a client stream encoder; subclasses append encoded events to `out`."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[bytes] = []
        self.tool_call_ids: list[str] = []
        self.reasoning_chunks: list[str] = []
        self.emitted_chars = 0

    def take(self) -> bytes:
        """Everything encoded since the last call, as one chunk to send."""
        if not self.out:
            return b""
        data = b"".join(self.out)
        self.out.clear()
        return data
