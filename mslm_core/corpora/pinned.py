"""Public corpora at pinned commits, each file checked against its pinned sha256, in a cache
outside any repository (never committed, never copied into a bundle).

Where a corpus comes from, in the order :func:`fetch_corpus` tries them:

- the cache (``MSLM_CORPUS_CACHE``, default ``~/.cache/mslm/corpora``), when it holds the
  pinned commit already;
- a local folder holding the same files (``from_dir``: ``/data/BC5CDR-IOB``, say),
  each looked up by its path in the repository or by its name alone;
- a local clone or mirror of the repository (``git_dir``), read at the pinned commit;
- raw.githubusercontent.com at the pinned commit.

Whatever the origin, a file whose sha256 is not the pinned one is refused and not kept. A
machine with no internet receives the cache as an archive (:func:`pack` on a connected
machine, :func:`unpack` here), checked file by file against the same pins.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

log = logging.getLogger(__name__)

DATA = Path(__file__).resolve().parent / "data"
CACHE_ENV = "MSLM_CORPUS_CACHE"
STAMP = ".complete"  # holds the pinned commit once every file is in place
#: The largest file an archive member (or a pinned zip's member) may be: every pinned file is
#: far smaller, and a 14 MB archive held a member of 3 GiB.
MAX_FILE_BYTES = 256 << 20


def default_cache() -> Path:
    """``MSLM_CORPUS_CACHE``, else ``~/.cache/mslm/corpora``."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    return Path(configured) if configured else Path.home() / ".cache" / "mslm" / "corpora"


@dataclass(frozen=True)
class PinnedCorpus:
    name: str
    repository: str  # owner/name on GitHub
    commit: str
    files: dict[str, str]  # path in the repository → sha256
    licence: str
    unzip: bool = False  # the files are zip archives, extracted after the check
    description: str = ""

    def root(self, cache: Path) -> Path:
        return Path(cache) / self.name

    def cached(self, cache: Path) -> bool:
        """Whether ``cache`` holds every pinned file at the pinned commit."""
        root = self.root(cache)
        stamp = root / STAMP
        return (
            stamp.exists()
            and stamp.read_text(encoding="utf-8").strip() == self.commit
            and all((root / path).is_file() for path in self.files)
        )


