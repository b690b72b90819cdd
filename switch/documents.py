"""Documents for upstreams that cannot read them: a PDF becomes its text, extracted with pypdf.

The translated path calls `for_upstream` on the IR request before the outbound writer, only when
`has_documents` finds one. What the upstream's API reads natively stays a document (an Anthropic
upstream takes PDF and text documents, a Responses upstream PDFs as `input_file`); everything else
becomes labelled text with page markers, or a short note saying why it could not be read, so the
model is never told a file was empty and a conversation never fails on every later turn. Nothing
is ever fetched. Claude Code resends the same PDF every turn, so extraction is cached by content hash.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import hashlib
import io
import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from switch.protocols.documents import PDF, labelled, plain_text, unreadable
from switch.protocols.ir import DocumentPart, Message, Part, Request, TextPart, ToolResultPart

MAX_CHARS = 200_000
"""Extracted text kept per document; a longer one is cut with a note saying so."""
CACHE_SIZE = 16
CACHE_CHARS = 1_000_000
"""Extracted characters the cache holds at most, all entries together (16 full ones would be 3.2 million)."""
_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/x-yaml", "application/yaml"})

if TYPE_CHECKING:
    from pypdf import PdfReader


def has_documents(request: Request) -> bool:
    """Whether any message (or tool result) of `request` holds a document part."""
    for message in request.messages:
        for part in message.parts:
            if type(part) is DocumentPart:
                return True
            if type(part) is ToolResultPart:
                for item in part.content:
                    if type(item) is DocumentPart:
                        return True
    return False


async def for_upstream(request: Request, api: str) -> Request:
    """`request` with every document the `api` upstream cannot read turned into text (off the event loop)."""
    return await asyncio.to_thread(readable_for, request, api)


def readable_for(request: Request, api: str) -> Request:
    """`request` with every document the `api` upstream cannot read turned into text."""
    return dataclasses.replace(request, messages=tuple(_message(message, api) for message in request.messages))


def _message(message: Message, api: str) -> Message:
    parts: list[Part] = []
    changed = False
    for part in message.parts:
        if isinstance(part, DocumentPart):
            parts.append(_for_api(part, api))
            changed = True
        elif isinstance(part, ToolResultPart) and any(isinstance(item, DocumentPart) for item in part.content):
            content = tuple(_for_api(item, api) if isinstance(item, DocumentPart) else item for item in part.content)
            parts.append(dataclasses.replace(part, content=content))
            changed = True
        else:
            parts.append(part)
    return Message(message.role, tuple(parts)) if changed else message


def _is_pdf(part: DocumentPart) -> bool:
    if part.media_type == PDF:
        return True
    if part.media_type not in (None, "", "application/octet-stream"):
        return False
    # "JVBER" is "%PDF" in base64: OpenAI callers may send bare base64 without a media type.
    return (part.data or "").startswith("JVBER") or (part.name or "").lower().endswith(".pdf")


def _for_api(part: DocumentPart, api: str) -> TextPart | DocumentPart:
    """The document as the `api` upstream can take it: itself, or the text standing in for it."""
    if api == "anthropic":
        if part.anthropic_block is not None and part.data is None:
            return part  # text, content, URL and file sources, as the Anthropic caller sent them
        if part.data is not None and _is_pdf(part):
            return dataclasses.replace(part, media_type=PDF)
        if part.url is not None or part.text is not None:
            return part
    elif api == "openai-responses":
        if part.data is not None and _is_pdf(part):
            return dataclasses.replace(part, media_type=PDF)
        if part.url is not None or (part.file_id is not None and part.anthropic_block is None):
            return part
    return TextPart(text_of(part))


def text_of(part: DocumentPart) -> str:
    """The text that stands in for `part`: its own text, its extracted text, or why it cannot be read."""
    stand_in = plain_text(part)
    if stand_in is not None:
        return stand_in.text
    if part.url is not None:
        return unreadable(part, "it is given by URL, and switch does not fetch files for this upstream")
    if part.file_id is not None:
        return unreadable(part, "it is a file stored with the caller's provider, which this upstream cannot see")
    try:
        raw = base64.b64decode(part.data or "")
    except (binascii.Error, ValueError):
        return unreadable(part, "its base64 data is not valid")
    if _is_pdf(part) or raw.startswith(b"%PDF"):
        return _pdf_text(part, raw)
    media_type = part.media_type or ""
    if media_type.startswith("text/") or media_type in _TEXT_TYPES:
        return labelled(part, _capped(raw.decode("utf-8", errors="replace")))
    return unreadable(part, f"switch cannot read documents of type '{media_type[:60] or 'unknown'}'")


def _capped(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    return text[:MAX_CHARS] + f"\n[document text cut at {MAX_CHARS} characters by switch]"


def _pdf_text(part: DocumentPart, raw: bytes) -> str:
    pages, body = EXTRACTIONS.extract(raw)
    if pages is None:
        return unreadable(part, body)
    return labelled(part, body, f": text extracted by switch from its {pages} PDF page{'s' if pages != 1 else ''}")


def extract_pdf(raw: bytes) -> tuple[int | None, str]:
    """(page count, the text with `--- page N ---` markers), or (None, why it cannot be read); never raises."""
    # Imported on first use: it takes ~50 ms, and most proxies never see a PDF.
    from pypdf import PdfReader

    # pypdf logs a warning for each flaw it tolerates in a malformed file; the note the model gets
    # already says when a file could not be read.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(raw))
        if reader.is_encrypted and not _decrypts(reader):
            return None, "it is encrypted with a password"
        chunks: list[str] = []
        size = 0
        count = len(reader.pages)
        found_text = False
        for number, page in enumerate(reader.pages, start=1):
            text = page.extract_text() or ""
            found_text = found_text or bool(text.strip())
            chunk = f"--- page {number} ---\n{text}"
            if size + len(chunk) > MAX_CHARS:
                chunks.append(chunk[: MAX_CHARS - size])
                left = count - number
                chunks.append(
                    f"[document text cut at {MAX_CHARS} characters by switch: page {number} is incomplete"
                    + (f" and {left} more page{'s are' if left != 1 else ' is'} not shown]" if left else "]")
                )
                break
            chunks.append(chunk)
            size += len(chunk) + 1
    except Exception as exc:  # pypdf raises many kinds (and RecursionError) on malformed files
        detail = str(exc).splitlines()[0][:100] if str(exc) else type(exc).__name__
        return None, f"it is not a readable PDF ({detail})"
    if not found_text:
        return None, f"no text could be extracted from its {count} page{'s' if count != 1 else ''} (scanned images?)"
    return count, "\n".join(chunks)


def _decrypts(reader: PdfReader) -> bool:
    """Whether an encrypted PDF opens without a password (one locked only against editing does)."""
    try:
        return bool(reader.decrypt(""))
    except Exception:
        return False


class ExtractionCache:
    """An LRU of extraction results by SHA-256 of the PDF's bytes, bounded in entries and in characters; thread-safe."""

    def __init__(self, size: int, max_chars: int = CACHE_CHARS) -> None:
        self.size = size
        self.max_chars = max_chars
        self._entries: OrderedDict[bytes, tuple[int | None, str]] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0
        self.chars = 0
        """Characters of extracted text held now."""

    def extract(self, raw: bytes) -> tuple[int | None, str]:
        """`extract_pdf(raw)`, computed once per distinct file while it stays cached."""
        key = hashlib.sha256(raw).digest()
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        result = extract_pdf(raw)
        with self._lock:
            self.misses += 1
            if key not in self._entries:
                self._entries[key] = result
                self.chars += len(result[1])
            self._entries.move_to_end(key)
            # Texts run to MAX_CHARS each: a count alone would let a few large files hold megabytes.
            while len(self._entries) > self.size or (self.chars > self.max_chars and len(self._entries) > 1):
                _key, (_pages, dropped) = self._entries.popitem(last=False)
                self.chars -= len(dropped)
        return result


EXTRACTIONS = ExtractionCache(CACHE_SIZE)
"""The process-wide cache the translated path uses."""
