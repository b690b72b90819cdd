"""Widgets of the dashboard."""
