"""The measured figures of docs/method.md, each read from the committed result file it comes
from (see :mod:`harness.figures`).

Most numbers on the page are not our measurements and stay unregistered: the paper's own figures
(Abaho et al., NAACL 2024: the +3.2 exact-match points, §8's tables and lists, the 0.2–3.4
points of the ablation, BLURB's PubMedBERT scores; also in ``benchmarks/harness/paper.py``, no
result file), its equations' numbers and constants (eq. 2–12, the 0.5 threshold), its settings
and grid (ELM / BLM rates, batch 8, 20 epochs, 5 seeds), the worked examples that
``tests/test_weights.py`` checks (1,000 / 3,000 tokens → 0.25 / 0.75, 0.3775 / 0.6225), the
mask types 0/1/2, the 100-wide task embeddings, the learning curve's sizes (100–2,000
sentences) and the epochs of ``auto``'s variants (3 and 4).

Not registered, their figures being in no committed result file:

- §2: the masked tokens at the paper's defaults, "about 834 against 444 sub-words per 200
  NCBI-disease sentences", and the research code's weights worked out from them
  (≈ 0.538 / 0.462; in ``tests/test_weights.py`` only);
- §3b: the first honest-vs-leaky check's table (MiniLM, 2,000 NCBI-disease sentences, 3 epochs,
  one seed: vanilla 0.777; MSLM on the masked pass 0.000 honest, 0.817 gold-masked; a clean
  pass 0.707; MLM loss × 0.1 0.760; ELM 0.5 0.283 / 0.672; one epoch of weighted MLM then
  vanilla 0.775) — ``benchmarks/honest_vs_leaky.py`` writes such a file, none is committed,
  and no run of ``honest-mslm``, ``cpu/honest-mslm``, ``cpu-small`` or ``gpu/cpu-small`` holds
  these values;
- "Calibrated confidence": NCBI-disease, MiniLM, 3 epochs, seed 42 — T = 1.80, test ECE
  0.148 → 0.078, the per-word fit T = 1.29, 0.107 (the committed runs' calibrations are seeds
  1–3, none of them these).
"""

from __future__ import annotations

from harness.figures import Fig, Line, _row

PAGE = "docs/method.md"
CURVE = "mslm-curve/summary.json"

LINES: tuple[Line, ...] = (
    # -- 3b. Honest evaluation: the default the learning curve picked
    _row(
        PAGE,
        "controls included: today `auto`, plain fine-tuning (",
        None,  # 3 epochs: vanilla's setting
        Fig(CURVE, ("decision", "auto", 0, "up_to_sentences"), ","),
    ),
)
