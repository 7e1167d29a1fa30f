"""medspaCy's ConText and negspacy's NegEx on given spans — the rule engines clinical NLP teams
use — for ``benchmarks/assertion.py``'s side-by-side. Runs inside the baseline's own virtual
environment (medspaCy 1.3.1 needs spaCy < 3.8, negspacy 1.1.0 spaCy >= 3.8: they cannot share
one), made by ``assertion.py --baselines`` under ``.mslm/bench/venvs/``; imports nothing of
this project.

    VENV/bin/python benchmarks/context_baselines.py medspacy|negspacy IN.json OUT.json
    VENV/bin/python benchmarks/context_baselines.py medspacy-sections IN.json OUT.json

``IN.json``: ``{"documents": [{"text", "spans": [[start, end], …]}]}`` (character offsets).
``OUT.json``: per document, per span, the attributes the engine gives it (medspaCy:
``negated``, ``possible``, ``hypothetical``, ``historical``, ``family`` and the ``section``
category; negspacy: ``negated``), and the seconds the engine took. ``medspacy-sections``: medspaCy's
sectionizer alone; per document, ``[start, end, category]`` of each section header.
"""

from __future__ import annotations

import json
import sys
import time


def _spans(doc, spans):
    """The document's entities: each gold span, expanded to whole spaCy tokens."""
    from spacy.tokens import Span
    from spacy.util import filter_spans

    ents = []
    for k, (a, b) in enumerate(spans):
        span = doc.char_span(a, b, label="FINDING", alignment_mode="expand")
        if span is not None:
            span = Span(doc, span.start, span.end, label="FINDING", kb_id=str(k))
            ents.append(span)
    # spaCy entities may not overlap: overlapping gold spans are scored one by one instead
    return ents, filter_spans(ents)


def medspacy_runner():
    import medspacy
    from spacy.tokens import Span

    nlp = medspacy.load(
        medspacy_enable=["medspacy_pyrush", "medspacy_sectionizer", "medspacy_context"]
    )

    def run(text, spans):
        doc = nlp.make_doc(text)
        out = [None] * len(spans)
        ents, _kept = _spans(doc, spans)
        # one pass per group of non-overlapping spans, so that every span is scored
        groups, left = [], list(ents)
        while left:
            from spacy.util import filter_spans

            chosen = filter_spans(left)
            groups.append(chosen)
            ids = {id(e) for e in chosen}
            left = [e for e in left if id(e) not in ids]
        for group in groups:
            doc = nlp.make_doc(text)
            doc.ents = [Span(doc, e.start, e.end, label="FINDING", kb_id=e.kb_id_) for e in group]
            for _, proc in nlp.pipeline:
                doc = proc(doc)
            for ent in doc.ents:
                section = ent._.section
                out[int(ent.kb_id_)] = {
                    "negated": bool(ent._.is_negated),
                    "possible": bool(ent._.is_uncertain),
                    "hypothetical": bool(ent._.is_hypothetical),
                    "historical": bool(ent._.is_historical),
                    "family": bool(ent._.is_family),
                    "section": section.category if section is not None else None,
                }
        return out

    return run


def medspacy_sections(texts):
    """medspaCy's sectionizer alone: per text, each section's header (start and end
    characters) and category."""
    import medspacy

    nlp = medspacy.load(medspacy_enable=["medspacy_sectionizer"])
    out = []
    for doc in nlp.pipe(texts, batch_size=64):
        found = []
        for section in doc._.sections:
            if section.title_end > section.title_start:
                title = doc[section.title_start : section.title_end]
                found.append([title.start_char, title.end_char, section.category])
        out.append(found)
    return out


def negspacy_runner():
    import negspacy.negation  # noqa: F401  (registers the "negex" factory)
    import spacy
    from negspacy.termsets import termset
    from spacy.tokens import Span

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe(
        "negex",
        config={"ent_types": ["FINDING"], "neg_termset": termset("en_clinical").get_patterns()},
    )

    def run(text, spans):
        out = [None] * len(spans)
        doc = nlp.make_doc(text)
        ents, _ = _spans(doc, spans)
        left = list(ents)
        from spacy.util import filter_spans

        while left:
            chosen = filter_spans(left)
            ids = {id(e) for e in chosen}
            left = [e for e in left if id(e) not in ids]
            doc = nlp.make_doc(text)
            doc.ents = [Span(doc, e.start, e.end, label="FINDING", kb_id=e.kb_id_) for e in chosen]
            for _, proc in nlp.pipeline:
                doc = proc(doc)
            for ent in doc.ents:
                out[int(ent.kb_id_)] = {"negated": bool(ent._.negex)}
        return out

    return run


def main() -> None:
    import logging

    logging.disable(logging.INFO)
    try:  # PyRuSH logs every sentence it splits
        from loguru import logger

        logger.remove()
    except ImportError:
        pass
    engine, src, dst = sys.argv[1:4]
    with open(src, encoding="utf-8") as fh:
        given = json.load(fh)
    if engine == "medspacy-sections":
        started = time.perf_counter()
        sections = medspacy_sections([d["text"] for d in given["documents"]])
        seconds = time.perf_counter() - started
        with open(dst, "w", encoding="utf-8") as fh:
            json.dump({"engine": engine, "seconds": seconds, "sections": sections}, fh)
        return
    run = {"medspacy": medspacy_runner, "negspacy": negspacy_runner}[engine]()
    documents = given["documents"]
    started = time.perf_counter()
    results = [run(d["text"], d["spans"]) for d in documents]
    seconds = time.perf_counter() - started
    with open(dst, "w", encoding="utf-8") as fh:
        json.dump({"engine": engine, "seconds": seconds, "results": results}, fh)


if __name__ == "__main__":
    main()
