"""The public BLURB NER corpora (Crichton et al. 2017 splits, CC BY 4.0) and where to fetch
them. Files whose sha256 we know are verified after download; a mismatch removes the file.
"""

from __future__ import annotations

import logging
import os
import urllib.request
from pathlib import Path

from mslm_core.bundle import sha256_file
from mslm_core.errors import ConfigError

log = logging.getLogger(__name__)

BASE_URL = "https://raw.githubusercontent.com/cambridgeltl/MTL-Bioinformatics-2016/master/data"
SPLIT_FILES = ("train.tsv", "devel.tsv", "test.tsv")

# sha256 of the files as distributed (the BLURB IOB splits of MTL-Bioinformatics-2016).
KNOWN_SHA256: dict[str, dict[str, str]] = {
    "NCBI-disease-IOB": {
        "train.tsv": "58379baf4614b8d757d93dd7a21b202849ca99f9b9d71b49185523ff5443300c",
        "devel.tsv": "b4e1e7efcc2a35047bf2f3d281648357470e674f555d4a26a0049ac37d59cc61",
        "test.tsv": "8f088ce45dc4746592188f9e69de3d89d87f3bb8f0ed8c4a287d018123fa148d",
    },
    "BC5CDR-chem-IOB": {
        "train.tsv": "165c4cd2efadd0caf1bb8f3c6bcd3acca199446bb3d55eb06d9137114c9a0b2d",
        "devel.tsv": "3f1df5cfcff95735663ffc37121fd3687e82b1e9a019bec0480491502652721b",
        "test.tsv": "6fce42139a9d819151eff3ab8cb0eda6fbf861fd17d4cfe6be2123f010a3b6c5",
    },
    "BC5CDR-IOB": {
        "train.tsv": "b731361c0ed73afd04cc5fdad39afcdfd8f325d6e46c282339185a91d1af4c14",
        "devel.tsv": "b909de65c4f7e3c23bb09ad52d654cdc92e96db941abe1a5dcf6f6010c03cff5",
        "test.tsv": "e41a2843a5fff0cd8d1a88cb147968d61ae29336ca70cddc3d7fb8ff21dfa1e8",
    },
}
# The BLURB NER corpora (and BC5CDR with both types); directory names as in the source.
BLURB_NER = (
    "BC5CDR-chem-IOB",
    "BC5CDR-disease-IOB",
    "NCBI-disease-IOB",
    "BC2GM-IOB",
    "JNLPBA",
    "BC5CDR-IOB",
)


def fetch(
    datasets: list[str], dest: str | Path, base_url: str = BASE_URL, timeout: float = 60.0
) -> list[Path]:
    """Download the train/devel/test files of ``datasets`` into ``dest/<name>/``; files
    already there with the right checksum are kept. Returns the files written or kept."""
    unknown = [d for d in datasets if d not in BLURB_NER]
    if unknown:
        raise ConfigError(f"unknown dataset(s) {', '.join(unknown)}; known: {', '.join(BLURB_NER)}")
    if not base_url.startswith(("https://", "http://")):
        raise ConfigError(f"base_url must be an http(s) URL, got {base_url!r}")
    out: list[Path] = []
    for name in datasets:
        folder = Path(dest) / name
        folder.mkdir(parents=True, exist_ok=True)
        for fname in SPLIT_FILES:
            target = folder / fname
            want = KNOWN_SHA256.get(name, {}).get(fname)
            if target.exists() and want and sha256_file(target) == want:
                out.append(target)
                continue
            url = f"{base_url.rstrip('/')}/{name}/{fname}"
            log.info("fetching %s", url)
            tmp = target.with_name(f".{fname}.part")
            try:
                with (
                    urllib.request.urlopen(url, timeout=timeout) as resp,
                    open(tmp, "wb") as fh,
                ):
                    while block := resp.read(1 << 20):
                        fh.write(block)
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                raise ConfigError(f"cannot fetch {url}: {exc}") from exc
            got = sha256_file(tmp)
            if want and got != want:
                tmp.unlink(missing_ok=True)
                raise ConfigError(f"{url}: sha256 {got[:12]}… differs from the known {want[:12]}…")
            if not want:
                log.warning("%s has no known checksum; sha256 %s", url, got)
            os.replace(tmp, target)
            out.append(target)
    return out
