"""Corpora fetched at pinned commits with pinned sha256 into a cache outside the repository —
never committed. Clinical-style corpora with assertion labels (brat standoff):

- MACCROBAT2020 (Caufield et al. 2019, 200 clinical case reports; CC BY 4.0), as mirrored in
  GitHub ``Saieiei/NLP`` at commit f2b5229…, folder ``MACCROBAT2020/``: events with
  ``POLARITY`` attributes (NEG, UNCERTAIN, MAYBE_NEG, MAYBE_POS). Every file's sha256 is in
  ``benchmarks/corpora/MACCROBAT2020.sha256``.
- CHIA (Kury et al. 2020, clinical-trial eligibility criteria; CC BY 4.0), GitHub
  ``Vidhate/CHIA-NER-RE`` at commit ed84384…, ``chia_with_scope.zip``: ``Negation`` and
  ``Mood`` entities linked to what they modify (``Has_negation``/``Has_mood``, directly or
  through a ``Scope``).

And the original PubTator releases of two corpora the BLURB IOB files were made from, to
check that they are read as released (ids, classes, known flaws):

- NCBI-disease (Doğan et al. 2014; public domain, a work of the NCBI), train and test files
  as mirrored in GitHub ``yannistannier/textmining`` at commit c4b7e27….
- NCBI-disease again, as issue 21 names it for concept linking: GitHub ``spyysalo/ncbi-disease``
  at commit 5a266c6…, ``original-data/`` (train, devel and test; its training file's line 3249
  is flawed too, trailing spaces in the mention column: read with ``trust_offsets``).
- BC5CDR as issue 21 names it: GitHub ``cryptoradon/biomedRelExt``,
  ``CDR_Data/CDR.Corpus.v010516/``, all three files at commit e42e945… (at HEAD the training
  file is train+dev concatenated; dev and test are the same blobs at both commits).
- BC5CDR (Li et al. 2016; BioCreative V CDR task, free for research), train, development and
  test files as mirrored in GitHub ``MartinH2k3/SLM-NER`` at commit 2a22b37…, folder
  ``CDRdatasetPreprocessing/``.

``fetch_corpus(name, dest)`` downloads from raw.githubusercontent.com; ``git_dir=`` reads the
same commit from a local clone or mirror instead (machines without GitHub access). Either way
each file is checked against its pinned sha256 before it is kept.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import subprocess
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mslm_core.errors import ConfigError

log = logging.getLogger(__name__)
CORPORA_DIR = Path(__file__).resolve().parents[1] / "corpora"
DEFAULT_CACHE = Path(
    os.environ.get("MSLM_CORPUS_CACHE", Path.home() / ".cache" / "mslm" / "corpora")
)


CHIA_ZIP_SHA256 = "1707d855acbd39cc76ef66618bcde1d9ff4d7c6600bf3453848c7d8c8f312a4c"
NCBI_TRAIN_SHA256 = "59fdd503469ce052b2eb80ea1d53add00ff3706d98736958f9e9775e790dea36"
NCBI_TEST_SHA256 = "61c8050bf6979ef7b943ec1158dfc03b651ea3367d4c37356f9de4841e85c9a3"
NCBI_ORIGINAL_SHA256 = {
    "train/NCBItrainset_corpus.txt": (
        "f311381b28a6d0f641f57f4a963bb83619c2bdec5cd9caabb1381f894d5db817"
    ),
    "devel/NCBIdevelopset_corpus.txt": (
        "02db559974624ae9cbe6cd95d64d953e6926bb63afb6b25b63e53bd8b41a4b55"
    ),
    "test/NCBItestset_corpus.txt": NCBI_TEST_SHA256,  # the same file as the other mirror's
    "LICENSE": "77f63de888c0a31dbdcc3f19a66d9c7ea64072f487fb302f250b1e7593d50ec9",
}
CDR_ORIGINAL_SHA256 = {
    "Training": "fb00f93b06ca946dac9d909245679493a22ff742c70df2448c4bab2ab1a5140d",
    "Development": "9e18d8e700168887a7919e62f67ac2ce2357e3f409a48ee992906abdd80fe3e5",
    "Test": "a3c48d5f35bdfce20c2371778abedc9fd24d1da092207072e5181ad53c8d0e2f",
}
CDR_SHA256 = {
    "Training": "8748e229c22504184fb242ab3819efdac04e7b0ff5ee7480c290b6439b98acb0",
    "Development": "265c2cd66808e3e03cddd59796bcf3e37c9577f6933cfbf2906a91edf4e447ab",
    "Test": "6514af77b548f7a699723a1a898c8577bd62f25528f92f8ee872b8d0b216108b",
}


@dataclass(frozen=True)
class PinnedCorpus:
    name: str
    repository: str  # owner/name on GitHub
    commit: str
    files: dict[str, str]  # path in the repository → sha256
    licence: str
    unzip: bool = False  # the files are zip archives, extracted after the check


def _manifest(name: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (CORPORA_DIR / f"{name}.sha256").read_text(encoding="utf-8").splitlines():
        digest, path = line.split(None, 1)
        out[path.strip()] = digest
    return out


def corpora() -> dict[str, PinnedCorpus]:
    return {
        "MACCROBAT2020": PinnedCorpus(
            "MACCROBAT2020",
            "Saieiei/NLP",
            "f2b522984cc621d5c7e00fbce02ddeee2a5b8077",
            _manifest("MACCROBAT2020"),
            "CC BY 4.0 (Caufield et al. 2019, doi:10.6084/m9.figshare.9764942)",
        ),
        "CHIA": PinnedCorpus(
            "CHIA",
            "Vidhate/CHIA-NER-RE",
            "ed84384ba70275eac69d273eb5325b321cda1c72",
            {"chia_with_scope.zip": CHIA_ZIP_SHA256},
            "CC BY 4.0 (Kury et al. 2020, doi:10.6084/m9.figshare.11855817)",
            unzip=True,
        ),
        "NCBI-disease-PubTator": PinnedCorpus(
            "NCBI-disease-PubTator",
            "yannistannier/textmining",
            "c4b7e27ea30589629dfdb2e2867d9e712f7748d1",
            {
                "NCBItrainset_corpus.txt": NCBI_TRAIN_SHA256,
                "NCBItestset_corpus.txt": NCBI_TEST_SHA256,
            },
            "public domain (Dogan et al. 2014, doi:10.1016/j.jbi.2013.12.006)",
        ),
        "NCBI-disease-original": PinnedCorpus(
            "NCBI-disease-original",
            "spyysalo/ncbi-disease",
            "5a266c6fc76fb2b5184cfa397ff0a5ecdb133aec",
            {f"original-data/{path}": h for path, h in NCBI_ORIGINAL_SHA256.items()},
            "public domain (original-data/LICENSE: a United States Government Work)",
        ),
        "BC5CDR-original": PinnedCorpus(
            "BC5CDR-original",
            "cryptoradon/biomedRelExt",
            "e42e94570138158963ae4696298bf09232071740",
            {
                f"CDR_Data/CDR.Corpus.v010516/CDR_{split}Set.PubTator.txt": digest
                for split, digest in CDR_ORIGINAL_SHA256.items()
            },
            "free for research (Li et al. 2016, doi:10.1093/database/baw068)",
        ),
        "BC5CDR-PubTator": PinnedCorpus(
            "BC5CDR-PubTator",
            "MartinH2k3/SLM-NER",
            "2a22b37f29cd2b5a0f86d48f59f1c891fce3346e",
            {f"CDRdatasetPreprocessing/CDR_{s}Set.PubTator.txt": h for s, h in CDR_SHA256.items()},
            "free for research (Li et al. 2016, doi:10.1093/database/baw068)",
        ),
    }


def _download(corpus: PinnedCorpus, path: str, timeout: float) -> bytes:
    url = f"https://raw.githubusercontent.com/{corpus.repository}/{corpus.commit}/{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read()
    except OSError as exc:
        raise ConfigError(
            f"cannot fetch {url}: {exc} (no GitHub access? pass --from-git with a clone of "
            f"{corpus.repository})"
        ) from exc


def _from_git(corpus: PinnedCorpus, git_dir: Path, path: str) -> bytes:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{corpus.commit}:{path}"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise ConfigError(
            f"{git_dir}: has no {path} at {corpus.commit[:12]} "
            f"({done.stderr.decode(errors='replace').strip()})"
        )
    return done.stdout


def fetch_corpus(
    name: str,
    dest: str | Path = DEFAULT_CACHE,
    git_dir: str | Path | None = None,
    timeout: float = 60.0,
) -> Path:
    """The corpus's folder under ``dest`` (``dest/NAME/``), fetched and checked if needed."""
    table = corpora()
    if name not in table:
        raise ConfigError(f"unknown corpus {name!r}; known: {', '.join(table)}")
    corpus = table[name]
    root = Path(dest) / name
    stamp = root / ".complete"
    if stamp.exists() and stamp.read_text(encoding="utf-8").strip() == corpus.commit:
        return root
    root.mkdir(parents=True, exist_ok=True)
    if git_dir is not None:
        git_dir = Path(git_dir)
        if (git_dir / ".git").is_dir():
            git_dir = git_dir / ".git"
    log.info("fetching %s (%d files) at %s", name, len(corpus.files), corpus.commit[:12])
    for path, want in sorted(corpus.files.items()):
        data = _from_git(corpus, git_dir, path) if git_dir else _download(corpus, path, timeout)
        got = hashlib.sha256(data).hexdigest()
        if got != want:
            raise ConfigError(
                f"{name}: {path} has sha256 {got[:12]}…, pinned {want[:12]}…; not kept"
            )
        if corpus.unzip:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for member in archive.infolist():
                    target = (root / member.filename).resolve()
                    if not target.is_relative_to(root.resolve()):
                        raise ConfigError(
                            f"{name}: {path} holds a path outside its folder: {member.filename}"
                        )
                archive.extractall(root)
        else:
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.part")
            tmp.write_bytes(data)
            os.replace(tmp, target)
    stamp.write_text(corpus.commit + "\n", encoding="utf-8")
    return root


