"""Presets shipped with switch, one TOML file each (a package so installs carry the files)."""
