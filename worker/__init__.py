"""The Celery side of the service: the application (``celery_app``), its tasks (``tasks``:
thin adapters) and what they run (``runner``: a training job or an evaluation, from a row of
the store to a bundle or metrics). Depends on ``store`` and ``mslm_core``, never on ``api``."""
