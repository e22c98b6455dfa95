"""Performance harness: graphrunner against a bare Celery baseline on the same Redis (DESIGN §9)."""
