"""The benchmark harness's command line: run a protocol, aggregate its results, fetch corpora.

    python benchmarks/bench.py run PROTOCOL --data DIR [--device cuda] [--jobs N] [--fetch]
    python benchmarks/bench.py aggregate PROTOCOL|results/…/protocol.json [--results DIR]
    python benchmarks/bench.py fetch NCBI-disease-IOB … --dest DIR
    python benchmarks/bench.py fetch MACCROBAT2020 CHIA [--from-git CHIA=DIR]  # ~/.cache/mslm

``PROTOCOL`` is a TOML file or a name in ``benchmarks/protocols/``; results go to
``benchmarks/results/<protocol>/`` unless ``--results`` says otherwise. The last line printed
is the headline as one JSON object. (``reproduce.py`` is ``run`` with this repository's data.)
"""

from __future__ import annotations

import logging
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if __name__ == "__main__":
    from harness.cli import main

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    sys.exit(main())
