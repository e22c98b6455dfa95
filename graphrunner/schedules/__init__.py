"""Periodic schedules (DESIGN §12): declared in a graph's `config.schedules` or added at run time,
fired by every worker's and beat's housekeeping, each tick exactly once (docs/schedules.md).

`spec` (the model), `timing` (tick times), `store` (Redis), `firing` (`Scheduler`) and
`admin` (`Client.schedules`). Importing this package imports none of them.
"""
