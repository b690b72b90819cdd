"""Deciding where a call goes: classification, presets, route resolution."""
