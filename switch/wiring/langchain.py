"""LangChain: a `switch` provider in deepagents-code's config, and the exports plain LangChain scripts need."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from switch.routing.classify import CLASSIFYING_MODEL, ROLES
from switch.wiring.records import load_record, proxy_url, save_record
from switch.wiring.toml_files import toml_off, toml_on


def deepagents_config_path() -> Path:
    """deepagents-code's config.toml."""
    return Path.home() / ".deepagents" / "config.toml"


# ChatOpenAI will not start without a non-empty key, and an `api_key_env` would make dcode demand that
# variable first. Switch serves routed calls with its own provider keys, so a stand-in given to the
# `switch` provider alone is all the client needs, and the user's own OPENAI_API_KEY stays untouched.
_PLACEHOLDER_KEY = "unused-placeholder"
DEEPAGENTS_MODEL = "switch:" + CLASSIFYING_MODEL
_ROLE_MODELS = [f"switch/{role}" for role in ROLES]


def deepagents_tables(port: int) -> dict[tuple[str, ...], dict[str, Any]]:
    """A deepagents-code provider that goes through switch over chat completions."""
    return {
        ("models", "providers", "switch"): {
            "base_url": proxy_url(port) + "/v1",
            "models": [CLASSIFYING_MODEL, *_ROLE_MODELS],
            "class_path": "langchain_openai:ChatOpenAI",
            "params": {"use_responses_api": False, "api_key": _PLACEHOLDER_KEY},
        }
    }


def langchain_on(port: int) -> Path:
    """Add a `switch` provider to deepagents-code's config (idempotent)."""
    path = deepagents_config_path()
    created = None if path.parent.exists() or load_record("langchain") is not None else str(path.parent)
    written = toml_on("langchain", path, deepagents_tables(port))[0]
    if created is not None:
        # `off` takes away the folder made here too, if nothing else has been put in it since.
        save_record("langchain", {**(load_record("langchain") or {}), "created_folder": created})
    return written


def langchain_off() -> Path | None:
    """Undo `langchain_on`, and remove ~/.deepagents/ when `on` made it and it is empty again."""
    created = (load_record("langchain") or {}).get("created_folder")
    restored = toml_off("langchain")
    if created:
        try:
            Path(created).rmdir()  # only an empty folder: deepagents' own files keep it
        except OSError:
            pass
    return restored


_CLIENT_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def langchain_env(port: int) -> dict[str, str]:
    """Exports for plain LangChain scripts: base URLs only, never a key."""
    return {"OPENAI_BASE_URL": proxy_url(port) + "/v1", "ANTHROPIC_BASE_URL": proxy_url(port)}


def langchain_env_notes() -> list[str]:
    """Comment lines printed after `langchain_env`'s exports."""
    roles = ", ".join(_ROLE_MODELS)
    return [
        f"# Use the model name {CLASSIFYING_MODEL}: switch then routes each call by its role"
        f" ({roles} force one role for every call).",
        "# Your OPENAI_API_KEY and ANTHROPIC_API_KEY are left as they are (native routes pass them on)."
        " If one is unset and the client refuses to start, set it yourself to any non-empty text:"
        " routes to other providers use the keys from `switch keys`.",
    ]


def langchain_child_env(port: int, environ: Mapping[str, str]) -> dict[str, str]:
    """What `switch run dcode` adds to the child's environment: base URLs, and a stand-in key only where none is set."""
    added = langchain_env(port)
    for variable in _CLIENT_KEY_VARIABLES:
        if not environ.get(variable):
            # The clients refuse an empty key; routed calls never use it, native ones fail as they would anyway.
            added[variable] = _PLACEHOLDER_KEY
    return added
