"""The Celery app for Celery's own command line: `celery -A graphrunner inspect ping`.

`celery -A graphrunner` finds `app` here (Celery looks for a `celery` module in a package).
It is the app producers and workers share, configured from GRAPHRUNNER_* variables, so
`celery -A graphrunner status`, `inspect active|reserved|stats`, `control` and `events` talk
to graphrunner's workers. Start workers with `graphrunner worker`, not `celery worker`: only it
registers graphrunner's tasks, guard and housekeeping.
"""

from __future__ import annotations

from graphrunner.cluster.transport.app import create_app
from graphrunner.errors import ConfigurationError
from graphrunner.settings import Settings

_settings = Settings.from_env()
if not _settings.redis_url:
    raise ConfigurationError(
        "GRAPHRUNNER_REDIS_URL is not set: `celery -A graphrunner` needs the Redis the cluster uses"
    )
app = create_app(_settings)
