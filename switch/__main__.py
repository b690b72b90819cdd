"""`python -m switch` runs the CLI."""

from switch.cli import main

main()
