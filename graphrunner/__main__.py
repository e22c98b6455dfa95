"""`python -m graphrunner`: the `graphrunner` console script."""

from __future__ import annotations

from graphrunner.cli import main

if __name__ == "__main__":
    main(prog_name="graphrunner")
