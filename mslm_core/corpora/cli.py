"""``mslm corpora``: list, fetch, carry (archive → unpack) and prepare the public corpora."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import ConfigError
from . import clinical
from .pinned import corpora, default_cache, fetch_corpus, pack, unpack

GROUPS = {"clinical": clinical.CORPORA}  # a name that stands for several corpora


def _names(given: list[str]) -> list[str]:
    out: list[str] = []
    for name in given:
        for n in GROUPS.get(name, (name,)):
            if n not in out:
                out.append(n)
    return out


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"{flag}: expected NAME=PATH, got {item!r}")
        out[name] = path
    return out


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "corpora",
        help="public corpora at pinned commits (fetch, carry to a machine without internet)",
    )
    cmds = p.add_subparsers(dest="corpora_command", required=True)
    cache_help = "the corpus cache (default: MSLM_CORPUS_CACHE or ~/.cache/mslm/corpora)"

    q = cmds.add_parser("list", help="the corpora known, their licence, and what is cached")
    q.add_argument("--cache", help=cache_help)
    q.set_defaults(handler=cmd_list)

    q = cmds.add_parser(
        "fetch",
        help="fetch corpora at their pinned commits, each file checked against its sha256",
        description="NAMES: corpora from `mslm corpora list`, or 'clinical' (the four the "
        "clinical model is trained on). On a machine with internet, --archive also writes "
        "them into one file to carry to a machine without: `mslm corpora unpack FILE` there.",
    )
    q.add_argument("names", nargs="+", help="corpora, or 'clinical'")
    q.add_argument("--cache", help=cache_help)
    q.add_argument(
        "--from-git",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="read NAME from a local clone of its repository instead of GitHub",
    )
    q.add_argument(
        "--from-dir",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="read NAME's files from a local folder (e.g. BC5CDR-IOB=/data/BC5CDR-IOB)",
    )
    q.add_argument("--archive", help="also write the corpora into this tar (.tar or .tar.gz)")
    q.set_defaults(handler=cmd_fetch)

    q = cmds.add_parser(
        "unpack", help="fill the cache from an archive (every file checked against its pin)"
    )
    q.add_argument("archive")
    q.add_argument("--cache", help=cache_help)
    q.set_defaults(handler=cmd_unpack)

    q = cmds.add_parser(
        "prepare",
        help="the clinical recipe's dataset folders (train/dev/test files to upload or train on)",
    )
    q.add_argument("--cache", help=cache_help)
    q.set_defaults(handler=cmd_prepare)


def cmd_list(args: argparse.Namespace) -> int:
    cache = Path(args.cache) if args.cache else default_cache()
    rows = [
        {
            "name": c.name,
            "source": f"github.com/{c.repository}@{c.commit[:12]}",
            "licence": c.licence,
            "files": len(c.files),
            "cached": c.cached(cache),
            "clinical_recipe": c.name in clinical.CORPORA,
            "description": c.description,
        }
        for c in corpora().values()
    ]
    print(json.dumps({"cache": str(cache), "corpora": rows}, indent=2))
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    names = _names(args.names)
    clones = _pairs(args.from_git, "--from-git")
    folders = _pairs(args.from_dir, "--from-dir")
    for name in names:
        root = fetch_corpus(name, args.cache, git_dir=clones.get(name), from_dir=folders.get(name))
        print(root)
    if args.archive:
        print(pack(args.archive, names, args.cache))
    return 0


def cmd_unpack(args: argparse.Namespace) -> int:
    for name in unpack(args.archive, args.cache):
        print(name)
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    for corpus in clinical.CORPORA:
        print(json.dumps({"corpus": corpus, "folder": str(clinical.prepare(corpus, args.cache))}))
    return 0
