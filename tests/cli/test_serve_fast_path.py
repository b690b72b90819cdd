"""A plain `switch serve` becomes the proxy before typer is imported, with exactly the argv typer's command gives.

Whoever starts the proxy (a shell, `switch up`, systemd, launchd) waits for it to answer; typer and the
command modules used to cost as much start-up as the proxy itself. The fast path reads only the options it
is sure of and leaves everything else (help, mistakes, repeats) to typer, so both ways must agree: whatever
the fast path accepts, typer accepts and turns into the same proxy argv.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from switch.cli import commands
from switch.cli import serve as serve_command
from switch.cli.proxy_process import plain_serve_arguments

VALUED = ["--host", "--port", "--log-level"]
GOOD_VALUES = st.one_of(st.integers(0, 65535).map(str), st.sampled_from(["127.0.0.1", "::1", "info", "debug", ""]))
ODD_TOKENS = st.one_of(
    st.sampled_from(["--help", "-h", "--bogus", "--fail-open=1", "--", "--Port", "--hos", "--port", "--fail-open"]),
    st.sampled_from(["65536", "99999", "08", "+5", " 5", "-1", "٣", "1e3", "--port=70000", "--port=-1", "--host="]),
    st.text(alphabet="0123456789-=. abc", max_size=6),
)


@st.composite
def serve_argvs(draw: st.DrawFn) -> list[str]:
    """Argument lists after `switch serve`: each option at most once, spelt either way, in any order; some with
    an odd token (help, a typo, a repeat, a stray or out-of-range value) put in anywhere."""
    argv: list[str] = []
    for name in draw(st.permutations(VALUED + ["--fail-open"])):
        if not draw(st.booleans()):
            continue
        if name == "--fail-open":
            argv.append(name)
        elif draw(st.booleans()):
            argv += [name, draw(GOOD_VALUES)]
        else:
            argv.append(f"{name}={draw(GOOD_VALUES)}")
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        argv.insert(draw(st.integers(0, len(argv))), draw(ODD_TOKENS))
    return argv


def typer_serve_arguments(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str] | None:
    """The proxy argv typer's `serve` command would exec for `switch serve ARGV`, or None when it refuses ARGV."""
    became: list[list[str]] = []
    monkeypatch.setattr(serve_command, "become_proxy", became.append, raising=True)
    result = CliRunner().invoke(commands.app, ["serve", *argv], prog_name="switch")
    if result.exit_code != 0 or not became:
        return None
    return became[0]


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=serve_argvs())
@example(argv=["--port", "8742"])
@example(argv=["--port=0", "--host", "127.0.0.1", "--log-level", "info", "--fail-open"])
@example(argv=["--host", ""])
@example(argv=["--port", "65536"])
@example(argv=["--port", "08"])
@example(argv=["--port", "1", "--port", "2"])
def test_what_the_fast_path_accepts_typer_accepts_and_execs_the_same_way(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = plain_serve_arguments(argv)
    event("fast path" if fast is not None else "left to typer")
    if fast is not None:
        assert typer_serve_arguments(argv, monkeypatch) == fast


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--port", "0"],
        ["--port=8742"],
        ["--host", "127.0.0.1", "--port", "9000", "--log-level", "debug", "--fail-open"],
        ["--fail-open", "--log-level=info"],
    ],
    ids=lambda argv: " ".join(argv) or "no options",
)
def test_the_ways_users_start_the_proxy_take_the_fast_path(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The forms in the README, `switch up` and the service units: none of them should wait for typer.
    fast = plain_serve_arguments(argv)
    assert fast is not None
    assert fast == typer_serve_arguments(argv, monkeypatch)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["-h"],
        ["--port", "99999"],
        ["--port", "high"],
        ["--bogus"],
        ["--port"],
        ["--port", "1", "--port", "2"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_help_and_mistakes_are_left_to_typer(argv: list[str]) -> None:
    assert plain_serve_arguments(argv) is None


def test_serve_help_is_still_typers(isolated_home: Path) -> None:
    from tests.commands import run_switch

    result = run_switch("serve", "--help")
    assert result.returncode == 0, result.stderr
    assert "--fail-open" in result.stdout and "Run the proxy in the foreground" in result.stdout


def test_a_python_that_cannot_be_started_after_typer_is_one_line(isolated_home: Path) -> None:
    # A repeated option is left to typer (it takes the last), whose command then execs the proxy. The exec
    # fails (this Python's executable is gone, as when its venv is rebuilt under it): one `switch: …` line,
    # not a traceback.
    import subprocess
    import sys

    argv = ["--port", "1", "--port", "0"]
    code = (
        "import sys; sys.executable = '/nonexistent/python'; "
        f"sys.argv = ['switch', 'serve', *{argv!r}]; from switch.cli import main; main()"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("switch: "), result.stderr
    assert result.returncode == 1 and "/nonexistent/python" in lines[0], result.stderr
