"""Run a protocol: every run through the core training code, one result file per run.

A run whose result file exists is skipped, so an interrupted benchmark resumes where it
stopped; a run interrupted mid-training resumes from its last checkpoint (the trainer's
exact resume). Test scores are honest — the product's prediction path on unmasked text
(``mslm evaluate``'s code) — and, for ELM-BLM variants, also under the research code's
``reference-leaky`` protocol, labelled as such, to show where the paper's numbers come from.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import platform
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mslm_core import __version__
from mslm_core.bundle import verify_bundle
from mslm_core.config import TrainConfig
from mslm_core.corpora import clinical
from mslm_core.corpus import Corpus, read_corpus, split_paths
from mslm_core.errors import BundleError, ConfigError
from mslm_core.evaluate import evaluate_bundle, predictions_digest

from . import textbook
from .protocol import (
    Protocol,
    RunSpec,
    dataset_folder,
    dataset_settings,
    is_harness_baseline,
    train_config,
)
from .select import plan, screen_ranking

log = logging.getLogger(__name__)

RESULT_SCHEMA = 1


def machine() -> dict[str, Any]:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu": _cpu_model() or platform.processor() or platform.machine(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


_ISA = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def _cpu_model() -> str | None:
    """The CPU's model name and the vector extensions that change kernel speed (timings from
    different machines are not comparable; this says which machine a figure came from)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    name = next(
        (ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")),
        None,
    )
    flags = next(
        (ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), []
    )
    isa = [f for f in _ISA if f in flags]
    return f"{name} ({', '.join(isa)})" if name and isa else name


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def example_sentences(corpus: Corpus, k: int) -> list[int]:
    """Indices of ``k`` test sentences for the confidence figure: the first ones with a gold
    mention and 8–25 words (the same sentences for every run on a dataset)."""
    out: list[int] = []
    for i, s in enumerate(corpus.sentences):
        if len(out) >= k:
            break
        if s.mentions and 8 <= len(s.word_spans) <= 25:
            out.append(i)
    return out


def _examples(predictor: Any, corpus: Corpus, k: int) -> list[dict[str, Any]]:
    from mslm_core.features import O

    chosen = example_sentences(corpus, k)
    if not chosen:
        return []
    words = [corpus.sentences[i].words for i in chosen]
    probs = predictor.tag_probabilities(words)
    mentions = [
        [[m.start, m.end, m.label, round(m.confidence, 4)] for m in sent]
        for sent in predictor.predict_words(words)
    ]
    return _example_records(corpus, chosen, [1.0 - p[:, O] for p in probs], mentions)


def textbook_examples(tagger: Any, corpus: Corpus, k: int) -> list[dict[str, Any]]:
    """:func:`_examples` for the textbook baseline: 1 - P(O) per word, and its mentions
    with the mean probability of their words' tags as a confidence."""
    from mslm_core.metrics import tags_to_mentions

    chosen = example_sentences(corpus, k)
    if not chosen:
        return []
    probs = tagger.word_probabilities([corpus.sentences[i].words for i in chosen])
    mentions = []
    for p in probs:
        tags = [tagger.labels[j] for j in p.argmax(-1).tolist()]
        mentions.append(
            [
                [m.start, m.end, m.label, round(float(p[m.start : m.end].max(-1).mean()), 4)]
                for m in tags_to_mentions(tags)[0]
            ]
        )
    return _example_records(corpus, chosen, [1.0 - p[:, 0] for p in probs], mentions)


def _example_records(
    corpus: Corpus, chosen: list[int], p_entity: list[Any], mentions: list[list[list[Any]]]
) -> list[dict[str, Any]]:
    return [
        {
            "sentence": i,
            "words": corpus.sentences[i].words,
            "gold": [[m.start, m.end, m.label] for m in corpus.sentences[i].mentions],
            "p_entity": [round(float(x), 4) for x in p],
            "predicted": predicted,
        }
        for i, p, predicted in zip(chosen, p_entity, mentions, strict=True)
    ]


class Runner:
    """Runs the :class:`RunSpec` s of a protocol and keeps their result files."""

    def __init__(
        self,
        protocol: Protocol,
        data_root: str | Path,
        results_dir: str | Path,
        work_dir: str | Path,
        device: str = "auto",
        keep_bundles: bool = False,
        on_run: Callable[[RunSpec, dict[str, Any], bool], None] | None = None,
        jobs: int = 1,
        only: list[str] | None = None,
    ):
        if jobs < 1:
            raise ConfigError(f"jobs: {jobs} — at least 1 run at a time")
        self.datasets = select_datasets(protocol, only)
        self.protocol = protocol
        self.data_root = Path(data_root)
        self.results_dir = Path(results_dir)
        self.work_dir = Path(work_dir)
        self.device = device
        self.keep_bundles = keep_bundles
        self.on_run = on_run
        self.jobs = jobs
        self._corpora: dict[str, Corpus] = {}
        self._folders: dict[str, Path] = {}

    # -- files ------------------------------------------------------------------------------
    def result_path(self, spec: RunSpec) -> Path:
        return self.results_dir / "runs" / f"{spec.slug}.json"

    def load_result(self, spec: RunSpec) -> dict[str, Any] | None:
        path = self.result_path(spec)
        if not path.exists():
            return None
        try:
            result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return result
        except ValueError as exc:
            raise ConfigError(
                f"{path}: unreadable run result ({exc}); delete it to re-run"
            ) from exc

    def dataset_dir(self, dataset: str) -> Path:
        """The folder of a protocol dataset (``NAME@N`` reads folder ``NAME``): under the data
        root, else — for a corpus of the clinical recipe (``MACCROBAT2020``, ``CHIA``) — its
        prepared folder in the corpus cache (fetched at its pinned commit if need be), looked
        up once per folder."""
        name = dataset_folder(dataset)
        if name not in self._folders:
            folder = self.data_root / name
            if not folder.is_dir() and name in clinical.CORPORA:
                folder = clinical.prepare(name)
            self._folders[name] = folder
        return self._folders[name]

    def _where(self, path: Path) -> str:
        """A split's path as a result records it: relative to the data root, or
        ``corpus-cache:…`` for a prepared clinical corpus."""
        if path.is_relative_to(self.data_root):
            return str(path.relative_to(self.data_root))
        return f"corpus-cache:{path.parent.name}/{path.name}"

    def dataset_paths(self, dataset: str) -> dict[str, Path]:
        """The splits of a protocol dataset (:meth:`dataset_dir`)."""
        folder = self.dataset_dir(dataset)
        paths = split_paths(folder)
        missing = [s for s in ("train", "dev", "test") if s not in paths]
        if missing:
            raise ConfigError(
                f"{folder}: the benchmark needs train, dev and test splits "
                f"(missing: {', '.join(missing)})"
            )
        return paths

    def check_datasets(self) -> None:
        """Fail before any training when a dataset to run is missing."""
        for ds in self.datasets:
            self.dataset_paths(ds)

    def _test_corpus(self, dataset: str) -> Corpus:
        folder = dataset_folder(dataset)
        if folder not in self._corpora:
            self._corpora[folder] = read_corpus(self.dataset_paths(dataset)["test"])
        return self._corpora[folder]

    # -- one run ----------------------------------------------------------------------------
    def run(self, spec: RunSpec) -> dict[str, Any]:
        """The result of ``spec``: read from its file, or trained and scored now."""
        record, reused = self._run(spec)
        if self.on_run:
            self.on_run(spec, record, reused)
        return record

    def _run(self, spec: RunSpec) -> tuple[dict[str, Any], bool]:
        """``(result, whether it was read rather than trained now)``."""
        existing = self.load_result(spec)
        if existing is None and spec.cell is not None:
            existing = self._reuse_twin(spec)
        if existing is not None:
            return existing, True
        paths = self.dataset_paths(spec.dataset)
        settings = {**spec.settings, **dataset_settings(spec.dataset)}
        started, cpu_started = time.perf_counter(), time.process_time()
        test = self._test_corpus(spec.dataset)
        if is_harness_baseline(settings):
            run = self._textbook(spec, settings, paths, test)
        else:
            run = self._product(spec, settings, paths, test)
        trained, cpu_trained = run.pop("trained_at")
        record = {
            "schema": RESULT_SCHEMA,
            "protocol": self.protocol.name,
            "dataset": spec.dataset,
            "label": spec.label,
            "variant": spec.variant,
            "seed": spec.seed,
            "phase": spec.phase,
            "cell": None
            if spec.cell is None
            else {"elm_rate": spec.cell[0], "blm_rate": spec.cell[1]},
            "settings": {
                **run.pop("settings"),
                "train": self._where(paths["train"]),
                "dev": self._where(paths["dev"]),
                "test": self._where(paths["test"]),
            },
            **run,
            "wall_seconds": {
                "train": round(trained - started, 1),
                "evaluate": round(time.perf_counter() - trained, 1),
            },
            # CPU seconds of this process, all threads, training (with dev scoring, masked-LM
            # perplexity and the leaky selection) and evaluation; a resumed run counts its
            # last part. The cost of training itself is train_cpu_seconds (steps only).
            "cpu_seconds": {
                "train": round(cpu_trained - cpu_started, 1),
                "evaluate": round(time.process_time() - cpu_trained, 1),
            },
            "machine": machine(),
            "mslm_version": __version__,
            "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        write_json(self.result_path(spec), record)
        if not self.keep_bundles:
            shutil.rmtree(self.work_dir / spec.slug, ignore_errors=True)
        leaky = record["test_leaky"]
        log.info(
            "run %s: test strict F1 %.4f (honest)%s, dev F1 %.4f",
            spec.slug,
            record["test"]["strict"]["f1"],
            "" if leaky is None else f", {leaky['strict']['f1']:.4f} (reference-leaky)",
            record["dev"]["strict"]["f1"],
        )
        return record, False

    def _product(
        self, spec: RunSpec, settings: dict[str, Any], paths: dict[str, Path], test: Corpus
    ) -> dict[str, Any]:
        """A run of our trainer: train (resuming), then score test through the engine."""
        from mslm_core.bundle import load_bundle
        from mslm_core.inference import EntityExtractor
        from mslm_core.train import Trainer

        config = TrainConfig.from_dict(
            {
                **settings,
                "train": str(paths["train"]),
                "dev": str(paths["dev"]),
                "seed": spec.seed,
                "device": self.device,
            }
        )
        bundle_dir = self.work_dir / spec.slug / "bundle"
        leaky_weights = self.work_dir / spec.slug / "leaky-best.safetensors"
        with_leaky = self.protocol.leaky and config.masking_strategy == "mslm"
        if not _complete_bundle(bundle_dir):
            log.info("run %s: training", spec.slug)
            callbacks = []
            if with_leaky:  # the research code's selection, for the labelled column only
                from .leaky import LeakyDevSelection

                dev = read_corpus(paths["dev"])
                callbacks.append(LeakyDevSelection(dev, leaky_weights, spec.seed))
            Trainer(config, bundle_dir, callbacks=callbacks, overwrite=True).fit(resume=True)
        trained_at = time.perf_counter(), time.process_time()
        honest = evaluate_bundle(bundle_dir, test, device=self.device)
        extractor = EntityExtractor.from_bundle(bundle_dir, device=self.device)
        predictor, manifest = extractor.predictor, extractor.manifest
        leaky = leaky_selection = None
        if with_leaky:
            from safetensors.torch import load_model

            from .leaky import evaluate_reference_leaky

            device = extractor.info.provider  # the torch device (bench bundles have no ONNX)
            bundle = load_bundle(bundle_dir, device=device, manifest=manifest)
            if leaky_weights.exists():  # weights chosen on gold-masked dev, as the research code
                load_model(bundle.model, str(leaky_weights), strict=False, device=device)
                leaky_selection = json.loads(leaky_weights.with_suffix(".json").read_text())
            leaky = evaluate_reference_leaky(bundle, test, seed=spec.seed, device=device)
            leaky["selection"] = leaky_selection
        return {
            # the learning rate the run used (the config's, or the default for its encoder)
            "settings": {**config.to_dict(), "learning_rate": manifest.get("learning_rate")},
            "trained_at": trained_at,
            "predictions_sha256": honest.pop("predictions_sha256"),
            "history": manifest["history"],
            "best_epoch": manifest["best_epoch"],
            "train_seconds": manifest["train_seconds"],
            "train_cpu_seconds": manifest.get("train_cpu_seconds"),
            "dev": manifest["metrics"]["dev"],
            "test": honest,
            "test_leaky": leaky,
            "examples": _examples(predictor, test, self.protocol.examples),
            "masking": manifest.get("masking", {}),
            "encoder": manifest.get("encoder", {}),
        }

    def _textbook(
        self, spec: RunSpec, settings: dict[str, Any], paths: dict[str, Path], test: Corpus
    ) -> dict[str, Any]:
        """A run of the textbook ``transformers`` fine-tune (no checkpoints: a run
        interrupted starts again)."""
        from .textbook import score, train_textbook

        log.info("run %s: training (%s)", spec.slug, textbook.NAME)
        work = self.work_dir / spec.slug / "textbook"
        run = train_textbook(settings, paths, spec.seed, self.device, work)
        trained_at = time.perf_counter(), time.process_time()
        tagger = run.pop("tagger")
        honest, predicted = score(tagger, test)
        return {
            "predictions_sha256": predictions_digest(predicted),
            "settings": {
                "strategy": textbook.NAME,
                **run.pop("settings_used"),
                "seed": spec.seed,
                "device": self.device,
            },
            "trained_at": trained_at,
            **run,
            "test": honest,
            "test_leaky": None,
            "examples": textbook_examples(tagger, test, self.protocol.examples),
            "masking": {},
        }

    def _reuse_twin(self, spec: RunSpec) -> dict[str, Any] | None:
        """A grid cell whose settings are exactly a variant's (its own ELM and BLM) is that
        variant's run: same dataset, seed and settings train the same model. Its result is
        copied under the cell's label (``same_run_as`` says so) instead of training again."""
        same = train_config(spec.settings).to_dict()
        for variant in self.protocol.variants:
            if is_harness_baseline(self.protocol.settings_for(variant)):
                continue
            if train_config(self.protocol.settings_for(variant)).to_dict() != same:
                continue
            twin = RunSpec(spec.dataset, variant, variant, spec.seed, spec.settings, "variants")
            record = self.load_result(twin)
            if record is None:
                continue
            cell = {"elm_rate": spec.cell[0], "blm_rate": spec.cell[1]} if spec.cell else None
            record = {
                **record,
                "label": spec.label,
                "phase": spec.phase,
                "cell": cell,
                "same_run_as": twin.slug,
            }
            write_json(self.result_path(spec), record)
            log.info("run %s: the same run as %s, result reused", spec.slug, twin.slug)
            return record
        return None

    # -- the protocol -----------------------------------------------------------------------
    def run_all(self) -> list[dict[str, Any]]:
        """Every run of the protocol's plan (:func:`~.select.plan`): the variants (with a
        screen, its seeds first, then the variants that go on), the grid for the named or the
        best variant, then the best grid cell on every seed. Returns every result."""
        self.check_datasets()
        results: dict[str, dict[str, Any]] = {}
        while True:
            specs, final = plan(self.protocol, list(results.values()))
            todo = [s for s in specs if s.slug not in results and s.dataset in self.datasets]
            if not todo:
                if final:
                    return list(results.values())
                if any(s.dataset not in self.datasets for s in specs):
                    raise ConfigError(
                        f"{self.protocol.name}: the plan's next choice waits for runs on "
                        "datasets not selected; run it without --datasets"
                    )
                raise AssertionError("a protocol plan waits for runs it does not ask for")
            for spec, record in zip(todo, self._run_many(todo), strict=True):
                results[spec.slug] = record
            self._log_choices(list(results.values()))

    def _run_many(self, specs: list[RunSpec]) -> list[dict[str, Any]]:
        """The results of independent runs (the plan's runs not yet done all are): one after
        the other, or ``jobs`` at a time in worker processes (spawned: CUDA cannot fork).
        Each run is seeded by its spec alone, so running side by side changes no score, only
        the runs' wall-clock times (which then share the machine)."""
        if self.jobs == 1 or len(specs) == 1:
            return [self.run(spec) for spec in specs]
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        state = (
            self.protocol,
            self.data_root,
            self.results_dir,
            self.work_dir,
            self.device,
            self.keep_bundles,
            logging.getLogger().getEffectiveLevel(),
            max(1, (os.cpu_count() or 1) // self.jobs),
        )
        with ProcessPoolExecutor(
            max_workers=min(self.jobs, len(specs)),
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=state,
        ) as pool:
            futures = [pool.submit(_run_in_worker, spec) for spec in specs]
            records = []
            for spec, future in zip(specs, futures, strict=True):
                record, reused = future.result()
                if self.on_run:
                    self.on_run(spec, record, reused)
                records.append(record)
        return records

    def _log_choices(self, results: list[dict[str, Any]]) -> None:
        ranking = screen_ranking(self.protocol, results)
        if ranking is not None and self.protocol.screen is not None:
            kept, scores = ranking
            log.info(
                "screen (mean dev F1 on seeds %s): %s; going on: %s",
                self.protocol.screen.seeds,
                ", ".join(f"{v} {s:.4f}" for v, s in scores.items()),
                ", ".join(kept),
            )


_WORKER: Runner | None = None


def select_datasets(protocol: Protocol, only: list[str] | None) -> list[str]:
    """The protocol's datasets to run now: all of them, or those ``only`` names — a dataset
    exactly (``BC5CDR-IOB@500``) or every size of a folder (``MACCROBAT2020``). A name that
    selects nothing is an error that lists the protocol's datasets."""
    if not only:
        return list(protocol.datasets)
    unknown = [n for n in only if not any(n in (d, dataset_folder(d)) for d in protocol.datasets)]
    if unknown:
        raise ConfigError(
            f"--datasets {', '.join(unknown)}: not in protocol {protocol.name} "
            f"(its datasets: {', '.join(protocol.datasets)})"
        )
    return [d for d in protocol.datasets if d in only or dataset_folder(d) in only]


def _init_worker(
    protocol: Protocol,
    data_root: Path,
    results_dir: Path,
    work_dir: Path,
    device: str,
    keep_bundles: bool,
    log_level: int,
    threads: int,
) -> None:
    """A worker process of :meth:`Runner._run_many`: its own runner, its share of the CPU."""
    import torch

    global _WORKER
    exit_with_parent()
    logging.basicConfig(level=log_level, format="%(asctime)s %(processName)s %(name)s: %(message)s")
    torch.set_num_threads(threads)
    _WORKER = Runner(protocol, data_root, results_dir, work_dir, device, keep_bundles)


def exit_with_parent() -> None:
    """In a worker process: exit as soon as the process that spawned it is gone, however it went
    (a ``kill``, a closed terminal). Otherwise a stopped ``reproduce.py`` leaves its workers
    training on, side by side with the next command. The parent's sentinel is a pipe that its
    death closes; a run cut short resumes from its last checkpoint, as after any interruption."""
    import multiprocessing
    import threading
    from multiprocessing.connection import wait

    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _run_in_worker(spec: RunSpec) -> tuple[dict[str, Any], bool]:
    if _WORKER is None:
        raise RuntimeError("the benchmark worker's initializer did not run")
    return _WORKER._run(spec)


def _complete_bundle(path: Path) -> bool:
    if not path.is_dir():
        return False
    try:
        verify_bundle(path)
    except BundleError:
        return False
    return True