def _manifest(name: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (DATA / f"{name}.sha256").read_text(encoding="utf-8").splitlines():
        digest, path = line.split(None, 1)
        out[path.strip()] = digest
    return out


# The BLURB IOB files (Crichton et al. 2017 splits).
MTL_COMMIT = "df0df02fae6dbb87d88ffcf323b9096528f06f84"
BLURB_SHA256 = {
    "NCBI-disease-IOB": {
        "train.tsv": "58379baf4614b8d757d93dd7a21b202849ca99f9b9d71b49185523ff5443300c",
        "devel.tsv": "b4e1e7efcc2a35047bf2f3d281648357470e674f555d4a26a0049ac37d59cc61",
        "test.tsv": "8f088ce45dc4746592188f9e69de3d89d87f3bb8f0ed8c4a287d018123fa148d",
    },
    "BC5CDR-IOB": {
        "train.tsv": "b731361c0ed73afd04cc5fdad39afcdfd8f325d6e46c282339185a91d1af4c14",
        "devel.tsv": "b909de65c4f7e3c23bb09ad52d654cdc92e96db941abe1a5dcf6f6010c03cff5",
        "test.tsv": "e41a2843a5fff0cd8d1a88cb147968d61ae29336ca70cddc3d7fb8ff21dfa1e8",
    },
}
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
CDR_LICENCE = "free for research (Li et al. 2016, doi:10.1093/database/baw068)"


def corpora() -> dict[str, PinnedCorpus]:
    """Every corpus this package can fetch, by name."""
    table = [
        PinnedCorpus(
            "MACCROBAT2020",
            "Saieiei/NLP",
            "f2b522984cc621d5c7e00fbce02ddeee2a5b8077",
            _manifest("MACCROBAT2020"),
            "CC BY 4.0 (Caufield et al. 2019, doi:10.6084/m9.figshare.9764942)",
            description="200 clinical case reports, 41 entity and event types (brat)",
        ),
        PinnedCorpus(
            "CHIA",
            "Vidhate/CHIA-NER-RE",
            "ed84384ba70275eac69d273eb5325b321cda1c72",
            {"chia_with_scope.zip": CHIA_ZIP_SHA256},
            "CC BY 4.0 (Kury et al. 2020, doi:10.6084/m9.figshare.11855817)",
            unzip=True,
            description="eligibility criteria of 1,000 clinical trials written by clinicians "
            "(brat)",
        ),
        *(
            PinnedCorpus(
                name,
                "cambridgeltl/MTL-Bioinformatics-2016",
                MTL_COMMIT,
                {f"data/{name}/{f}": digest for f, digest in files.items()},
                "CC BY 4.0 (Crichton et al. 2017; " + what + ")",
                description="the BLURB IOB splits of " + what.split(" (")[0],
            )
            for name, files, what in (
                (
                    "BC5CDR-IOB",
                    BLURB_SHA256["BC5CDR-IOB"],
                    "BC5CDR (Li et al. 2016), chemicals and diseases",
                ),
                (
                    "NCBI-disease-IOB",
                    BLURB_SHA256["NCBI-disease-IOB"],
                    "NCBI-disease (Dogan et al. 2014)",
                ),
            )
        ),
        # the original PubTator releases the IOB files were made from (benchmarks, tests)
        PinnedCorpus(
            "NCBI-disease-PubTator",
            "yannistannier/textmining",
            "c4b7e27ea30589629dfdb2e2867d9e712f7748d1",
            {
                "NCBItrainset_corpus.txt": NCBI_TRAIN_SHA256,
                "NCBItestset_corpus.txt": NCBI_TEST_SHA256,
            },
            "public domain (Dogan et al. 2014, doi:10.1016/j.jbi.2013.12.006)",
        ),
        PinnedCorpus(
            "NCBI-disease-original",
            "spyysalo/ncbi-disease",
            "5a266c6fc76fb2b5184cfa397ff0a5ecdb133aec",
            {f"original-data/{path}": h for path, h in NCBI_ORIGINAL_SHA256.items()},
            "public domain (original-data/LICENSE: a United States Government Work)",
        ),
        PinnedCorpus(
            "BC5CDR-original",
            "cryptoradon/biomedRelExt",
            "e42e94570138158963ae4696298bf09232071740",
            {
                f"CDR_Data/CDR.Corpus.v010516/CDR_{split}Set.PubTator.txt": digest
                for split, digest in CDR_ORIGINAL_SHA256.items()
            },
            CDR_LICENCE,
        ),
        PinnedCorpus(
            "BC5CDR-PubTator",
            "MartinH2k3/SLM-NER",
            "2a22b37f29cd2b5a0f86d48f59f1c891fce3346e",
            {f"CDRdatasetPreprocessing/CDR_{s}Set.PubTator.txt": h for s, h in CDR_SHA256.items()},
            CDR_LICENCE,
        ),
        # the clinical context benchmark's other corpora (benchmarks/assertion.py)
        PinnedCorpus(
            "BioScope-clinical-anon",
            "joey234/negation-focused-pretraining",
            "c90be5e8ce73dcabe09d06e7e1ef94b7622f79e5",
            {
                "data/bioscope/clinical_merger/clinical_records_anon.xml": (
                    "44693bc7ea0f9466c1a68f0e461d62c560bcdfe5c9279ffc82074b2d3ae8360b"
                )
            },
            "research use (Vincze et al. 2008, doi:10.1186/1471-2105-9-S11-S9); the copy "
            "states no licence",
            description="BioScope's clinical part as released: 1,954 radiology reports' "
            "negation and speculation cues and scopes, every word replaced by '*' (the words "
            "are the CMC 2007 challenge's: CMC2007)",
        ),
        PinnedCorpus(
            "CMC2007",
            "ngoduyvu/Convolution-text-classification",
            "60a508158b374925a333916177e61faa5085d8ef",
            {
                "2007ChallengeTrainData.xml": (
                    "9ddf73c88eed439c4d5f463954897189cbe8e68760bc65ae645586c1cd6fa7d0"
                ),
                "2007ChallengeTestDataNoCodes.xml": (
                    "dff2ba1490dc04cfd38252d9e201d17eb883de5b11c099ff3497c72c0df86c6f"
                ),
            },
            "research use (Pestian et al. 2007, the CMC Medical NLP Challenge); the copy "
            "states no licence",
            description="the 1,954 anonymised radiology reports of the 2007 CMC challenge "
            "(clinical history and impression)",
        ),
        PinnedCorpus(
            "MTSamples",
            "kdpsingh/clinspacy",
            "2efc73a3dbd152cb57aa65e263ae37310e068c61",
            {
                "data/mtsamples.rda": (
                    "9c81fe9f9062b4d5ecc9083f6843aef592137d0c5756cf3543270224b7379164"
                )
            },
            "CC0 (mtsamples.com transcriptions via Kaggle tboyle10/medicaltranscriptions, as "
            "the clinspacy package documents them; the package is MIT)",
            description="4,999 transcribed sample medical reports with their section headers "
            "(R data)",
        ),
        PinnedCorpus(
            "Eunomia-Synthea27Nj",
            "OHDSI/EunomiaDatasets",
            "3efd533eb95a41a56d5b0758b0d7c8fa57e1303e",
            {
                "datasets/Synthea27Nj/Synthea27Nj_5.4.zip": (
                    "cdd3971be325e17b0e872bf4560711ab4c346917ecb079e2faf32badb55cb693"
                )
            },
            "Apache-2.0 (OHDSI EunomiaDatasets; synthetic Synthea patients)",
            description="an OMOP CDM 5.4 example with the vocabulary subset it uses: 2,294 "
            "concepts (SNOMED, LOINC, RxNorm, UCUM), their relationships (CSV in a zip)",
        ),
        # the sense inventories of clinical shorthand (mslm_core.shorthand): the Medical
        # Abbreviation and Acronym Meta-Inventory's sources drawn from clinical notes
        PinnedCorpus(
            "clinical-abbreviations",
            "lisavirginia/clinical-abbreviations",
            "c2530a6519ec02246a4f577bf073e4dfe9428518",
            {
                "sources/4-vanderbilt/vanderbilt_clinic_notes.txt": (
                    "70824585e716d868e918635efb48da5864e4ba48015d56cfe4d8803749b1f957"
                ),
                "sources/4-vanderbilt/vanderbilt_discharge_sums.txt": (
                    "6b09e107f7298180e6e69b6074926c59a19ce1e2773368b99a2a9ed29e23ec10"
                ),
                "sources/6-stetson/sense_distribution_448.txt": (
                    "6ea68f1fe2fff2bc202896862b4c859af32c2ba102a7d4e649562ad87a1c2037"
                ),
                "LICENSE.txt": "9e5f1b3c610b9c2da5c313bf81d577a7d1acec686bdb0384edefa6df0f90cd94",
            },
            "CC BY 4.0 (Grossman Liu et al. 2021, doi:10.1038/s41597-021-00929-4, the Medical "
            "Abbreviation and Acronym Meta-Inventory); its Vanderbilt sources from Wu et al. "
            "2013 (sign-out and discharge notes), Stetson et al. 2002",
            description="senses of 2,800 clinical abbreviations with their frequency in "
            "clinic notes, discharge summaries and sign-out notes",
        ),
    ]
    return {c.name: c for c in table}


def get_corpus(name: str) -> PinnedCorpus:
    table = corpora()
    if name not in table:
        raise ConfigError(f"unknown corpus {name!r}; known: {', '.join(table)}")
    return table[name]


def _download(corpus: PinnedCorpus, path: str, timeout: float) -> bytes:
    url = f"https://raw.githubusercontent.com/{corpus.repository}/{corpus.commit}/{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            data: bytes = resp.read()  # urlopen's return is untyped in typeshed
            return data
    except OSError as exc:
        raise ConfigError(
            f"cannot fetch {url}: {exc} (no GitHub access? fill the cache from an archive "
            f"made on a connected machine — mslm corpora fetch … --archive FILE there, "
            f"mslm corpora unpack FILE here — or pass a clone of {corpus.repository})"
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


def _from_dir(folder: Path, path: str) -> bytes:
    for candidate in (folder / path, folder / Path(path).name):
        if candidate.is_file():
            return candidate.read_bytes()
    raise ConfigError(f"{folder}: has no {path} (nor {Path(path).name})")


def _check(corpus: PinnedCorpus, path: str, data: bytes) -> None:
    got, want = hashlib.sha256(data).hexdigest(), corpus.files[path]
    if got != want:
        raise ConfigError(
            f"{corpus.name}: {path} has sha256 {got[:12]}…, pinned {want[:12]}…; not kept"
        )


def _store(corpus: PinnedCorpus, root: Path, path: str, data: bytes) -> None:
    """The pinned file under ``root`` (a zip is kept, so that :func:`pack` can carry it, and
    extracted beside it)."""
    if corpus.unzip:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in archive.infolist():
                target = (root / member.filename).resolve()
                if not target.is_relative_to(root.resolve()):
                    raise ConfigError(
                        f"{corpus.name}: {path} holds a path outside its folder: {member.filename}"
                    )
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if member.file_size > MAX_FILE_BYTES:  # a zip bomb: refused unread
                    raise ConfigError(
                        f"{corpus.name}: {path} holds {member.filename} of {member.file_size:,} "
                        f"bytes, more than {MAX_FILE_BYTES:,}"
                    )
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.part")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def fetch_corpus(
    name: str,
    dest: str | Path | None = None,
    git_dir: str | Path | None = None,
    timeout: float = 60.0,
    from_dir: str | Path | None = None,
) -> Path:
    """The corpus's folder under ``dest`` (``dest/NAME/``; default: :func:`default_cache`),
    fetched and checked if needed (see the module's docstring for the origins)."""
    corpus = get_corpus(name)
    root = corpus.root(Path(dest) if dest is not None else default_cache())
    if corpus.cached(root.parent):
        return root
    root.mkdir(parents=True, exist_ok=True)
    if git_dir is not None:
        git_dir = Path(git_dir)
        if (git_dir / ".git").is_dir():
            git_dir = git_dir / ".git"
    origin = from_dir or git_dir or f"github.com/{corpus.repository}"
    log.info(
        "fetching %s (%d files) at %s from %s", name, len(corpus.files), corpus.commit[:12], origin
    )
    for path in sorted(corpus.files):
        if from_dir is not None:
            data = _from_dir(Path(from_dir), path)
        elif git_dir is not None:
            data = _from_git(corpus, Path(git_dir), path)
        else:
            data = _download(corpus, path, timeout)
        _check(corpus, path, data)
        _store(corpus, root, path, data)
    (root / STAMP).write_text(corpus.commit + "\n", encoding="utf-8")
    return root


def cached_names(cache: str | Path | None = None) -> list[str]:
    """The corpora the cache holds at their pinned commits."""
    where = Path(cache) if cache is not None else default_cache()
    return [name for name, c in corpora().items() if c.cached(where)]


# -- carrying the cache to a machine with no internet ---------------------------------------
def pack(archive: str | Path, names: Iterable[str], cache: str | Path | None = None) -> Path:
    """Write the cached ``names`` (each fetched first if needed) into one tar archive, the
    pinned files only (what :func:`unpack` checks), written atomically."""
    where = Path(cache) if cache is not None else default_cache()
    archive = Path(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(f".{archive.name}.part")
    gz = archive.name.endswith((".tar.gz", ".tgz"))
    with tarfile.open(tmp, "w:gz") if gz else tarfile.open(tmp, "w") as tar:
        for name in names:
            corpus = get_corpus(name)
            fetch_corpus(name, where)
            for path in sorted(corpus.files):
                tar.add(corpus.root(where) / path, arcname=f"{name}/{path}")
    os.replace(tmp, archive)
    return archive


def unpack(archive: str | Path, cache: str | Path | None = None) -> list[str]:
    """Fill the cache from an archive made by :func:`pack`: every member is checked against
    the pins of its corpus (an unknown corpus, an unexpected path or a wrong sha256 is
    refused and nothing of that corpus is kept). Returns the corpora installed."""
    where = Path(cache) if cache is not None else default_cache()
    payload: dict[str, dict[str, bytes]] = {}
    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                if not member.isfile():
                    continue
                name, _, path = member.name.partition("/")
                corpus = get_corpus(name)
                if path not in corpus.files:
                    raise ConfigError(f"{archive}: {member.name} is not a pinned file of {name}")
                if member.size > MAX_FILE_BYTES:  # said by its header: refused unread
                    raise ConfigError(
                        f"{archive}: {member.name} holds {member.size:,} bytes, more than any "
                        f"pinned file ({MAX_FILE_BYTES:,}); not kept"
                    )
                fh = tar.extractfile(member)
                data = fh.read(MAX_FILE_BYTES + 1) if fh is not None else b""
                _check(corpus, path, data)
                payload.setdefault(name, {})[path] = data
    except (OSError, tarfile.TarError) as exc:
        raise ConfigError(f"{archive}: not a corpus archive ({exc})") from exc
    installed = []
    for name, files in sorted(payload.items()):
        corpus = get_corpus(name)
        missing = sorted(set(corpus.files) - set(files))
        if missing:
            raise ConfigError(f"{archive}: {name} lacks {len(missing)} file(s), e.g. {missing[0]}")
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=_mkdir(where)))
        try:
            for path, data in files.items():
                _store(corpus, staging, path, data)
            (staging / STAMP).write_text(corpus.commit + "\n", encoding="utf-8")
            shutil.rmtree(corpus.root(where), ignore_errors=True)
            os.replace(staging, corpus.root(where))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        installed.append(name)
    return installed


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