# -- brat standoff ----------------------------------------------------------------------------
@dataclass
class BratEntity:
    id: str
    type: str
    start: int
    end: int
    text: str


@dataclass
class BratDocument:
    name: str
    text: str
    entities: dict[str, BratEntity] = field(default_factory=dict)
    events: dict[str, str] = field(default_factory=dict)  # event id → its trigger's entity id
    attributes: list[tuple[str, str, str]] = field(default_factory=list)  # (name, target, value)
    relations: list[tuple[str, str, str]] = field(default_factory=list)  # (type, arg1, arg2)


_ANN_LINE = re.compile(r"^(?:[TEARMN#]\d+|\*)\t")


def read_brat(txt: Path) -> BratDocument:
    """One ``.txt``/``.ann`` pair. Discontinuous spans keep their outer extent."""
    # no newline translation: brat offsets count a "\r\n" as two characters (CHIA has them)
    with open(txt, encoding="utf-8", newline="") as fh:
        text = fh.read()
    doc = BratDocument(txt.stem, text)
    ann = txt.with_suffix(".ann")
    for lineno, line in enumerate(ann.read_text(encoding="utf-8").splitlines(), 1):
        if not _ANN_LINE.match(line):
            continue  # blank, or the rest of an entity text that holds a line break (CHIA)
        parts = line.split("\t")
        ident = parts[0]
        try:
            if ident.startswith("T"):
                kind, _, spans = parts[1].partition(" ")
                offsets = [tuple(map(int, s.split())) for s in spans.split(";")]
                start, end = min(a for a, _ in offsets), max(b for _, b in offsets)
                doc.entities[ident] = BratEntity(ident, kind, start, end, text[start:end])
            elif ident.startswith("E"):
                trigger = parts[1].split()[0].split(":")[1]
                doc.events[ident] = trigger
            elif ident.startswith("A"):
                fields = parts[1].split()
                doc.attributes.append(
                    (fields[0], fields[1], fields[2] if len(fields) > 2 else "true")
                )
            elif ident.startswith("R"):
                kind, a1, a2 = parts[1].split()[:3]
                doc.relations.append((kind, a1.split(":")[1], a2.split(":")[1]))
        except (IndexError, ValueError) as exc:
            raise ConfigError(f"{ann}:{lineno}: not brat standoff ({exc})") from exc
    return doc


