"""`python -m tracking` runs the `tracking` command."""

from tracking.cli import main

main()
