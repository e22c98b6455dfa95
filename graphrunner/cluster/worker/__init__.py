"""The worker process: Celery tasks, the runtime, heartbeats, housekeeping and the sweeper."""
