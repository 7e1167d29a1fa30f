"""The data layer of the service: the job store's tables (``models``), engine and sessions
(``db``), the atomic state transitions of jobs and evaluations (``transitions``), creating and
deleting datasets, jobs, evaluations and models (``service``), where files live in the artifact
store (``paths``) and schema migrations (``migrate``, Alembic). Shared by the API and the
worker; depends on ``mslm_core`` and ``mslm_settings``, never on ``api`` or ``worker``."""
