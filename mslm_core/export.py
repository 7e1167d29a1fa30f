"""ONNX export of a bundle's serving graph, optional int8 dynamic quantisation, and a parity
check against PyTorch that fails the export when the runtimes disagree.

Two graphs are written (both with dynamic axes):

``model.onnx`` (and ``model.int8.onnx``)
    ``input_ids`` [B, T], ``attention_mask`` [B, T] (int64) → ``detection_probs`` [B, T, 3]
    (untyped B, I, O probabilities) and ``type_features`` [B, T, F] (per subword: the paper
    head's first classifier layer, or the linear head's log P(type | entity); mean-pooled
    over a mention by the engine). Exported with eager attention so
    that ONNX Runtime's transformer optimiser fuses attention, embeddings and layer norms.
``classifier.onnx``
    ``pooled`` [N, F] → ``type_probs`` [N, C]; tiny, kept in fp32.

The files are added to the bundle atomically with their checksums and an ``onnx`` manifest
section (opset, precision, parity figures). Nothing is added when the fp32 check fails; an
int8 graph that fails its check is left out (``int8_refused`` says why) and fp32 serves.
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .bundle import add_files, load_bundle
from .errors import ExportError

if TYPE_CHECKING:
    from .model import MSLMModel

log = logging.getLogger(__name__)

OPSET = 17
MODEL_ONNX = "model.onnx"
MODEL_INT8_ONNX = "model.int8.onnx"
CLASSIFIER_ONNX = "classifier.onnx"
INPUTS = ("input_ids", "attention_mask")
OUTPUTS = ("detection_probs", "type_features")

# Parity inputs: real-looking text of varied length (batched together, so padding is tested).
PARITY_TEXTS = (
    "The patient has breast cancer.",
    "Cisplatin-induced nephrotoxicity was reversed after hydration; no sign of renal failure.",
    "Mutations in the BRCA1 gene predispose to hereditary breast and ovarian cancer syndrome "
    "in families of Ashkenazi Jewish descent.",
    "Aspirin reduces fever.",
    "Type 2 diabetes mellitus, hypertension and hyperlipidaemia were treated with metformin, "
    "lisinopril and atorvastatin over a period of three years with good glycaemic control.",
    "No abnormality detected.",
    "Haemolytic uraemic syndrome (HUS) followed an infection with Escherichia coli O157:H7.",
    "Adenomatous polyposis coli (APC) tumour-suppressor protein controls Wnt signalling.",
)


@dataclass(frozen=True)
class Tolerance:
    """Largest allowed disagreement between ONNX Runtime and PyTorch on the parity inputs
    (real tokens only; padding is not compared)."""

    detection_abs: float  # max |Δ probability| of B/I/O (on the tokens below)
    features_abs: float  # max |Δ| of type features
    type_probs_abs: float  # max |Δ| of the classifier's softmax
    tag_agreement: float  # share of confidently tagged tokens given the same tag
    detection_on: str = "all"  # "all" tokens, or the "confident" ones only


# A token is "confidently tagged" by PyTorch when its top tag beats the runner-up by this much;
# below it, a flip between near-equal tags is within quantisation noise.
CONFIDENT_MARGIN = 0.2


FP32 = Tolerance(detection_abs=1e-4, features_abs=1e-3, type_probs_abs=1e-4, tag_agreement=1.0)
# int8 dynamic quantisation changes numbers; what must hold is that it tags alike. Its noise
# moves the probabilities of tokens that sit between two tags most (measured with the linear
# head on two MiniLM NCBI-disease models: up to 0.28 and 0.32 there, with int8 test F1 equal
# to fp32's), so the probability bound holds on the confidently tagged tokens (0.19, 0.17).
INT8 = Tolerance(
    detection_abs=0.25,
    features_abs=float("inf"),
    type_probs_abs=0.25,
    tag_agreement=0.99,
    detection_on="confident",
)


def _serving_modules(model: MSLMModel) -> tuple[Any, Any]:
    import torch

    class ServingGraph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            return self.model.forward_features(input_ids, attention_mask)

    class ClassifierGraph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, pooled: torch.Tensor) -> torch.Tensor:
            return self.model.classify(pooled).softmax(-1)

    return ServingGraph().eval(), ClassifierGraph().eval()


def parity_batch(
    tokenizer: Any, max_length: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The parity texts tokenised and padded into one batch: ([B, T], [B, T]) int64."""
    enc = [tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in PARITY_TEXTS]
    longest = max(len(e) for e in enc)
    pad = tokenizer.pad_token_id or 0
    ids = np.full((len(enc), longest), pad, np.int64)
    mask = np.zeros_like(ids)
    for r, e in enumerate(enc):
        ids[r, : len(e)] = e
        mask[r, : len(e)] = 1
    return ids, mask


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def check_parity(
    model: Any,
    onnx_path: Path,
    classifier_path: Path,
    ids: npt.NDArray[np.int64],
    mask: npt.NDArray[np.int64],
    tol: Tolerance,
    precision: str,
    one_by_one: bool = False,
) -> dict[str, float]:
    """Run PyTorch and ONNX Runtime on the same inputs; raise :class:`ExportError` naming the
    output that disagrees beyond ``tol``. Returns the measured differences. ``one_by_one``:
    ONNX Runtime reads each text alone, unpadded, as the engine serves int8 (dynamic
    quantisation scales activations per run: a padded batch would check coarser scales than
    the engine ever uses)."""
    import torch

    with torch.inference_mode():
        t_probs, t_feats = model.forward_features(torch.from_numpy(ids), torch.from_numpy(mask))
        real = torch.from_numpy(mask).bool()
        pooled = (t_feats * real[..., None]).sum(1) / real.sum(1, keepdim=True)
        t_types = model.classify(pooled).softmax(-1).numpy()
    t_probs_np, t_feats_np = t_probs.numpy(), t_feats.numpy()
    session = _session(onnx_path)
    if one_by_one:
        o_probs, o_feats = np.zeros_like(t_probs_np), np.zeros_like(t_feats_np)
        for r, n in enumerate(mask.sum(1)):
            row = {"input_ids": ids[r : r + 1, :n], "attention_mask": mask[r : r + 1, :n]}
            p, f = session.run(list(OUTPUTS), row)
            o_probs[r, :n], o_feats[r, :n] = p[0], f[0]
    else:
        o_probs, o_feats = session.run(list(OUTPUTS), {"input_ids": ids, "attention_mask": mask})
    o_types = _session(classifier_path).run(None, {"pooled": pooled.numpy()})[0]
    valid = mask.astype(bool)
    top2 = np.sort(t_probs_np, -1)[..., -2:]
    confident = valid & (top2[..., 1] - top2[..., 0] > CONFIDENT_MARGIN)
    same_tag = o_probs.argmax(-1) == t_probs_np.argmax(-1)
    figures = {
        "detection_abs": float(np.abs(o_probs - t_probs_np)[valid].max()),
        "detection_abs_confident": (
            float(np.abs(o_probs - t_probs_np)[confident].max()) if confident.any() else 0.0
        ),
        "features_abs": float(np.abs(o_feats - t_feats_np)[valid].max()),
        "type_probs_abs": float(np.abs(o_types - t_types).max()),
        "tag_agreement_all": float(same_tag[valid].mean()),
        "tag_agreement": float(same_tag[confident].mean()) if confident.any() else 1.0,
        "tokens": int(valid.sum()),
        "confident_tokens": int(confident.sum()),
    }
    measured = {
        "detection_abs": figures[
            "detection_abs_confident" if tol.detection_on == "confident" else "detection_abs"
        ],
        "features_abs": figures["features_abs"],
        "type_probs_abs": figures["type_probs_abs"],
    }
    for name, value in measured.items():
        if not value <= getattr(tol, name):
            where = " (confidently tagged tokens)" if name == "detection_abs" else ""
            raise ExportError(
                f"{precision} ONNX disagrees with PyTorch: {name}{where} = {value:.3g} > "
                f"{getattr(tol, name):.3g} on the parity batch; the export was not added"
            )
    if figures["tag_agreement"] < tol.tag_agreement:
        raise ExportError(
            f"{precision} ONNX tags {figures['tag_agreement']:.1%} of the confidently tagged "
            f"parity tokens like PyTorch (needs {tol.tag_agreement:.1%}); the export was not "
            "added"
        )
    return figures


