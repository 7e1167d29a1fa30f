"""The training loop: steps and epochs, short enough to read in one sitting; everything
around them — dev evaluation, the weights kept, early stopping, checkpoints, progress — is a
callback (``callbacks.py``), the end of the run is ``finalize.py``.

AdamW with linear warm-up and decay (restarted for each stage of a two-stage run), gradient
clipping, autocast on CUDA; the masking comes from the strategy's plan (``masking.py``).

Randomness is a pure function of the seed: the order of epoch ``e`` comes from
``(seed, e)`` and the masks of step ``s`` from ``(seed, e, s, row)`` (dynamic) or
``(seed, window)`` (static), so a resumed run draws exactly what an uninterrupted one would.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from ..bundle import predictor_options
from ..collate import MaskingCollator
from ..config import TrainConfig
from ..corpus import Corpus, Mention
from ..device import keep_large_blocks, resolve_device
from ..errors import ConfigError
from ..features import WindowBuilder
from ..masking import plan_masking
from ..model import LossSpec, MSLMOutput, load_pretrained
from ..notestyle import rewrite_share
from ..predict.backend import TorchBackend
from ..predict.predictor import Predictor
from ..sources import TrainingData, load_training_data
from .callbacks import Callback, Checkpointing, DevEvaluation, EarlyStopping, KeepWeights
from .checkpoint import load_checkpoint
from .finalize import finalize
from .state import Resumable, TrainState

log = logging.getLogger("mslm_core.train")


class TrainingCancelled(Exception):
    """Raised by :meth:`Trainer.fit` when a callback stopped the run (no bundle written)."""


def load_corpora(config: TrainConfig) -> dict[str, Corpus]:
    """``train``, ``dev`` and ``test`` (when given) as a run reads them: several corpora
    (``sources``) merged, each sentence knowing what its corpus annotates."""
    return load_training_data(config, config.partial_labels).corpora()


class Trainer:
    def __init__(
        self,
        config: TrainConfig,
        output: str | Path,
        callbacks: Sequence[Callback] = (),
        work_dir: str | Path | None = None,
        overwrite: bool = False,
    ):
        self.config = config
        self.output = Path(output)
        self.work_dir = (
            Path(work_dir) if work_dir else self.output.with_name(self.output.name + ".work")
        )
        self.callbacks = list(callbacks)
        self.overwrite = overwrite
        self.state = TrainState()
        self.device = resolve_device(config.device)
        self.auto_choice: dict[str, Any] | None = None  # prepare() resolves strategy auto

    # -- set-up -----------------------------------------------------------------------------
    def prepare(self) -> None:
        cfg = self.config
        keep_large_blocks()
        if self.output.exists() and not self.overwrite:
            raise ConfigError(f"output {self.output} already exists (choose another --output)")
        torch.manual_seed(cfg.seed)
        self.data: TrainingData = load_training_data(cfg, cfg.partial_labels)
        self.corpora = self.data.corpora()
        if cfg.note_style:  # training sentences rewritten as notes are written
            train = self.corpora["train"]
            sentences, rewritten = rewrite_share(train.sentences, cfg.note_style, cfg.seed)
            self.corpora["train"] = replace(train, sentences=sentences)
            log.info("note style: %d of %d training sentences rewritten", rewritten, len(sentences))
        # ``auto`` becomes the learning curve's choice for this many training sentences
        cfg, self.auto_choice = cfg.resolve_auto(len(self.corpora["train"].sentences))
        if self.auto_choice is not None:
            self.config = cfg
            log.info("strategy auto: %s", self.auto_choice["why"])
        self.types = self.data.types
        unseen = sorted(set(self.corpora["dev"].types) - set(self.types))
        if unseen and not self.data.partial:
            log.warning("dev has types never seen in train (never predicted): %s", unseen)
        self.model, self.tokenizer, self.encoder_info = load_pretrained(
            cfg.base_model, self.types, cfg.dropout, cfg.head
        )
        self.model.to(self.device)
        # source styles: each corpus's windows open with its name (TrainConfig.source_styles)
        names = [d.source.name for d in self.data.sources]
        self.style_names = names if cfg.source_styles and len(names) > 1 else []
        if cfg.blank_style and not self.style_names:
            log.warning(
                "blank_style %s does nothing: no source styles to leave out", cfg.blank_style
            )
        self.builder = WindowBuilder(self.tokenizer, cfg.max_length, styles=self.style_names)
        type_ids = {t: i for i, t in enumerate(self.types)}
        sentence_source = self.data.train_source()
        words, mentions, run_source = self._runs(self.corpora["train"], sentence_source)
        unannotated = (
            [self.data.unannotated(k, type_ids) for k in run_source] if self.data.partial else None
        )
        self.windows = self.builder.training_windows(
            words, mentions, type_ids, unannotated, self._styles(run_source)
        )
        self.window_source = np.asarray([run_source[w.sentence] for w in self.windows], np.int64)
        # a blank style: the same windows with no name after them, each epoch drawing which
        # of the two each window is read as (epoch_windows); a sentence is cut alike either way
        self.n_styled = len(self.windows)
        if self.style_names and cfg.blank_style:
            self.windows += self.builder.training_windows(words, mentions, type_ids, unannotated)
            self.window_source = np.concatenate([self.window_source, self.window_source])
        tok = self.tokenizer
        collator_kw = dict(
            mask_token_id=tok.mask_token_id,
            pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else 0,
            replace=cfg.mask_replace,
            vocab_size=len(tok),
            special_ids=tuple(tok.all_special_ids),
        )
        plan = plan_masking(cfg, self.windows[: self.n_styled], words)
        self.mask_weights, self.masking_info = plan.weights, plan.info
        self.loss_spec = LossSpec(
            mask_weights=plan.weights,
            detect_on=cfg.detect_on,
            mlm_weight=cfg.mlm_weight,
            detect_ignore_masked=cfg.detect_ignore_masked,
        )
        self.mlm_loss_spec = replace(self.loss_spec, heads=False)
        self.collator = MaskingCollator(plan.strategy, **collator_kw)
        self.clean_collator = MaskingCollator(None, **collator_kw)
        dev_source = self.data.split_source("dev")
        dev_words, dev_mentions, dev_runs = self._runs(self.corpora["dev"], dev_source)
        self.dev_windows = self.builder.training_windows(
            dev_words, dev_mentions, type_ids, styles=self._styles(dev_runs)
        )
        self.predictor = Predictor(
            TorchBackend(self.model, self.device),
            self.builder,
            self.types,
            batch_size=cfg.eval_batch_size,
            pad_id=collator_kw["pad_token_id"],
            **predictor_options(self.serving_manifest()),
        )
        self.state.steps_per_epoch = math.ceil(len(self.epoch_windows(0)) / cfg.batch_size)
        self.state.total_steps = self.state.steps_per_epoch * cfg.total_epochs
        if self.state.total_steps == 0:  # a model trained on nothing must not "succeed"
            raise ConfigError(
                "this configuration trains no step: an epoch draws no training window "
                "(are the sources' weights too small, or max_train_sentences 0?)"
            )
        self.learning_rate = cfg.learning_rate_for(self.model.mlm_model.config.hidden_size)
        self.optimizer = torch.optim.AdamW(
            self._param_groups(), lr=self.learning_rate, weight_decay=cfg.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)

    def _runs(
        self, corpus: Corpus, source: list[int] | None = None
    ) -> tuple[list[list[str]], list[list[Mention]], list[int]]:
        """The corpus's words and mentions per window run — its sentences, or consecutive
        sentences packed together (``pack``; never two corpora in one run) — and each run's
        corpus (``source``: per sentence; None: all one)."""
        words = [s.words for s in corpus.sentences]
        mentions = [s.mentions for s in corpus.sentences]
        source = source if source is not None else [0] * len(words)
        if not self.config.pack:
            return words, mentions, source
        runs, run_mentions, firsts = self.builder.pack(words, mentions, source)
        return runs, run_mentions, [source[i] for i in firsts]

    def _styles(self, source: list[int]) -> list[str] | None:
        """The style of each sentence (run) of corpus ``source[i]``; None: no styles."""
        return [self.style_names[k] for k in source] if self.style_names else None

    def styles_of(self, split: str) -> list[str] | None:
        """Each sentence of merged ``split`` read as its own corpus (None: no styles)."""
        return self._styles(self.data.split_source(split))

    def score(
        self,
        split: str,
        predicted: list[list[Mention]],
        total_nll: float | None = None,
        n_masked: int = 0,
    ) -> dict[str, Any]:
        """The report of ``split``'s predictions; several corpora: each one's too
        (:func:`~mslm_core.evaluate.score_by_source`)."""
        from ..evaluate import score_by_source

        return score_by_source(
            self.corpora[split], predicted, self.data.ranges(split), total_nll, n_masked
        )

    def serving_manifest(self) -> dict[str, Any]:
        """What the bundle's manifest says about reading the model's outputs."""
        cfg = self.config
        styles: dict[str, Any] = {}
        if self.style_names:
            blank = cfg.blank_style
            styles = {"styles": self.style_names, "style": "" if blank else self.style_names[0]}
            styles |= {"blank_style": blank} if blank else {}
        return {"head": cfg.head, "decoding": cfg.decoding, "pack": cfg.pack, **styles}

    def resumable(self) -> Resumable:
        """What a checkpoint of this run saves and restores."""
        return Resumable(
            self.work_dir,
            self.model,
            self.optimizer,
            self.scheduler,
            self.state,
            self.config.fingerprint(),
            self.device,
        )

    def _lr_factor(self, step: int) -> float:
        """Linear warm-up then linear decay to 0, restarted for each stage (the masked-LM
        stage of a two-stage run, then fine-tuning)."""
        spe, cfg = self.state.steps_per_epoch, self.config
        start, length = 0, spe * cfg.epochs
        if cfg.mlm_epochs:
            boundary = spe * cfg.mlm_epochs
            start, length = (0, boundary) if step < boundary else (boundary, length)
        s = step - start
        warm = int(cfg.warmup_ratio * length)
        if s < warm:
            return s / max(1, warm)
        return max(0.0, (length - s) / max(1, length - warm))

    def _param_groups(self) -> list[dict[str, Any]]:
        decay: list[torch.nn.Parameter] = []
        no_decay: list[torch.nn.Parameter] = []
        for name, p in self.model.named_parameters():
            if not p.requires_grad:
                continue
            (no_decay if p.ndim < 2 or "LayerNorm" in name else decay).append(p)
        return [
            {"params": decay, "weight_decay": self.config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]

    # -- batches ----------------------------------------------------------------------------
    def epoch_windows(self, epoch: int) -> npt.NDArray[np.intp]:
        """The windows epoch ``epoch`` trains on: every window once, unless a corpus of a
        multi-corpus run has a ``weight`` — then its windows ``int(weight)`` times each plus a
        random ``weight % 1`` share of them, drawn anew each epoch (the count is the same in
        every epoch, so the schedule is too). With a ``blank_style``, that share of the drawn
        windows, drawn anew each epoch too, is read with no style."""
        n = self.n_styled
        weights = [d.source.weight for d in self.data.sources]
        chosen: npt.NDArray[np.intp]
        if all(w == 1.0 for w in weights):
            chosen = np.arange(n)
        else:
            rng = np.random.default_rng([self.config.seed, epoch, 1])
            parts = []
            for k, weight in enumerate(weights):
                own = np.nonzero(self.window_source[:n] == k)[0]
                whole, share = divmod(weight, 1.0)
                parts.extend([own] * int(whole))
                parts.append(rng.choice(own, size=round(share * len(own)), replace=False))
            chosen = np.concatenate(parts)
        if len(self.windows) > n:  # the blank copies follow the styled windows
            blank = np.random.default_rng([self.config.seed, epoch, 2]).random(len(chosen))
            chosen = chosen + n * (blank < self.config.blank_style)
        return chosen

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """Window indices per batch (:meth:`epoch_windows`): shuffled, then grouped by length
        within blocks of 50 batches to cut padding, then the batch order shuffled again."""
        rng = np.random.default_rng([self.config.seed, epoch])
        order = rng.permutation(self.epoch_windows(epoch))
        bs = self.config.batch_size
        block = bs * 50
        batches: list[list[int]] = []
        for i in range(0, len(order), block):
            chunk = sorted(order[i : i + block].tolist(), key=lambda j: len(self.windows[j]))
            batches.extend(chunk[k : k + bs] for k in range(0, len(chunk), bs))
        return [batches[i] for i in rng.permutation(len(batches))]

    def _rngs(self, epoch: int, step: int, batch: list[int]) -> list[np.random.Generator]:
        seed = self.config.seed
        if self.config.masking == "static":
            # a window's blank copy is masked as the window is
            return [np.random.default_rng([seed, i % self.n_styled]) for i in batch]
        return [np.random.default_rng([seed, epoch, step, r]) for r in range(len(batch))]

    # -- the loop ---------------------------------------------------------------------------
    def default_callbacks(self) -> list[Callback]:
        """Before the caller's callbacks: dev scores, then the weights kept, then early
        stopping. After them: checkpoints (which so include what every callback recorded)."""
        cfg = self.config
        before: list[Callback] = [DevEvaluation(), KeepWeights(cfg.select)]
        if cfg.select == "best-dev" and cfg.patience:
            before.append(EarlyStopping(cfg.patience))
        return [*before, *self.callbacks, Checkpointing(cfg.checkpoint_every)]

    def fit(self, resume: bool = False) -> dict[str, Any]:
        """Train (from the last checkpoint with ``resume``), then write the bundle. Raises
        :class:`TrainingCancelled` when a callback stopped the run."""
        self.prepare()
        cfg, st = self.config, self.state  # as prepare() resolved it
        if not (resume and load_checkpoint(self.resumable())):
            shutil.rmtree(self.work_dir, ignore_errors=True)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
        callbacks = self.default_callbacks()
        for cb in callbacks:
            cb.on_train_begin(self)
        if cfg.mlm_head_warmup_steps and not st.mlm_head_warmed and st.global_step == 0:
            self.warm_up_mlm_head()
        while st.epoch < cfg.total_epochs and not st.should_stop:
            if not self.run_epoch(callbacks):
                break  # stopped mid-epoch
            for cb in callbacks:
                cb.on_epoch_end(self)
        if st.should_stop and st.stop_reason != "early_stopping":
            for cb in callbacks:
                cb.on_train_end(self)
            raise TrainingCancelled(st.stop_reason or "stopped by a callback")
        result = self.finish()
        for cb in callbacks:
            cb.on_train_end(self)
        return result

    def finish(self) -> dict[str, Any]:
        """The end of the run (:func:`~mslm_core.train.finalize.finalize`)."""
        return finalize(self)

    def run_epoch(self, callbacks: Sequence[Callback]) -> bool:
        """The steps of epoch ``state.epoch`` not yet done; then its history entry (losses,
        seconds) and the epoch counted. False when a callback stopped the run midway."""
        cfg, st = self.config, self.state
        mlm_stage = st.epoch < cfg.mlm_epochs
        started, cpu_started = time.perf_counter(), time.process_time()
        self.model.train()
        sums = {"loss": 0.0, "mlm": 0.0, "det": 0.0, "cls": 0.0}
        done = 0
        for step, batch_idx in enumerate(self.epoch_batches(st.epoch)):
            if step < st.step_in_epoch:
                continue  # resumed mid-epoch: these steps are already in the weights
            out = self.train_step(st.epoch, step, batch_idx, mlm_stage)
            for key, val in (
                ("loss", out.loss),
                ("mlm", out.mlm_loss),
                ("det", out.detection_loss),
                ("cls", out.classification_loss),
            ):
                sums[key] += float(val.detach())
            done += 1
            st.step_in_epoch = step + 1
            st.global_step += 1
            st.loss = sums["loss"] / done
            for cb in callbacks:
                cb.on_step_end(self)
            if st.should_stop:
                break
        st.train_seconds += time.perf_counter() - started
        st.train_cpu_seconds += time.process_time() - cpu_started
        if st.should_stop and st.step_in_epoch < st.steps_per_epoch:
            return False
        st.history.append(
            {
                "epoch": st.epoch + 1,
                "stage": "mlm" if mlm_stage else "joint",
                "train_loss": sums["loss"] / max(1, done),
                "mlm_loss": sums["mlm"] / max(1, done),
                "detection_loss": sums["det"] / max(1, done),
                "classification_loss": sums["cls"] / max(1, done),
                "dev_f1": None,
                "dev_precision": None,
                "dev_recall": None,
                "seconds": time.perf_counter() - started,  # DevEvaluation adds its own
            }
        )
        st.epoch += 1
        st.step_in_epoch = 0
        return True

    def train_step(
        self, epoch: int, step: int, batch_idx: list[int], mlm_stage: bool = False
    ) -> MSLMOutput:
        """One optimizer step on the windows ``batch_idx`` (masks drawn for epoch/step).
        ``mlm_stage``: masked-LM loss only (first stage of a two-stage run); the second
        stage of a two-stage run fine-tunes without masking."""
        cfg = self.config
        two_stage = cfg.mlm_epochs > 0
        collator = self.clean_collator if two_stage and not mlm_stage else self.collator
        batch = collator([self.windows[i] for i in batch_idx], self._rngs(epoch, step, batch_idx))
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.device == "cuda"):
            out: MSLMOutput = self.model(
                **batch, spec=self.mlm_loss_spec if mlm_stage else self.loss_spec
            )
        if out.loss.requires_grad:
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
        # else a masked-LM-only batch with nothing masked (BLM 0 and no entity in it): nothing
        # to learn, no update (a zero gradient would still move AdamW's momentum)
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return out

    def warm_up_mlm_head(self) -> None:
        """Train a newly initialised MLM head alone, encoder frozen (no gradient reaches it),
        so that its first gradients into the encoder are not those of a random head."""
        from ..losses import mask_specific_loss

        cfg, st = self.config, self.state
        if self.collator.strategy is None:
            raise ConfigError("mlm_head_warmup_steps needs a masking strategy (not vanilla)")
        if self.encoder_info["mlm_head_from_checkpoint"]:
            log.info("the checkpoint ships an MLM head: no warm-up needed")
            st.mlm_head_warmed = True
            return
        started, cpu_started = time.perf_counter(), time.process_time()
        head = self.model.mlm_head
        tied = {id(p) for p in self.model.encoder.parameters()}
        params = [p for p in head.parameters() if id(p) not in tied]
        optimizer = torch.optim.AdamW(params, lr=cfg.mlm_head_warmup_lr, weight_decay=0.0)
        self.model.train()
        losses: list[float] = []
        epoch = 0
        while len(losses) < cfg.mlm_head_warmup_steps:
            before = len(losses)
            for step, batch_idx in enumerate(self.epoch_batches(10_000 + epoch)):
                if len(losses) >= cfg.mlm_head_warmup_steps:
                    break
                rngs = self._rngs(10_000 + epoch, step, batch_idx)
                batch = self.collator([self.windows[i] for i in batch_idx], rngs)
                batch = {k: v.to(self.device) for k, v in batch.items()}
                masked = batch["mask_type"] > 0
                if not masked.any():  # nothing masked in this batch: nothing to learn
                    continue
                with torch.no_grad():
                    hidden = self.model.encode(batch["input_ids"], batch["attention_mask"])
                loss = mask_specific_loss(
                    head(hidden[masked]),
                    batch["clean_ids"][masked],
                    batch["mask_type"][masked],
                    self.mask_weights,
                )
                loss.backward()
                optimizer.step()
                self.model.zero_grad(set_to_none=True)  # the tied decoder = embeddings too
                losses.append(float(loss.detach()))
            if len(losses) == before:
                raise ConfigError(
                    "mlm_head_warmup_steps: the masking masked no token in a whole epoch "
                    "(no entity to mask at this elm_rate and blm_rate 0?)"
                )
            epoch += 1
        # training compute like any epoch's steps: what a run costs counts it
        seconds = time.perf_counter() - started
        st.train_seconds += seconds
        st.train_cpu_seconds += time.process_time() - cpu_started
        self.masking_info["mlm_head_warmup"] = {
            "steps": len(losses),
            "first_loss": losses[0],
            "last_loss": losses[-1],
            "seconds": round(seconds, 2),
        }
        st.mlm_head_warmed = True
        log.info("MLM head warm-up: %d steps, loss %.3f → %.3f", len(losses), losses[0], losses[-1])


def train(config: TrainConfig, output: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Train and write a bundle to ``output``; returns its metrics and history."""
    resume = kwargs.pop("resume", False)
    return Trainer(config, output, **kwargs).fit(resume=resume)
