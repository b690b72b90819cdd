"""Links and shared directories are never followed into damage: harness settings kept in a dotfiles repo are
written through their links (and restored through them), a linked key file is refused, and a shared
SWITCH_HOME (sticky or world-writable, like /tmp) is refused without its mode being touched."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest

from tests.commands import run_switch


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _one_switch_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("switch: ") and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_harness_settings_in_a_dotfiles_repo_are_written_and_restored_through_their_link(
    harness: str, user_home: Path, isolated_home: Path, tmp_path: Path
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    if harness == "claude":
        target, link = dotfiles / "settings.json", user_home / ".claude" / "settings.json"
        original = b'{\n  "theme": "dark"\n}\n'
    else:
        target, link = dotfiles / "config.toml", user_home / ".codex" / "config.toml"
        original = b'model = "gpt-5.5"  # my own\n'
    target.write_bytes(original)
    target.chmod(0o640)
    link.symlink_to(target)

    on = run_switch(harness, "on")
    assert on.returncode == 0, on.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    written = target.read_bytes()
    assert written != original and _mode(target) == 0o640
    if harness == "claude":
        assert b"ANTHROPIC_BASE_URL" in written and b'"theme": "dark"' in written
    else:
        assert "switch" in tomllib.loads(written.decode())["model_providers"]
    assert sorted(path.name for path in dotfiles.iterdir()) == [target.name]  # no temporary file left

    off = run_switch(harness, "off")
    assert off.returncode == 0, off.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == original


def test_a_linked_key_file_is_refused_and_neither_link_nor_target_changes(isolated_home: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "keys.json"
    target.parent.mkdir()
    target.write_text("{}")
    target.chmod(0o644)
    (isolated_home / "keys.json").symlink_to(target)

    stored = run_switch("keys", "set", "baseten", stdin="sk-test-0123456789abcdef\n")

    assert stored.returncode != 0
    line = _one_switch_line(stored.stderr)
    assert "keys.json is a symbolic link" in line and "remove the link" in line
    assert "sk-test" not in stored.stdout + stored.stderr
    assert (isolated_home / "keys.json").is_symlink()
    assert target.read_text() == "{}" and _mode(target) == 0o644


@pytest.mark.parametrize("through_a_link", [False, True], ids=["the-directory", "a-link-to-it"])
def test_a_shared_sticky_switch_home_is_refused_and_keeps_its_mode(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch, through_a_link: bool
) -> None:
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp is
    home = shared
    if through_a_link:
        home = tmp_path / "home-link"
        home.symlink_to(shared)
    monkeypatch.setenv("SWITCH_HOME", str(home))

    for command in (("keys", "set", "baseten"), ("serve", "--port", "0")):
        result = run_switch(*command, stdin="sk-test-0123456789abcdef\n")
        assert result.returncode != 0, command
        line = _one_switch_line(result.stderr)
        assert "is shared with other users (mode 1777)" in line and "SWITCH_HOME" in line, line
        assert _mode(shared) == 0o1777
    assert list(shared.iterdir()) == []


def test_a_private_switch_home_behind_a_link_is_used_and_the_link_kept(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = tmp_path / "mine"
    private.mkdir(mode=0o700)
    link = tmp_path / "home-link"
    link.symlink_to(private)
    monkeypatch.setenv("SWITCH_HOME", str(link))

    stored = run_switch("keys", "set", "baseten", stdin="sk-test-0123456789abcdef\n")

    assert stored.returncode == 0, stored.stderr
    assert link.is_symlink() and _mode(private) == 0o700
    assert _mode(private / "keys.json") == 0o600
