"""The harness versions the end-to-end tests run (bump here, in one place)."""

CLAUDE_CODE = "2.1.332"
CODEX = "0.171.0"
DEEPAGENTS_CODE = "0.1.88"
