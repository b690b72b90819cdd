"""Structured output (`OutputFormat`) in the three wire shapes, read from callers and written upstream.

Chat nests the schema fields under `response_format.json_schema`; Responses puts them flat in
`text.format`; Anthropic takes only `output_config.format = {type: "json_schema", schema}`, always
enforced, with no name, description or strict flag. A reader carries every type it is given (the
caller's own API, passed through, may know it); a writer refuses, with `UnsupportedFeatureError`,
what its API cannot say (json_object to Anthropic, vLLM's `regex` to OpenAI), so a caller never
gets free text where it asked for JSON.
"""

from __future__ import annotations

from typing import Any

from switch.protocols.fields import wrong_type
from switch.protocols.ir import OutputFormat, UnsupportedFeatureError

# OpenAI requires a schema name; a format from Anthropic has none.
DEFAULT_SCHEMA_NAME = "structured_output"


def _optional(fields: dict[str, Any], key: str, kind: type, expected: str, path: str) -> Any:
    value = fields.get(key)
    if value is None or isinstance(value, kind):
        return value
    raise wrong_type(f"{path}.{key}", expected, value)


def _format_type(value: Any, path: str) -> str:
    """The `type` of the format object at `path`, which must be an object."""
    if not isinstance(value, dict):
        raise wrong_type(path, "an object", value)
    kind = value.get("type")
    if not isinstance(kind, str):
        raise wrong_type(f"{path}.type", "a string", kind)
    return kind


def read_openai_format(value: Any, path: str, nested: bool) -> OutputFormat | None:
    """Chat's `response_format` (`nested`: fields under `json_schema`) or Responses' `text.format` → IR.

    `text` (and absence) is None: free text is what every API gives by default.
    """
    if value is None:
        return None
    kind = _format_type(value, path)
    if kind == "text":
        return None
    if kind != "json_schema":
        return OutputFormat(kind)
    fields: Any = value
    if nested:
        path += ".json_schema"
        fields = value.get("json_schema")
    if not isinstance(fields, dict):
        raise wrong_type(path, "an object", fields)
    return OutputFormat(
        "json_schema",
        schema=_optional(fields, "schema", dict, "an object", path),
        name=_optional(fields, "name", str, "a string", path),
        strict=_optional(fields, "strict", bool, "a boolean", path),
        description=_optional(fields, "description", str, "a string", path),
    )


def write_openai_format(output_format: OutputFormat, nested: bool, api: str) -> dict[str, Any]:
    """The IR format as chat's `response_format` (`nested`) or Responses' `text.format`, for upstream `api`."""
    if output_format.kind == "json_object":
        return {"type": "json_object"}
    if output_format.kind != "json_schema":
        raise UnsupportedFeatureError(
            f"structured output of type '{output_format.kind}' cannot be sent to this {api} upstream; "
            "use json_schema or json_object",
        )
    fields: dict[str, Any] = {"name": output_format.name or DEFAULT_SCHEMA_NAME}
    if output_format.description is not None:
        fields["description"] = output_format.description
    if output_format.schema is not None:
        fields["schema"] = output_format.schema
    if output_format.strict is not None:
        fields["strict"] = output_format.strict
    if nested:
        return {"type": "json_schema", "json_schema": fields}
    return {"type": "json_schema", **fields}


def read_anthropic_format(body: dict[str, Any]) -> OutputFormat | None:
    """Anthropic's `output_config.format` (or the beta's top-level `output_format`) → IR."""
    output_config = body.get("output_config")
    value: Any = output_config.get("format") if isinstance(output_config, dict) else None
    path = "output_config.format"
    if value is None:
        path, value = "output_format", body.get("output_format")
    if value is None:
        return None
    return OutputFormat(_format_type(value, path), _optional(value, "schema", dict, "an object", path))


def write_anthropic_format(output_format: OutputFormat) -> dict[str, Any]:
    """The IR format as Anthropic's `output_config.format`; OpenAI's name, description and strict have no place."""
    if output_format.kind == "json_object":
        raise UnsupportedFeatureError(
            "structured output of type json_object (any JSON object) cannot be sent to an anthropic upstream: "
            "Anthropic's structured outputs take only a JSON schema; ask for json_schema with a schema instead"
        )
    if output_format.kind != "json_schema":
        raise UnsupportedFeatureError(
            f"structured output of type '{output_format.kind}' cannot be sent to an anthropic upstream; "
            "use json_schema with a schema"
        )
    if output_format.schema is None:
        raise UnsupportedFeatureError(
            "a json_schema structured output without a schema cannot be sent to an anthropic upstream; "
            "include the schema"
        )
    return {"type": "json_schema", "schema": output_format.schema}
