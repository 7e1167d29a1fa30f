"""``mslm migrate``, ``mslm import-model`` and ``mslm vocab import`` (registered with the
``mslm`` command through the ``mslm.commands`` and ``mslm.vocab_commands`` entry points)."""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from mslm_core.linking.athena import Counts
    from mslm_settings import Settings

log = logging.getLogger("mslm.store")


def migrate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def import_model(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("import-model", help="copy a model bundle into the store (verified)")
    p.add_argument(
        "path",
        help="bundle directory (mslm train output; mslm export first to "
        "serve it with ONNX Runtime)",
    )
    p.add_argument("--activate", action="store_true", help="serve it (every replica follows)")
    p.set_defaults(handler=run_import_model)


def _store() -> tuple[Settings, sessionmaker[Session]]:
    """The settings, and sessions on a store at the current schema (upgraded first unless
    MSLM_AUTO_MIGRATE is off)."""
    from mslm_settings import get_settings

    from .db import session_factory
    from .migrate import upgrade

    settings = get_settings()
    if settings.auto_migrate:
        upgrade(settings.sqlalchemy_url)
    return settings, session_factory(settings.sqlalchemy_url)


def run_import_model(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .models import import_bundle, set_active_model

    settings, sessions = _store()
    with sessions() as session:
        model = import_bundle(settings, session, Path(args.path))
        if args.activate:
            set_active_model(session, model.id)
    print(model.id)
    return 0


def import_vocabulary(vocab: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = vocab.add_parser(
        "import",
        help="check, index and store a vocabulary (TSV or OBO) that the service can link to",
    )
    p.add_argument(
        "path",
        nargs="?",
        help="TSV (id, name, synonym|synonym…) or OBO (*.obo); 'mesh': the packaged one",
    )
    p.add_argument(
        "--athena",
        metavar="DIR",
        help="the OMOP standard concepts of an Athena download (CONCEPT, CONCEPT_SYNONYM, "
        "CONCEPT_RELATIONSHIP)",
    )
    p.add_argument(
        "--warehouse",
        metavar="NAME",
        help="the OMOP standard concepts of this warehouse's vocabulary tables (MSLM_WAREHOUSES; "
        "read only)",
    )
    p.add_argument("--schema", default="cdm", help="--warehouse: the tables' schema (cdm)")
    from mslm_core.cli import athena_flags

    athena_flags(p)
    p.add_argument(
        "--rerank",
        nargs="?",
        const="minilm",
        metavar="ENCODER",
        help="re-rank candidates by this encoder's embeddings (default: minilm; needs torch)",
    )
    p.add_argument("--name", help="the name concepts carry (default: the file's own)")
    p.add_argument("--url", default="", help="a concept's page, {id} standing for its id")
    p.add_argument("--activate", action="store_true", help="link to it (every replica follows)")
    p.set_defaults(handler=run_import_vocabulary)


def build_athena(args: argparse.Namespace, settings: Settings, out: Path) -> Counts:
    """The OMOP linking vocabulary the import's flags ask for, written to ``out``."""
    from mslm_core.cli import athena_options
    from mslm_core.linking.athena import AthenaFiles, Tables, omop_vocabulary

    from .athena import WarehouseTables

    tables: Tables = (
        AthenaFiles(args.athena)
        if args.athena
        else WarehouseTables(settings, args.warehouse, args.schema)
    )
    types, sources = athena_options(args)
    return omop_vocabulary(tables, out, types, sources, name=args.name or "OMOP", work=out.parent)


def run_import_vocabulary(args: argparse.Namespace) -> int:
    import json

    from mslm_core.errors import ConfigError

    from .vocabularies import import_vocabulary, set_active_vocabulary

    given = [x for x in (args.path, args.athena, args.warehouse) if x]
    if len(given) != 1:
        raise ConfigError("give one of: a vocabulary file, --athena DIR, --warehouse NAME")
    settings, sessions = _store()
    settings.artifacts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=settings.artifacts) as tmp:
        if args.athena or args.warehouse:
            path = Path(tmp) / "omop.tsv"
            counts = build_athena(args, settings, path)
            log.info("OMOP concepts per type: %s; %d mapped", counts.concepts, counts.mapped)
        elif args.path == "mesh":
            from mslm_core.linking.builtin import DEFAULT_VOCABULARY as path
        else:
            path = Path(args.path)
        with sessions() as session:
            row = import_vocabulary(
                settings, session, path, path.name, args.name, args.url, rerank_encoder=args.rerank
            )
            if args.activate:
                set_active_vocabulary(session, row.id)
            summary = {"id": row.id, "name": row.name, "concepts": row.concepts}
            summary.update(names=row.names, rerank=args.rerank)
    print(json.dumps({**summary, "active": args.activate}))
    return 0
