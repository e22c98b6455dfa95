"""Messages on the broker: the Celery app, envelopes, publishing, the poison guard, signing, queues."""
