"""Codex's remote compaction v2, served on a translated route.

Codex (its built-in `openai` provider, 0.171) ends a compaction request's input with
`{"type": "compaction_trigger"}` and accepts only an answer holding exactly one output item of type
`compaction`, whose `encrypted_content` it keeps and sends back in later requests in place of the
history it replaced. OpenAI's content is encrypted for OpenAI alone; on a translated route switch
runs the summary as an ordinary turn on the conversation's target and packs the summary text into
its own `encrypted_content` (`swc1.<base64url(zlib(text))>`), which it reads back as a user message
when the item returns. Pure, like every protocol module.

Codex's other input items beyond the Responses API are read here too: `agent_message` (multi-agent mail)
becomes a user message, and an item type no chat model can be given is noted in `provider_data[UNCARRIED]`:
native routes pass the body through untouched, every other route answers 400 with the note.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from switch.protocols.ir import Message, Part, Request, TextPart, ToolChoice
from switch.protocols.openai_responses.items import response_object
from switch.protocols.openai_responses.stream import ItemState, StreamEncoder

# provider_data keys: the request ends in Codex's compaction trigger; an input item no other API can carry.
COMPACTION_TRIGGER = "compaction_trigger"
UNCARRIED = "uncarried_item"
_PREFIX = "swc1."
# A summary is a few KB; a token that inflates past this is not one switch wrote.
_MAX_SUMMARY_BYTES = 4 * 1024 * 1024
SUMMARY_INSTRUCTION = (
    "Context checkpoint: the conversation above is about to be replaced by a summary you write now, and "
    "another turn of the work will continue from that summary alone. Write it for that reader: the user's "
    "goal and constraints, what has been done so far (files, commands, results), decisions and their "
    "reasons, what is still open and the next step, and any exact names, paths or values needed to go on. "
    "Answer with the summary only, as plain text, and call no tools."
)
RESTORED_PREFIX = "Summary of the earlier part of this conversation, written when its context was compacted:\n\n"


def encode_summary(text: str) -> str:
    """The `encrypted_content` switch gives a compaction item: the summary, packed."""
    return _PREFIX + base64.urlsafe_b64encode(zlib.compress(text.encode(), 6)).rstrip(b"=").decode("ascii")


def decode_summary(token: Any) -> str | None:
    """The summary packed by `encode_summary`, or None for any other token (OpenAI's own, or damaged)."""
    if not isinstance(token, str) or not token.startswith(_PREFIX):
        return None
    packed = token[len(_PREFIX) :]
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4)), _MAX_SUMMARY_BYTES)
        if inflater.unconsumed_tail or not inflater.eof:
            return None
        return raw.decode()
    except (binascii.Error, zlib.error, UnicodeDecodeError, ValueError):
        return None


def restored_message(summary: str) -> Message:
    """The user message that stands for a compaction item on a chat upstream."""
    return Message("user", (TextPart(RESTORED_PREFIX + summary),))


def summary_request(request: Request) -> Request:
    """The summary turn for a compaction request: its history, then switch's instruction; tools stay
    offered (the upstream's prompt cache holds them) but none may be called."""
    messages = (*request.messages, Message("user", (TextPart(SUMMARY_INSTRUCTION),)))
    return replace(request, messages=messages, tool_choice=ToolChoice("none") if request.tools else None)


def compaction_item(item_id: str, summary: str) -> dict[str, Any]:
    """The one output item a compaction answer holds."""
    return {"id": item_id, "type": "compaction", "encrypted_content": encode_summary(summary)}


def summary_text(parts: tuple[Part, ...] | list[Part]) -> str:
    """The summary in an answer: its text, without reasoning or (refused) calls."""
    return "".join(part.text for part in parts if isinstance(part, TextPart))


class CompactionEncoder(StreamEncoder):
    """A Responses stream whose only output item is the compaction: the summary's text is gathered, not
    streamed (Codex reads only `output_item.done` and `response.completed` here), and reasoning and
    call deltas are left out."""

    def __init__(self, response_id: str, request: Request, next_id: Callable[[], str], created_at: int) -> None:
        super().__init__(response_id, request, next_id, created_at)
        self._summary: list[str] = []

    @property
    def content_started(self) -> bool:
        """Nothing reaches the client before the summary is whole."""
        return bool(self.output)

    def reasoning_delta(self, text: str) -> None:
        """Left out: the summary is the answer."""

    def text_delta(self, text: str) -> None:
        """Gather the summary."""
        self._summary.append(text)
        self.emitted_chars += len(text)

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        """Left out: a summary turn calls no tools."""

    def tool_call_delta(self, index: int, fragment: str) -> None:
        """Left out with its call."""

    def end(self) -> None:
        """Emit the compaction item and the terminal event."""
        self.start()
        item = compaction_item("cmp_" + self._next_id(), "".join(self._summary))
        self._emit("response.output_item.added", {"output_index": 0, "item": item})
        self._emit("response.output_item.done", {"output_index": 0, "item": item})
        self.output.append(item)
        # Completed even when the summary hit the token limit: a cut summary still replaces the history,
        # while Codex treats anything but `response.completed` as a failed compaction.
        final = response_object(
            self.response_id, self.request, self.output, "completed", self.final_usage, self.created_at
        )
        self._emit("response.completed", {"response": final})
        self.state = ItemState.DONE


ContentReader = Callable[[Any, str], list[Any]]


def codex_item_message(
    item: dict[str, Any], kind: str, index: int, provider_data: dict[str, Any], read_content: ContentReader
) -> Message | None:
    """The user message a Codex item stands for (a compaction's summary, an agent_message's text), or None
    after noting in `provider_data` why the item cannot be carried; `read_content` reads content parts."""
    if kind == "agent_message":
        # Mail between Codex threads (a subagent's task, its final answer); its text names sender and recipient.
        content = item.get("content")
        if isinstance(content, list):
            # The payload part: plain text on a custom provider (Codex encrypts it only for OpenAI).
            content = [
                {"type": "input_text", "text": block.get("encrypted_content")}
                if isinstance(block, dict) and block.get("type") == "encrypted_content"
                else block
                for block in content
            ]
        return Message("user", tuple(read_content(content, f"input[{index}].content")))
    if kind == "compaction":
        summary = decode_summary(item.get("encrypted_content"))
        if summary is not None:
            return restored_message(summary)
        message = (
            f"input[{index}] is a 'compaction' item whose encrypted_content only OpenAI can read (it was made by "
            "OpenAI's remote compaction), so this route's model cannot be given the history it replaces; continue "
            "this conversation on the native route, or start a new one"
        )
    else:
        message = (
            f"input[{index}] has type '{kind}', which switch cannot carry to this route's model (it would have to "
            "be dropped); serve this conversation on the native route"
        )
    # Noted, not raised: the native route passes the body through and OpenAI reads it (the first item names it).
    provider_data.setdefault(UNCARRIED, message)
    return None