def _export_graphs(
    model: Any, directory: Path, exporter: str = "torchscript"
) -> tuple[Path, Path, str]:
    """Write the serving graph and the classifier. ``torchscript`` (PyTorch's legacy
    exporter) gives the graph ONNX Runtime's optimiser fuses into its Attention kernel (the
    ``torch.export``-based one does not, measured: no fused attention); ``dynamo`` is the
    fallback when the legacy exporter is gone. Returns the paths and the exporter used."""
    import torch

    serving, classifier = _serving_modules(model)
    ids = torch.ones((2, 8), dtype=torch.int64)
    features = model.type_feature_size
    raw, cls_path = directory / "raw.onnx", directory / CLASSIFIER_ONNX
    inputs, outputs = list(INPUTS), list(OUTPUTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer notes
        if exporter == "torchscript":
            try:
                batch_seq = {0: "batch", 1: "sequence"}
                torch.onnx.export(
                    serving,
                    (ids, torch.ones_like(ids)),
                    str(raw),
                    dynamo=False,
                    opset_version=OPSET,
                    input_names=inputs,
                    output_names=outputs,
                    dynamic_axes={name: batch_seq for name in (*INPUTS, *OUTPUTS)},
                )
                torch.onnx.export(
                    classifier,
                    (torch.zeros((2, features)),),
                    str(cls_path),
                    dynamo=False,
                    opset_version=OPSET,
                    input_names=["pooled"],
                    output_names=["type_probs"],
                    dynamic_axes={"pooled": {0: "mentions"}, "type_probs": {0: "mentions"}},
                )
                return raw, cls_path, exporter
            except (TypeError, ValueError, NotImplementedError, RuntimeError) as exc:
                log.warning("legacy ONNX exporter unavailable (%s); using torch.export", exc)
        batch, seq, mentions = (torch.export.Dim(n) for n in ("batch", "sequence", "mentions"))
        torch.onnx.export(
            serving,
            (ids, torch.ones_like(ids)),
            str(raw),
            dynamo=True,
            opset_version=OPSET,
            input_names=inputs,
            output_names=outputs,
            dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
        )
        torch.onnx.export(
            classifier,
            (torch.zeros((2, features)),),
            str(cls_path),
            dynamo=True,
            opset_version=OPSET,
            input_names=["pooled"],
            output_names=["type_probs"],
            dynamic_shapes={"pooled": {0: mentions}},
        )
    return raw, cls_path, "dynamo"


def _optimize(raw: Path, out: Path, config: Any) -> dict[str, int]:
    """ONNX Runtime's transformer optimiser (fused attention, embeddings, layer norms); the
    plain graph is kept when the family is not one it knows."""
    from onnxruntime.transformers.optimizer import optimize_model

    try:
        optimized = optimize_model(
            str(raw),
            model_type="bert",
            num_heads=config.num_attention_heads,
            hidden_size=config.hidden_size,
        )
    except Exception as exc:
        log.warning("ONNX Runtime's optimiser failed (%s); keeping the plain graph", exc)
        raw.replace(out)
        return {}
    optimized.save_model_to_file(str(out))
    fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
    log.info("fused operators: %s", fused)
    return fused


def quantize_int8(src: Path, dst: Path) -> None:
    """Dynamic int8 quantisation of the weights (activations quantised at run time)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    # the quantiser logs every tensor on the root, and advises pre-processing (which the
    # parity checks after it make moot) as a warning
    root.setLevel(max(level, logging.ERROR))
    try:
        _quantize(quantize_dynamic, QuantType, onnx, src, dst)
    finally:
        root.setLevel(level)


def head_nodes(graph: Any) -> list[str]:
    """The nodes of the entity heads (named after their modules, e.g. ``/tag_out/MatMul``):
    tiny, and the last step before the probabilities, so they stay fp32 in an int8 graph
    (quantised, the linear head moved tag probabilities by up to 0.39 on the parity batch)."""
    from .model import HEAD_MODULES

    return [
        n.name
        for n in graph.node
        if n.name.split("/")[1:2] and n.name.split("/")[1] in HEAD_MODULES
    ]


def _quantize(quantize_dynamic: Any, QuantType: Any, onnx: Any, src: Path, dst: Path) -> None:
    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=True,
        nodes_to_exclude=head_nodes(onnx.load(str(src)).graph),
        # fused contrib ops have no inferred output types; they are float
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


EXPORT_PREFIX = "mslm-export-"  # what an export leaves in its scratch folder while it runs


def export_bundle(
    bundle_dir: str | Path,
    quantize: str | None = None,
    exporter: str = "torchscript",
    scratch: str | Path | None = None,
) -> dict[str, Any]:
    """Export ``bundle_dir`` to ONNX (and int8 when ``quantize == "int8"``), check parity,
    and add the files to the bundle. Returns the manifest's ``onnx`` section. ``scratch``: the
    folder its temporary files go in (default: the system's; a worker gives its job's work
    folder, which a later attempt or the sweep at worker start clears)."""
    import onnxruntime
    import torch

    if quantize not in (None, "int8"):
        raise ExportError(f"quantize must be 'int8' or None, got {quantize!r}")
    bundle = load_bundle(bundle_dir)
    model = bundle.model.eval()
    model.mlm_model.set_attn_implementation("eager")  # a pattern the ORT optimiser fuses
    max_length = int(bundle.manifest.get("max_length", 128))
    ids, mask = parity_batch(bundle.tokenizer, max_length)
    files: dict[str, Path] = {}
    if scratch is not None:
        Path(scratch).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=EXPORT_PREFIX, dir=scratch) as tmp:
        work = Path(tmp)
        raw, cls_path, exporter = _export_graphs(model, work, exporter)
        fp32 = work / MODEL_ONNX
        fused = _optimize(raw, fp32, model.mlm_model.config)
        section: dict[str, Any] = {
            "opset": OPSET,
            "exporter": exporter,
            "inputs": list(INPUTS),
            "outputs": list(OUTPUTS),
            "classifier": CLASSIFIER_ONNX,
            "precisions": {"fp32": MODEL_ONNX},
            "fused_operators": fused,
            "onnxruntime_version": onnxruntime.__version__,
            "torch_version": torch.__version__,
            "parity": {"fp32": check_parity(model, fp32, cls_path, ids, mask, FP32, "fp32")},
        }
        files = {MODEL_ONNX: fp32, CLASSIFIER_ONNX: cls_path}
        if quantize == "int8":
            int8 = work / MODEL_INT8_ONNX
            quantize_int8(fp32, int8)
            try:
                parity = check_parity(
                    model, int8, cls_path, ids, mask, INT8, "int8", one_by_one=True
                )
            except ExportError as exc:
                # the fp32 export is sound and serves; an int8 graph that does not tag like
                # it is left out, and the manifest says why (the engine then serves fp32)
                log.warning("%s: %s", bundle_dir, exc)
                section["int8_refused"] = str(exc)
            else:
                section["parity"]["int8"] = parity
                section["precisions"]["int8"] = MODEL_INT8_ONNX
                files[MODEL_INT8_ONNX] = int8
        # a re-export without int8 must not leave a stale int8 file listed
        stale = [] if MODEL_INT8_ONNX in files else [MODEL_INT8_ONNX]
        add_files(bundle_dir, files, {"onnx": section}, remove=stale)
    log.info("exported %s: %s", bundle_dir, ", ".join(section["precisions"].values()))
    return section
