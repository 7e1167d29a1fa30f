"""The training loop (short enough to read in one sitting; behaviour added via callbacks).

AdamW with linear warm-up and decay, gradient clipping, evaluation on dev after every epoch
(honest: the shared predictor, unmasked input), best weights by dev strict F1, early
stopping, checkpoints that resume exactly (safetensors + JSON, no pickles), autocast on CUDA.

Randomness is a pure function of the seed: the order of epoch ``e`` comes from
``(seed, e)`` and the masks of step ``s`` from ``(seed, e, s, row)`` (dynamic) or
``(seed, window)`` (static), so a resumed run draws exactly what an uninterrupted one would.
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import __version__
from .bundle import WEIGHTS, save_bundle
from .collate import MaskingCollator
from .config import TrainConfig
from .corpus import Corpus, read_corpus
from .errors import CheckpointError, ConfigError
from .evaluate import as_mentions, evaluate_corpus, masked_nll, score_predictions
from .features import Window, WindowBuilder
from .masking import ELM, MaskingStrategy, PMIVocabulary, build_strategy
from .model import MSLMOutput, load_pretrained
from .predict import Predictor, TorchBackend
from .weights import mask_specific_weights

log = logging.getLogger(__name__)


@dataclass
class TrainState:
    epoch: int = 0  # epochs completed
    step_in_epoch: int = 0  # optimizer steps done in the current epoch
    global_step: int = 0
    total_steps: int = 0
    steps_per_epoch: int = 0
    loss: float | None = None  # running mean over the current epoch
    best_f1: float = -1.0
    best_epoch: int | None = None
    epochs_without_gain: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    should_stop: bool = False  # set by a callback (cancel) or by early stopping
    stop_reason: str | None = None
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0  # process CPU time of the steps (all threads)
    mlm_head_warmed: bool = False


class Callback:
    """Hooks; ``trainer.state`` has the progress. Setting ``trainer.state.should_stop``
    stops the run at the next step (the worker uses it for cancel)."""

    def on_train_begin(self, trainer: Trainer) -> None: ...
    def on_step_end(self, trainer: Trainer) -> None: ...
    def on_epoch_end(self, trainer: Trainer) -> None: ...
    def on_train_end(self, trainer: Trainer) -> None: ...


class TrainingCancelled(Exception):
    """Raised by :meth:`Trainer.fit` when a callback stopped the run (no bundle written)."""


def keep_large_blocks() -> None:
    """Ask glibc to keep large freed blocks instead of returning each to the kernel.

    Every step allocates gradient buffers as large as the vocabulary matrix (47 MB for
    MiniLM; twice for MSLM's tied decoder); above glibc's mmap threshold (32 MB at most) each
    is mmapped, page-faulted and zeroed anew. Measured on 2 cores: vanilla step 0.41 → 0.38 s,
    MSLM 0.49 → 0.45 s. A training process only; Linux/glibc only (elsewhere a no-op)."""
    global _BLOCKS_KEPT
    if _BLOCKS_KEPT or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    libc.mallopt(M_MMAP_THRESHOLD, 1 << 30)
    libc.mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1)
    _BLOCKS_KEPT = True


_BLOCKS_KEPT = False


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: cuda was asked for but no CUDA device is available")
    return name


def load_corpora(config: TrainConfig) -> dict[str, Corpus]:
    if not config.train or not config.dev:
        raise ConfigError("train and dev corpora are both required")
    out = {"train": read_corpus(config.train), "dev": read_corpus(config.dev)}
    if config.test:
        out["test"] = read_corpus(config.test)
    if config.max_train_sentences:
        out["train"].sentences = out["train"].sentences[: config.max_train_sentences]
    return out


def masking_setup(
    config: TrainConfig, windows: list[Window], sentences: list[list[str]]
) -> tuple[MaskingStrategy | None, tuple[float, float], dict[str, Any]]:
    """The masking strategy, the MLM weights ``(w_blm, w_elm)`` and what was counted.

    One ELM-BLM pass over the training windows with the training seed gives ``N_ELM``,
    ``N_BLM`` (MSLM.md §2) and the share of tokens MSLM masks — the budget the comparison
    strategies get unless ``mask_rate`` is set.
    """
    name = config.masking_strategy
    if name is None:
        return None, (1.0, 1.0), {}
    counter = build_strategy("elm_blm", elm_rate=config.elm_rate, blm_rate=config.blm_rate)
    n_elm = n_blm = n_tokens = 0
    for i, w in enumerate(windows):
        mt = counter.choose(w, np.random.default_rng([config.seed, i]))
        n_elm += int((mt == ELM).sum())
        n_blm += int((mt == 1).sum())
        n_tokens += int((~w.special_mask).sum())
    rate = config.mask_rate or (n_elm + n_blm) / max(1, n_tokens)
    info: dict[str, Any] = {"n_elm": n_elm, "n_blm": n_blm, "n_tokens": n_tokens}
    if name == "elm_blm":
        strategy = counter
        weights = (1.0, 1.0)
        if config.weighted:
            weights = mask_specific_weights(n_elm, n_blm, config.weight_rule)
    else:
        info["mask_rate"] = rate
        kwargs: dict[str, Any] = {"mask_rate": rate}
        if name == "pmi":
            vocab = PMIVocabulary.build(sentences)
            info["pmi_vocabulary"] = len(vocab)
            kwargs.update(
                vocabulary=vocab,
                words=lambda w: sentences[w.sentence][w.word_start : w.word_end],
            )
        strategy = build_strategy(name, **kwargs)
        weights = (1.0, 1.0)
    info["weights"] = {"blm": weights[0], "elm": weights[1]}
    return strategy, weights, info


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

    # -- set-up -----------------------------------------------------------------------------
    def prepare(self) -> None:
        cfg = self.config
        keep_large_blocks()
        if self.output.exists() and not self.overwrite:
            raise ConfigError(f"output {self.output} already exists (choose another --output)")
        torch.manual_seed(cfg.seed)
        self.corpora = load_corpora(cfg)
        train = self.corpora["train"]
        self.types = train.types
        unseen = sorted(set(self.corpora["dev"].types) - set(self.types))
        if unseen:
            log.warning("dev has types never seen in train (never predicted): %s", unseen)
        self.model, self.tokenizer, self.encoder_info = load_pretrained(
            cfg.base_model, self.types, cfg.dropout
        )
        self.model.to(self.device)
        self.builder = WindowBuilder(self.tokenizer, cfg.max_length)
        words = [s.words for s in train.sentences]
        self.windows = self.builder.training_windows(
            words, [s.mentions for s in train.sentences], {t: i for i, t in enumerate(self.types)}
        )
        tok = self.tokenizer
        collator_kw = dict(
            mask_token_id=tok.mask_token_id,
            pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else 0,
            replace=cfg.mask_replace,
            vocab_size=len(tok),
            special_ids=tuple(tok.all_special_ids),
        )
        strategy, self.mask_weights, self.masking_info = masking_setup(cfg, self.windows, words)
        self.collator = MaskingCollator(strategy, **collator_kw)
        self.clean_collator = MaskingCollator(None, **collator_kw)
        dev_words = [s.words for s in self.corpora["dev"].sentences]
        dev_windows = self.builder.training_windows(
            dev_words,
            [s.mentions for s in self.corpora["dev"].sentences],
            {t: i for i, t in enumerate(self.types)},
        )
        self.dev_windows = dev_windows
        self.predictor = Predictor(
            TorchBackend(self.model, self.device),
            self.builder,
            self.types,
            batch_size=cfg.eval_batch_size,
            pad_id=collator_kw["pad_token_id"],
        )
        self.state.steps_per_epoch = math.ceil(len(self.windows) / cfg.batch_size)
        self.state.total_steps = self.state.steps_per_epoch * cfg.total_epochs
        self.optimizer = torch.optim.AdamW(
            self._param_groups(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)

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
    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """Window indices per batch: shuffled, then grouped by length within blocks of 50
        batches to cut padding, then the batch order shuffled again."""
        rng = np.random.default_rng([self.config.seed, epoch])
        order = rng.permutation(len(self.windows))
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
            return [np.random.default_rng([seed, i]) for i in batch]
        return [np.random.default_rng([seed, epoch, step, r]) for r in range(len(batch))]

    # -- the loop ---------------------------------------------------------------------------
    def fit(self, resume: bool = False) -> dict[str, Any]:
        cfg, st = self.config, self.state
        self.prepare()
        if not (resume and self.load_checkpoint()):
            shutil.rmtree(self.work_dir, ignore_errors=True)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
        for cb in self.callbacks:
            cb.on_train_begin(self)
        if cfg.mlm_head_warmup_steps and not st.mlm_head_warmed and st.global_step == 0:
            self.warm_up_mlm_head()
        while st.epoch < cfg.total_epochs and not st.should_stop:
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
                for cb in self.callbacks:
                    cb.on_step_end(self)
                if st.should_stop:
                    break
                if cfg.checkpoint_every and st.global_step % cfg.checkpoint_every == 0:
                    self.save_checkpoint()
            st.train_seconds += time.perf_counter() - started
            st.train_cpu_seconds += time.process_time() - cpu_started
            if st.should_stop and st.step_in_epoch < st.steps_per_epoch:
                break  # cancelled mid-epoch
            entry: dict[str, Any] = {
                "epoch": st.epoch + 1,
                "stage": "mlm" if mlm_stage else "joint",
                "train_loss": sums["loss"] / max(1, done),
                "mlm_loss": sums["mlm"] / max(1, done),
                "detection_loss": sums["det"] / max(1, done),
                "classification_loss": sums["cls"] / max(1, done),
                "dev_f1": None,
                "dev_precision": None,
                "dev_recall": None,
            }
            if not mlm_stage:  # the heads are untrained during the masked-LM stage
                dev = evaluate_corpus(self.predictor, self.corpora["dev"])
                entry.update(
                    dev_f1=dev["strict"]["f1"],
                    dev_precision=dev["strict"]["precision"],
                    dev_recall=dev["strict"]["recall"],
                )
            entry["seconds"] = time.perf_counter() - started
            st.history.append(entry)
            log.info(
                "epoch %d/%d (%s) loss %.4f dev strict F1 %s",
                st.epoch + 1,
                cfg.total_epochs,
                entry["stage"],
                entry["train_loss"],
                "-" if entry["dev_f1"] is None else f"{entry['dev_f1']:.4f}",
            )
            f1 = entry["dev_f1"]
            if f1 is not None and f1 > st.best_f1:
                st.best_f1, st.best_epoch, st.epochs_without_gain = f1, st.epoch + 1, 0
                self._save_weights(self.work_dir / "best" / WEIGHTS)
            elif f1 is not None:
                st.epochs_without_gain += 1
            st.epoch += 1
            st.step_in_epoch = 0
            if cfg.patience and st.epochs_without_gain >= cfg.patience:
                st.should_stop, st.stop_reason = True, "early_stopping"
            self.save_checkpoint()
            for cb in self.callbacks:
                cb.on_epoch_end(self)
        if st.should_stop and st.stop_reason != "early_stopping":
            for cb in self.callbacks:
                cb.on_train_end(self)
            raise TrainingCancelled(st.stop_reason or "stopped by a callback")
        result = self.finish()
        for cb in self.callbacks:
            cb.on_train_end(self)
        return result

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
            out = self.model(
                **batch,
                mask_weights=self.mask_weights,
                detect_on=cfg.detect_on,
                mlm_weight=cfg.mlm_weight,
                detect_ignore_masked=cfg.detect_ignore_masked,
                heads=not mlm_stage,
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
        from .losses import mask_specific_loss

        cfg, st = self.config, self.state
        if self.collator.strategy is None:
            raise ConfigError("mlm_head_warmup_steps needs a masking strategy (not vanilla)")
        if self.encoder_info["mlm_head_from_checkpoint"]:
            log.info("the checkpoint ships an MLM head: no warm-up needed")
            st.mlm_head_warmed = True
            return
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
        self.masking_info["mlm_head_warmup"] = {
            "steps": len(losses),
            "first_loss": losses[0],
            "last_loss": losses[-1],
        }
        st.mlm_head_warmed = True
        log.info("MLM head warm-up: %d steps, loss %.3f → %.3f", len(losses), losses[0], losses[-1])

    def finish(self) -> dict[str, Any]:
        """Restore the best weights, score dev and test honestly, calibrate the confidences
        on dev, write the bundle."""
        from safetensors.torch import load_model

        from .calibration import CALIBRATION_PNG, calibrate, diagram_for, gold_type_spans

        best = self.work_dir / "best" / WEIGHTS
        if best.exists():
            load_model(self.model, str(best), strict=False, device=self.device)
        cfg = self.config
        nll, n_masked = masked_nll(
            self.model, self.dev_windows, self.collator, cfg.seed, self.device
        )
        # one prediction pass per split serves both the scores and the calibration (the
        # temperatures it fits move confidences only, never which entities are found); dev's
        # also types the gold mentions, which the type temperature is fitted on
        raw = {
            split: self.predictor.raw_predictions(
                [s.words for s in corpus.sentences],
                gold_type_spans(corpus, self.predictor.types) if split == "dev" else None,
            )
            for split, corpus in self.corpora.items()
            if split in ("dev", "test")
        }
        metrics: dict[str, Any] = {}
        for split, predictions in raw.items():
            predicted = as_mentions(predictions.mentions(self.predictor.types))
            extra = (nll, n_masked) if split == "dev" else (None, 0)  # perplexity: dev only
            metrics[split] = score_predictions(self.corpora[split], predicted, *extra)
        calibration = calibrate(
            self.predictor, self.corpora["dev"], self.corpora.get("test"), passes=raw
        )
        self.predictor.temperatures = (1.0, 1.0)
        diagram = diagram_for(calibration, self.work_dir / CALIBRATION_PNG)
        log.info(
            "calibration: T(detection) %.2f, T(type) %.2f; ECE %s",
            calibration["detection_temperature"],
            calibration["type_temperature"],
            ", ".join(
                f"{split} {calibration[split]['before']['ece']:.3f} → "
                f"{calibration[split]['after']['ece']:.3f}"
                for split in ("dev", "test")
                if split in calibration
            ),
        )
        manifest = {
            "base_model": cfg.base_model,
            "strategy": cfg.strategy,
            "config": cfg.to_dict(),
            "encoder": self.encoder_info,
            "masking": self.masking_info,
            "metrics": metrics,
            "calibration": calibration,
            "history": self.state.history,
            "best_epoch": self.state.best_epoch,
            "train_seconds": round(self.state.train_seconds, 2),
            "train_cpu_seconds": round(self.state.train_cpu_seconds, 2),
            "corpora": {k: c.stats() for k, c in self.corpora.items()},
            "max_length": cfg.max_length,
            "mslm_version": __version__,
            "torch_version": torch.__version__,
        }
        save_bundle(
            self.model,
            self.tokenizer,
            self.output,
            manifest,
            overwrite=self.overwrite,
            extra_files={CALIBRATION_PNG: diagram},
        )
        shutil.rmtree(self.work_dir, ignore_errors=True)
        return {"output": str(self.output), "metrics": metrics, "history": self.state.history}

    # -- checkpoints ------------------------------------------------------------------------
    def _save_weights(self, path: Path) -> None:
        from safetensors.torch import save_model

        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        save_model(self.model, str(tmp))
        os.replace(tmp, path)

    def save_checkpoint(self) -> Path:
        """``work_dir/ckpt-<step>/`` written whole, then ``LATEST`` points at it."""
        from safetensors.torch import save_file

        name = f"ckpt-{self.state.global_step:08d}"
        tmp = self.work_dir / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self._save_weights(tmp / WEIGHTS)
        opt = self.optimizer.state_dict()
        tensors = {
            f"{pid}.{key}": (v if v.ndim else v.reshape(1)).detach().cpu().contiguous()
            for pid, entry in opt["state"].items()
            for key, v in entry.items()
        }
        tensors["torch_rng"] = torch.get_rng_state()
        if torch.cuda.is_available():
            tensors["cuda_rng"] = torch.cuda.get_rng_state()
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        meta = {
            "fingerprint": self.config.fingerprint(),
            "state": asdict(self.state),
            "param_groups": opt["param_groups"],
            "scheduler": self.scheduler.state_dict(),
        }
        (tmp / "trainer_state.json").write_text(json.dumps(meta, indent=1))
        final = self.work_dir / name
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        latest = self.work_dir / "LATEST.tmp"
        latest.write_text(name)
        os.replace(latest, self.work_dir / "LATEST")
        for old in self.work_dir.glob("ckpt-*"):
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)
        return final

    def load_checkpoint(self) -> bool:
        """Resume from ``work_dir/LATEST`` when present; False when there is none."""
        from safetensors.torch import load_file, load_model

        pointer = self.work_dir / "LATEST"
        if not pointer.exists():
            return False
        ckpt = self.work_dir / pointer.read_text().strip()
        try:
            meta = json.loads((ckpt / "trainer_state.json").read_text())
            tensors = load_file(str(ckpt / "optimizer.safetensors"))
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{ckpt}: cannot read checkpoint: {exc}") from exc
        if meta["fingerprint"] != self.config.fingerprint():
            raise CheckpointError(
                f"{ckpt} was written with another configuration; "
                "resume with the same settings or remove the work directory"
            )
        load_model(self.model, str(ckpt / WEIGHTS), strict=False, device=self.device)
        state: dict[int, dict[str, torch.Tensor]] = {}
        for key, value in tensors.items():
            if key in ("torch_rng", "cuda_rng"):
                continue
            pid, name = key.split(".", 1)
            state.setdefault(int(pid), {})[name] = value.reshape(()) if name == "step" else value
        self.optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
        self.scheduler.load_state_dict(meta["scheduler"])
        torch.set_rng_state(tensors["torch_rng"])
        if "cuda_rng" in tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(tensors["cuda_rng"])
        # update in place: callers (and fit's loop) hold a reference to this state object
        for key, value in meta["state"].items():
            setattr(self.state, key, value)
        self.state.should_stop, self.state.stop_reason = False, None
        log.info(
            "resumed from %s (epoch %d, step %d)",
            ckpt.name,
            self.state.epoch,
            self.state.step_in_epoch,
        )
        return True


def train(config: TrainConfig, output: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Train and write a bundle to ``output``; returns its metrics and history."""
    resume = kwargs.pop("resume", False)
    return Trainer(config, output, **kwargs).fit(resume=resume)
