"""The worker side of the service: settings shared with the API, the job store
(SQLAlchemy), the Celery application and its tasks. Depends on ``mslm_core``, never on
``api``."""
