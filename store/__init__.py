"""The data layer of the service: it owns every query and every commit. The tables
(``tables``), engine and sessions (``db``), schema migrations (``migrate``, Alembic) and the
state machine of jobs and evaluations (``transitions``); then one module per aggregate —
``datasets``, ``jobs``, ``evaluations``, ``registry`` (models), ``vocabularies``, ``keys``
(API keys), ``bulk`` (annotation jobs, their chunks and notes files) — over what they share:
the serving state (``serving``), who sees which rows and pages of them (``access``), quotas
(``quotas``), the files a row stands for (``files``, ``paths``), the queue new work is
announced on (``queue``) and the errors (``errors``). Shared by the API and the worker, whose
routes and tasks call these functions; depends on ``mslm_core`` and ``mslm_settings``, never
on ``api`` or ``worker``."""
