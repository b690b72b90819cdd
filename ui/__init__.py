"""The Textual dashboard (reads the ledger; never imports the proxy)."""
