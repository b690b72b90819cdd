"""Anthropic Messages API (`POST /v1/messages`)."""