def brat_documents(folder: Path) -> Iterator[BratDocument]:
    for txt in sorted(folder.glob("*.txt")):
        if txt.with_suffix(".ann").exists():
            yield read_brat(txt)


# -- gold assertions --------------------------------------------------------------------------
@dataclass
class GoldEntity:
    start: int
    end: int
    type: str
    negated: bool
    possible: bool  # uncertain (MACCROBAT) / mood (CHIA: possible or hypothetical)


@dataclass
class GoldDocument:
    name: str
    text: str
    entities: list[GoldEntity]


# MACCROBAT: the findings its POLARITY attribute is about (events); NEG → negated,
# UNCERTAIN / MAYBE_NEG / MAYBE_POS → possible.
MACCROBAT_POSSIBLE = {"UNCERTAIN", "MAYBE_NEG", "MAYBE_POS"}
# CHIA: the clinical entity types a Negation or Mood can modify.
CHIA_TYPES = {"Condition", "Drug", "Procedure", "Observation", "Measurement", "Device"}


def maccrobat_gold(folder: Path) -> list[GoldDocument]:
    docs = []
    for d in brat_documents(folder):
        polarity: dict[str, str] = {}
        for name, target, value in d.attributes:
            if name == "POLARITY" and target in d.events:
                polarity[d.events[target]] = value
        ents = []
        for trigger in sorted(set(d.events.values())):
            e = d.entities.get(trigger)
            if e is None:
                continue
            p = polarity.get(trigger, "POS")
            ents.append(GoldEntity(e.start, e.end, e.type, p == "NEG", p in MACCROBAT_POSSIBLE))
        docs.append(GoldDocument(d.name, d.text, sorted(ents, key=lambda g: g.start)))
    return docs


def chia_gold(folder: Path) -> list[GoldDocument]:
    docs = []
    for d in brat_documents(folder):
        negated_ids: set[str] = set()
        mood_ids: set[str] = set()
        for kind, a1, _ in d.relations:
            if kind == "Has_negation":
                negated_ids.add(a1)
            elif kind == "Has_mood":
                mood_ids.add(a1)

        def reached(ids: set[str], e: BratEntity, d: BratDocument = d) -> bool:
            if e.id in ids:
                return True
            # through a Scope that holds the entity
            return any(
                (s := d.entities.get(i)) is not None
                and s.type == "Scope"
                and s.start <= e.start
                and e.end <= s.end
                for i in ids
            )

        ents = [
            GoldEntity(e.start, e.end, e.type, reached(negated_ids, e), reached(mood_ids, e))
            for e in d.entities.values()
            if e.type in CHIA_TYPES
        ]
        docs.append(GoldDocument(d.name, d.text, sorted(ents, key=lambda g: g.start)))
    return docs
