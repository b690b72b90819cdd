"""The login service that keeps this home's proxy up: systemd user units on Linux, a launchd agent on macOS."""
