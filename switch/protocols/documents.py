"""Document parts: read from each API's wire shape, and the labelled text that stands in for one.

A document arrives as an Anthropic `document` block, a Chat Completions `file` part or a Responses
`input_file` part. Every field read is type-checked (a wrong type is a 400 naming its path); a
source switch does not know becomes a document with a `problem`, so the model is told it could not
be read instead of the whole conversation failing on every later turn. Extracting a PDF's text is
I/O-free but needs a third-party library, so it lives outside the protocols (`switch.documents`).
"""

from __future__ import annotations

from typing import Any

from switch.protocols.fields import wrong_type
from switch.protocols.ir import DocumentPart, TextPart

PDF = "application/pdf"


def _optional_str(source: dict[str, Any], key: str, path: str) -> str | None:
    value = source.get(key)
    if value is None or isinstance(value, str):
        return value
    raise wrong_type(f"{path}.{key}", "a string", value)


def _required_str(source: dict[str, Any], key: str, path: str) -> str:
    value = source.get(key)
    if not isinstance(value, str):
        raise wrong_type(f"{path}.{key}", "a string", value)
    return value


def _content_text(content: Any, path: str) -> str:
    """The text of an Anthropic `content` source: a string, or text blocks (other blocks are left out)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise wrong_type(path, "a string or an array", content)
    texts: list[str] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise wrong_type(f"{path}[{index}]", "an object", block)
        if block.get("type") == "text":
            texts.append(_required_str(block, "text", f"{path}[{index}]"))
    return "\n".join(texts)


def anthropic_document(block: dict[str, Any], container: str, index: int) -> DocumentPart:
    """An Anthropic `document` block at `container[index]` → IR."""
    at = f"{container}[{index}]"
    name = _optional_str(block, "title", at)
    source = block.get("source")
    if not isinstance(source, dict):
        raise wrong_type(f"{at}.source", "an object", source)
    kind = source.get("type")
    if not isinstance(kind, str):
        raise wrong_type(f"{at}.source.type", "a string", kind)
    media_type = _optional_str(source, "media_type", f"{at}.source")
    if kind == "base64":
        data = _required_str(source, "data", f"{at}.source")
        return DocumentPart(media_type, data=data, name=name, anthropic_block=block)
    if kind == "text":
        text = _required_str(source, "data", f"{at}.source")
        return DocumentPart(media_type or "text/plain", text=text, name=name, anthropic_block=block)
    if kind == "content":
        text = _content_text(source.get("content"), f"{at}.source.content")
        return DocumentPart("text/plain", text=text, name=name, anthropic_block=block)
    if kind == "url":
        url = _required_str(source, "url", f"{at}.source")
        return DocumentPart(media_type, url=url, name=name, anthropic_block=block)
    if kind == "file":
        file_id = _required_str(source, "file_id", f"{at}.source")
        return DocumentPart(media_type, file_id=file_id, name=name, anthropic_block=block)
    problem = f"its source type '{kind[:40]}' is not one switch knows"
    return DocumentPart(media_type, name=name, problem=problem, anthropic_block=block)


def _openai_file(fields: dict[str, Any], at: str, url_key: str | None) -> DocumentPart:
    name = _optional_str(fields, "filename", at)
    file_data = _optional_str(fields, "file_data", at)
    file_id = _optional_str(fields, "file_id", at)
    url = _optional_str(fields, url_key, at) if url_key else None
    if file_data is not None:
        if file_data.startswith("data:") and ";base64," in file_data:
            media_type, _, data = file_data[5:].partition(";base64,")
            return DocumentPart(media_type or None, data=data, name=name)
        return DocumentPart(None, data=file_data, name=name)  # bare base64; the bytes tell what it is
    if url is not None:
        return DocumentPart(None, url=url, name=name)
    if file_id is not None:
        return DocumentPart(None, file_id=file_id, name=name)
    return DocumentPart(None, name=name, problem="it has no file_data, file_id or file_url")


def chat_file(block: dict[str, Any], container: str, index: int) -> DocumentPart:
    """A Chat Completions `file` content part at `container[index]` → IR."""
    at = f"{container}[{index}].file"
    fields = block.get("file")
    if not isinstance(fields, dict):
        raise wrong_type(at, "an object", fields)
    return _openai_file(fields, at, None)


def responses_file(block: dict[str, Any], container: str, index: int) -> DocumentPart:
    """A Responses `input_file` content part at `container[index]` → IR."""
    return _openai_file(block, f"{container}[{index}]", "file_url")


def document_name(part: DocumentPart) -> str:
    """How a document is named in the text standing in for it: `document "x.pdf"`, or just `document`."""
    if part.name:
        return 'document "' + part.name.replace('"', "'") + '"'
    return "document"


def labelled(part: DocumentPart, text: str, detail: str = "") -> str:
    """`text` framed so the model knows which document it is and where it ends."""
    name = document_name(part)
    return f"[{name}{detail}]\n{text}\n[end of {name}]"


def unreadable(part: DocumentPart, reason: str) -> str:
    """The note that stands in for a document that cannot be read."""
    return f"[{document_name(part)} could not be read: {reason}]"


def plain_text(part: DocumentPart) -> TextPart | None:
    """The stand-in for a document that needs no extraction (plain text, or one known unreadable), else None."""
    if part.text is not None:
        return TextPart(labelled(part, part.text))
    if part.problem is not None:
        return TextPart(unreadable(part, part.problem))
    return None


def stand_in(part: DocumentPart) -> TextPart:
    """The text a writer sends for a document its upstream cannot take and nobody extracted."""
    return plain_text(part) or TextPart(unreadable(part, "this upstream cannot take it as a file"))
