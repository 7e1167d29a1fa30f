"""The ``mslm`` command line: train, evaluate, annotate (DESIGN.md)."""

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

from .config import STRATEGIES, TrainConfig
from .errors import MSLMError
from .train import Callback

log = logging.getLogger("mslm")

# DESIGN.md's short spellings of some config fields
_ALIASES = {"learning_rate": ["--lr"]}


def _field_type(field: dataclasses.Field) -> type:
    hints = typing.get_type_hints(TrainConfig)
    tp = hints[field.name]
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    return tp


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        help_text = f.metadata.get("help", "")
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
        kwargs: dict = {"dest": f.name, "type": tp, "default": None}
        if f.name == "strategy":
            kwargs["choices"] = list(STRATEGIES)
        default = f.default if f.default is not dataclasses.MISSING else None
        parser.add_argument(
            flag, *_ALIASES.get(f.name, []), help=f"{help_text} (default: {default})", **kwargs
        )


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
    _add_config_flags(p)

    p = sub.add_parser("evaluate", help="score a bundle on an annotated corpus")
    p.add_argument("--model", required=True, help="bundle directory")
    p.add_argument("--data", required=True, help="CoNLL-IOB or JSONL corpus")
    p.add_argument("--output", help="write metrics.json here (also printed)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])

    p = sub.add_parser("annotate", help="extract entities from text (JSON out)")
    p.add_argument("--model", required=True, help="bundle directory")
    p.add_argument("texts", nargs="*", help="texts; none: read stdin")
    p.add_argument("--lines", action="store_true", help="stdin holds one text per line")
    p.add_argument("--min-confidence", type=float, default=0.0)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    return parser


class ProgressCallback(Callback):
    """A progress bar on a terminal, plain log lines otherwise."""

    def __init__(self, interactive: bool):
        self.interactive = interactive
        self.bar = None
        self.every = 50

    def on_train_begin(self, trainer) -> None:
        if self.interactive:
            from tqdm import tqdm

            st = trainer.state
            self.bar = tqdm(total=st.total_steps, initial=st.global_step, unit="step")
            # the bar shows epoch summaries itself; the library's log line would break it
            logging.getLogger("mslm_core.train").setLevel(logging.WARNING)

    def on_step_end(self, trainer) -> None:
        st = trainer.state
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(epoch=st.epoch + 1, loss=f"{st.loss:.4f}")
        elif st.global_step % self.every == 0:
            log.info(
                "step %d/%d epoch %d loss %.4f",
                st.global_step,
                st.total_steps,
                st.epoch + 1,
                st.loss,
            )

    def on_epoch_end(self, trainer) -> None:
        if self.bar is None:
            return  # mslm_core.train logs each epoch
        h = trainer.state.history[-1]
        f1 = "-" if h["dev_f1"] is None else f"{h['dev_f1']:.4f}"
        self.bar.write(
            f"epoch {h['epoch']} ({h['stage']}): loss {h['train_loss']:.4f}, dev F1 {f1}"
        )

    def on_train_end(self, trainer) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_train(args: argparse.Namespace) -> int:
    from .train import Trainer

    values = TrainConfig.from_json(args.config).to_dict() if args.config else {}
    for f in dataclasses.fields(TrainConfig):
        v = getattr(args, f.name, None)
        if v is not None:
            values[f.name] = v
    config = TrainConfig.from_dict(values)
    trainer = Trainer(
        config,
        args.output,
        callbacks=[ProgressCallback(sys.stderr.isatty())],
        overwrite=args.overwrite,
    )
    result = trainer.fit(resume=args.resume)
    summary = {"output": result["output"], "metrics": result["metrics"]}
    print(json.dumps(summary, indent=2))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .corpus import read_corpus
    from .evaluate import evaluate_corpus, masked_nll
    from .predict import load_predictor

    predictor = load_predictor(args.model, args.device)
    corpus = read_corpus(args.data)
    bundle = predictor.bundle  # type: ignore[attr-defined]
    nll, n_masked = _bundle_perplexity(bundle, corpus, args.device, masked_nll)
    metrics = evaluate_corpus(predictor, corpus, nll, n_masked)
    text = json.dumps(metrics, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def _bundle_perplexity(bundle, corpus, device, masked_nll):
    """Masked-token NLL on ``corpus`` with the bundle's own training masking (fixed seed)."""
    from .collate import MaskingCollator
    from .features import WindowBuilder
    from .train import masking_setup

    config = TrainConfig.from_dict(bundle.manifest["config"])
    if config.masking_strategy is None:
        return None, 0
    tok = bundle.tokenizer
    builder = WindowBuilder(tok, config.max_length)
    type_ids = {t: i for i, t in enumerate(bundle.manifest["types"])}
    sentences = [s for s in corpus.sentences if all(m.label in type_ids for m in s.mentions)]
    words = [s.words for s in sentences]
    windows = builder.training_windows(words, [s.mentions for s in sentences], type_ids)
    strategy, _, _ = masking_setup(config, windows, words)
    collator = MaskingCollator(strategy, tok.mask_token_id, tok.pad_token_id or 0)
    return masked_nll(bundle.model, windows, collator, config.seed, device)


def cmd_annotate(args: argparse.Namespace) -> int:
    from .predict import load_predictor

    texts = list(args.texts)
    if not texts:
        data = sys.stdin.read()
        texts = data.splitlines() if args.lines else [data]
    predictor = load_predictor(args.model, args.device)
    results = predictor.annotate(texts)
    out = {
        "model": {"id": predictor.bundle.id},  # type: ignore[attr-defined]
        "results": [
            {"entities": [e.to_dict() for e in ents if e.confidence >= args.min_confidence]}
            for ents in results
        ],
    }
    print(json.dumps(out, ensure_ascii=False, indent=2))
    return 0


COMMANDS = {"train": cmd_train, "evaluate": cmd_evaluate, "annotate": cmd_annotate}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        return COMMANDS[args.command](args)
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
