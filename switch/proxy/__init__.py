"""The HTTP proxy: app, guard, relay, upstream clients."""
