"""``mslm migrate`` and ``mslm import-model`` (registered with the ``mslm`` command through
the ``mslm.commands`` entry points)."""

from __future__ import annotations

import argparse
import logging

log = logging.getLogger("mslm.store")


def migrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "migrate", help="upgrade the job store's schema (deployments run it before the API starts)"
    )
    p.add_argument("--revision", default="head")
    p.set_defaults(handler=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    from mslm_settings import get_settings

    from .migrate import current_revision, upgrade

    url = get_settings().sqlalchemy_url
    upgrade(url, args.revision)
    log.info("database schema at %s", current_revision(url))
    return 0


def import_model(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-model", help="copy a model bundle into the store (verified)")
    p.add_argument(
        "path",
        help="bundle directory (mslm train output; mslm export first to "
        "serve it with ONNX Runtime)",
    )
    p.add_argument("--activate", action="store_true", help="serve it (every replica follows)")
    p.set_defaults(handler=run_import_model)


def run_import_model(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mslm_settings import get_settings

    from .db import session_factory
    from .migrate import upgrade
    from .service import import_bundle, set_active_model

    settings = get_settings()
    if settings.auto_migrate:
        upgrade(settings.sqlalchemy_url)
    with session_factory(settings.sqlalchemy_url)() as session:
        model = import_bundle(settings, session, Path(args.path))
        if args.activate:
            set_active_model(session, model.id)
    print(model.id)
    return 0
