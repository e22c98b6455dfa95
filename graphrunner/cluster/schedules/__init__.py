"""Periodic schedules (DESIGN §12): declared in a graph's `config.schedules` or added at run time,
fired by every worker's and beat's housekeeping, each tick exactly once (docs/schedules.md).

The spec is part of the graph model (`graphrunner/model/schedules.py`); here are `timing` (tick
times), `store` (Redis), `firing` (`Scheduler`, what housekeeping runs), `declared` (the graph
path's schedules registered) and `admin` (`Client.schedules`). Importing this package imports
none of them.
"""
