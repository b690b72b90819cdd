"""`doctor --probe`: a 1-token call to each routed target, and a reachability check of native providers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switch.config import Settings
    from switch.routing.presets import Preset

from switch.checks.base import Check, check

PROBE_TIMEOUT_S = 20.0
REACH_TIMEOUT_S = 5.0


def probe_targets(settings: Settings, targets: set[str]) -> list[Check]:
    """A 1-token call to each routed target, sent exactly as the proxy sends it (path and credentials)."""
    import httpx

    from switch import keys
    from switch.config import NATIVE
    from switch.errors import SwitchError
    from switch.routing.resolve import resolve_target
    from switch.upstream_api import auth_headers, endpoint

    results: list[Check] = []
    for reference in sorted(targets - {NATIVE}):
        if reference.partition("/")[0] not in settings.providers:
            continue  # reported where it is named
        target = resolve_target(settings, reference)
        if target.api == "litellm":
            # Probing would import LiteLLM (seconds) and speak each provider's own API: the first call says more.
            results.append(
                check(
                    f"probe:{reference}",
                    True,
                    f"{reference}: served through LiteLLM ({target.litellm_provider}); not probed",
                )
            )
            continue
        try:
            key, _source = keys.lookup(target.provider, target.api_key_env)
        except SwitchError:
            key = None  # the key checks say why
        if key is None and target.keyless:
            key = ""
        if key is None:
            # No call can be made without a key (the key check says so); whether it answers still matters.
            results.append(reach(f"probe:{reference}", target.api, target.base_url, f"[providers.{target.provider}]"))
            continue
        if target.api == "anthropic":
            body: dict[str, Any] = {
                "model": target.model,
                "max_tokens": 1,
                "messages": [{"role": "user", "content": "ping"}],
            }
        elif target.api == "openai-responses":
            body = {"model": target.model, "input": "ping", "max_output_tokens": 16}
        else:
            body = {
                "model": target.model,
                "messages": [{"role": "user", "content": "ping"}],
                "max_completion_tokens": 1,
            }
        url, headers = endpoint(target.api, target.base_url), dict(auth_headers(target.api, key))
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=PROBE_TIMEOUT_S, trust_env=False)
            ok = response.status_code < 400
            detail = f"{reference}: HTTP {response.status_code}"
            if not ok:
                detail += " " + response.text[:160].replace(key, "***")
        except httpx.HTTPError as exc:
            ok, detail = False, f"{reference}: cannot reach {url} ({type(exc).__name__})"
        results.append(
            check(
                f"probe:{reference}",
                ok,
                detail,
                f"check the key (switch keys set {target.provider}), the model name and [providers.{target.provider}] "
                "base_url in config.toml",
            )
        )
    return results


def native_apis(preset: Preset) -> set[str]:
    """The native upstream APIs some route of `preset` sends calls to (each harness has its own)."""
    from switch.config import NATIVE
    from switch.routing.classify import ROLES

    own = {"claude-code": ("anthropic",), "codex": ("openai-responses",), "langchain": ("openai-responses",)}
    apis: set[str] = set()
    for section, routes in preset.sections.items():
        chains = [preset.chain(section, role) for role in ROLES]
        chains += [preset.chain(section, "orchestrator", family) for family in routes.families]
        chains += [preset.chain(section, "orchestrator", kind=kind) for kind in routes.kinds]
        if any(NATIVE in chain for chain in chains):
            # [default] serves every harness without its own table: Claude Code's API or OpenAI's.
            apis.update(own.get(section, ("anthropic", "openai-responses")))
    return apis


def probe_native(settings: Settings, preset: Preset) -> list[Check]:
    """Whether each native provider the active preset routes to answers at all (no credentials needed)."""
    from switch.config import NATIVE
    from switch.routing.resolve import resolve_target

    results: list[Check] = []
    for api in sorted(native_apis(preset)):
        target = resolve_target(settings, NATIVE, api)  # type: ignore[arg-type]
        table = f"[providers.{target.provider}]"
        results.append(reach(f"probe:native ({target.provider})", api, target.base_url, table))
    return results


def reach(name: str, api: str, base_url: str, table: str) -> Check:
    """Whether `base_url` answers HTTP at `api`'s endpoint; any answer below 500 (401, 404 included) counts.

    Native calls carry the harness's own credentials, which doctor does not have: reaching the host is
    what can be checked, and what a dead route gets wrong (a harness retries for minutes)."""
    import httpx

    from switch.upstream_api import endpoint

    url = endpoint(api, base_url)
    fix = (
        f"make {base_url} reachable (network, VPN, firewall) or correct {table} base_url in config.toml; "
        "meanwhile route around it: switch use kimi-k3"
    )
    try:
        response = httpx.post(url, json={}, timeout=REACH_TIMEOUT_S, trust_env=False)
    except httpx.TimeoutException as exc:
        return check(name, False, f"{url} did not answer within {REACH_TIMEOUT_S:g} s ({type(exc).__name__})", fix)
    except httpx.HTTPError as exc:
        return check(name, False, f"cannot reach {url} ({type(exc).__name__}: {exc})", fix)
    if response.status_code >= 500:
        return check(name, False, f"{url} answers HTTP {response.status_code}: the provider is failing", fix)
    return check(name, True, f"{url} is reachable (HTTP {response.status_code} without credentials)")
