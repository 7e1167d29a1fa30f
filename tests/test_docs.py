"""The README is a front page and the reference lives in docs/ (issue 32): the README stays short,
keeps the two commands CI runs, and every relative link in it and in docs/ reaches a file that
exists — and, with an anchor, a heading of that file (GitHub's slugs)."""

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
MAX_README_LINES = 200

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
# [text](target) and ![alt](target), the target up to a space (a title may follow) or ")"
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def outside_fences(text: str) -> str:
    """The text with the lines of fenced code blocks blanked (line numbers stay right)."""
    kept, fence = [], None
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * 3
        elif fence is not None and line.lstrip().startswith(fence):
            fence = None
        elif fence is None:
            kept.append(line)
            continue
        kept.append("")
    return "\n".join(kept)


def prose(text: str) -> str:
    """The text outside code, inline code replaced by spaces: a link in code is an example."""
    return INLINE_CODE.sub(lambda m: " " * len(m.group(0)), outside_fences(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (markup removed), lower case, punctuation dropped
    but for "-" and "_", each space a "-"."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    # letters, marks and digits stay (Unicode categories L, M, N)
    kept = "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LMN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a markdown file, repeated headings numbered as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    for line in outside_fences(path.read_text(encoding="utf-8")).splitlines():
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link that is not a URL; a link's text may span lines."""
    text = prose(path.read_text(encoding="utf-8"))
    out = []
    for m in LINK.finditer(text):
        target = m.group(1)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:
            out.append((text.count("\n", 0, m.start(1)) + 1, target))
    return out


def test_the_slugs_are_githubs():
    assert slug("Does MSLM help?") == "does-mslm-help"
    assert slug("3b. Honest evaluation: no prediction masks its input") == (
        "3b-honest-evaluation-no-prediction-masks-its-input"
    )
    assert slug("Bulk annotation and OMOP `NOTE_NLP`") == "bulk-annotation-and-omop-note_nlp"
    assert slug("`metrics.json` (`mslm evaluate --output`, a job's metrics)") == (
        "metricsjson-mslm-evaluate---output-a-jobs-metrics"
    )
    assert slug("Operations: images, air gap, scaling") == "operations-images-air-gap-scaling"
    assert "metricsjson-mslm-evaluate---output-a-jobs-metrics-an-evaluations" in anchors(
        REPO / "docs" / "design.md"
    )


def test_links_are_found_across_lines_and_not_in_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "a [real](x.md) and `[code](y.md)`\n```\n[fenced](z.md)\n```\n"
        "a [text on\ntwo lines](w.md#a) and [a site](https://example.org)\n"
    )
    assert relative_links(page) == [(1, "x.md"), (6, "w.md#a")]


def test_the_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines; the reference belongs in docs/"
    )


def test_the_readme_keeps_the_two_commands_ci_runs():
    readme = README.read_text(encoding="utf-8")
    assert "bash scripts/run.sh" in readme and "bash scripts/test.sh" in readme
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path):
    broken = []
    for number, target in relative_links(page):
        where, _, anchor = target.partition("#")
        file = (page.parent / where).resolve() if where else page
        if not file.exists():
            broken.append(f"line {number}: {target} (no such file)")
        elif not file.is_relative_to(REPO):
            broken.append(f"line {number}: {target} (outside the repository)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"line {number}: {target} (no heading #{anchor})")
    assert broken == []


def test_the_first_start_estimate_is_its_measurement():
    """The minutes the log promises before the first start's models train (the early one and
    the full one), the README's figures and docs/clinical-schema.md's are the committed
    measurement (benchmarks/first_start.py)."""
    import json
    import math

    from api.bootstrap import (
        EARLY_MINUTES_2CPU,
        FIRST_START_MINUTES_2CPU,
        FIRST_START_MINUTES_2CPU_SLOWEST,
    )

    results = REPO / "benchmarks/results/clinical"
    measured = json.loads((results / "first-start.json").read_text(encoding="utf-8"))
    early, full = measured["minutes_to_early"], measured["minutes_to_served"]
    assert math.ceil(full) == FIRST_START_MINUTES_2CPU
    assert math.ceil(early) == EARLY_MINUTES_2CPU
    every = [json.loads(p.read_text(encoding="utf-8")) for p in results.glob("first-start*.json")]
    served = [r["minutes_to_served"] for r in every if r.get("minutes_to_served") is not None]
    assert all(r["machine"]["threads"] == 2 for r in every) and len(served) >= 3
    assert math.ceil(max(served)) == FIRST_START_MINUTES_2CPU_SLOWEST
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert f"an early model answers **{early} minutes** after the command" in readme
    assert f"the full one replaces it at **{full} minutes**" in readme
    schema = " ".join((REPO / "docs/clinical-schema.md").read_text(encoding="utf-8").split())
    assert f"a fresh install serves its model **{full} minutes**" in schema
    assert f"its early model **{early} minutes**" in schema


def test_the_small_encoder_rate_is_the_one_chosen_on_dev():
    """MiniLM's default learning rate is the quality ablation's choice on NCBI-disease's dev
    set: the lowest of the recipe's rates within 0.1 dev points of the best (as
    docs/quality.md writes them, one decimal); the rows are the committed re-run's."""
    import json

    from mslm_core.config import SMALL_ENCODER_LR

    summary = json.loads(
        (REPO / "benchmarks/results/quality-ablation/summary.json").read_text(encoding="utf-8")
    )
    variants = json.loads(
        (REPO / "benchmarks/results/quality-ablation/protocol.json").read_text(encoding="utf-8")
    )["variants"]
    rows = summary["datasets"]["NCBI-disease-IOB"]
    rates = {
        v["learning_rate"]: round(100 * rows[name]["dev_f1_mean"], 1)
        for name, v in variants.items()
        if name.startswith("recipe") and set(v) == {"head", "decoding", "learning_rate"}
    }
    assert len(rates) >= 3 and SMALL_ENCODER_LR in rates
    best = max(rates.values())
    assert min(r for r, f1 in rates.items() if best - f1 <= 0.1 + 1e-9) == SMALL_ENCODER_LR


def test_the_speed_headlines_name_the_model_and_commit_of_their_files():
    """Each row of the README's speed and scale table names, beside its result file, the model
    and the commit that file was measured on (read from the file: its details, or the
    command that made it)."""
    import json
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    checked = 0
    for name in (
        "inference-cpu.json",
        "api_load-cpu.json",
        "bulk/bulk.json",
        "linking/summary.json",
    ):
        link = f"(benchmarks/results/{name})"
        (line,) = [t for t in readme if link in t and t.startswith("| ")]
        cell = line.split(link, 1)[1]
        data = json.loads((REPO / "benchmarks/results" / name).read_text(encoding="utf-8"))
        commit = data["details"]["machine"]["commit"]
        assert f"commit {commit}" in cell, (name, cell)
        models = re.findall(r"m-\d{14}", json.dumps(data["details"]) + data.get("command", ""))
        if name != "linking/summary.json":  # gold mentions: no model
            assert models and f"model {models[0]}" in cell, (name, cell)
        checked += 1
    assert checked == 4


#: The clinical comparisons the pages state in words, and the verdict of the paired interval
#: each needs in benchmarks/results/clinical/summary.json (clinical_model.paired).
CLINICAL_VERDICTS = (
    (
        "README.md",
        "level with our recipe alone on MACCROBAT",
        "MACCROBAT2020",
        "merged − single",
        "level",
    ),
    ("README.md", "0.7 below it on CHIA", "CHIA", "merged − single", "behind"),
    ("README.md", "well behind on the PubMed ones", "BC5CDR-IOB", "merged − single", "behind"),
    (
        "README.md",
        "well behind on the PubMed ones",
        "NCBI-disease-IOB",
        "merged − single",
        "behind",
    ),
    (
        "README.md",
        "ahead of the tuned textbook on CHIA and NCBI-disease",
        "CHIA",
        "single − textbook-tuned",
        "ahead",
    ),
    (
        "README.md",
        "ahead of the tuned textbook on CHIA and NCBI-disease",
        "NCBI-disease-IOB",
        "single − textbook-tuned",
        "ahead",
    ),
    (
        "README.md",
        "level with it on MACCROBAT and BC5CDR",
        "MACCROBAT2020",
        "single − textbook-tuned",
        "level",
    ),
    (
        "README.md",
        "level with it on MACCROBAT and BC5CDR",
        "BC5CDR-IOB",
        "single − textbook-tuned",
        "level",
    ),
    (
        "docs/clinical-schema.md",
        "the one model is level with each corpus trained alone on MACCROBAT",
        "MACCROBAT2020",
        "merged − single",
        "level",
    ),
    (
        "docs/clinical-schema.md",
        "+2.9 over the tuned textbook",
        "MACCROBAT2020",
        "merged − textbook-tuned",
        "level",
    ),
    (
        "docs/clinical-schema.md",
        "0.7 below our recipe alone on CHIA",
        "CHIA",
        "merged − single",
        "behind",
    ),
    (
        "docs/clinical-schema.md",
        "though ahead of the tuned textbook there",
        "CHIA",
        "merged − textbook-tuned",
        "ahead",
    ),
    (
        "docs/clinical-schema.md",
        "level with the tuned textbook on BC5CDR",
        "BC5CDR-IOB",
        "single − textbook-tuned",
        "level",
    ),
    (
        "docs/clinical-schema.md",
        "and ahead of it on NCBI-disease",
        "NCBI-disease-IOB",
        "single − textbook-tuned",
        "ahead",
    ),
)


@pytest.mark.parametrize(("page", "phrase", "corpus", "pair", "verdict"), CLINICAL_VERDICTS)
def test_a_clinical_comparison_is_worded_as_its_paired_interval_says(
    page, phrase, corpus, pair, verdict
):
    """ "Ahead", "below" and "level" on the clinical table are the paired 95 % interval's
    verdict (ahead/behind only where it excludes 0): a re-run that moves an interval across 0
    fails here until the words follow."""
    import json

    text = " ".join((REPO / page).read_text(encoding="utf-8").split())
    assert phrase in text, f"{page} no longer says {phrase!r}"
    summary = json.loads(
        (REPO / "benchmarks/results/clinical/summary.json").read_text(encoding="utf-8")
    )
    comparison = summary["table"][corpus]["paired"][pair]
    assert len(comparison["seeds"]) >= 3
    assert comparison["verdict"] == verdict, (page, phrase, comparison)


def test_the_rerank_weight_is_the_one_chosen_on_dev():
    """The re-rank's default weight is the best of the committed grid on the development
    files (``benchmarks/linking.py --rerank-grid``), and not at the grid's edge."""
    import json

    from mslm_core.linking.rerank import DEFAULT_WEIGHT

    grid = json.loads(
        (REPO / "benchmarks/results/linking/rerank-dev.json").read_text(encoding="utf-8")
    )
    pooled = grid["dev_accuracy_at_1_pooled"]
    assert grid["chosen_weight"] == DEFAULT_WEIGHT
    assert pooled[f"{DEFAULT_WEIGHT:g}"] == max(pooled.values())
    assert min(grid["weights"]) < DEFAULT_WEIGHT < max(grid["weights"])


def test_the_pace_constants_quoted_are_the_code():
    """docs/benchmarks.md's first-start row quotes the time-left constants it measured with
    (``NAME`` value): each is mslm_core.train.pace's."""
    import re

    from mslm_core.train import pace

    row = next(
        line
        for line in (REPO / "docs/benchmarks.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| `benchmarks/first_start.py`")
    )
    quoted = re.findall(r"`([A-Z][A-Z_]+)` ([\d,.]+\d)", row)
    assert len(quoted) >= 4, row
    for name, value in quoted:
        assert getattr(pace, name) == float(value.replace(",", "")), name


def test_the_notes_formats_table_is_the_catalogue():
    """docs/bulk.md's table of notes formats is mslm_core.notes.NOTES, row for row and in the
    order their content is told: a format registered, renamed or re-described shows there."""
    from mslm_core.notes import NOTES

    rows = []
    for f in NOTES.values():
        told = [", ".join(f"`{x}`" for x in f.extensions)] if f.extensions else []
        told += ["its magic number"] * bool(f.magic) + ["its first bytes"] * bool(f.sniff)
        told += ["anything else"] * f.fallback
        rows.append(f"| `{f.name}` | {f.help} | {'; '.join(told)} |")
    text = (REPO / "docs" / "bulk.md").read_text()
    table = text[text.index("| format | what it holds | told by |") :].split("\n\n", 1)[0]
    assert table.splitlines()[2:] == rows


def test_the_command_pages_format_lists_are_the_catalogues():
    """docs/cli.md writes out the prediction formats and annotation jobs' file outputs; they
    are the catalogues' (FHIR was missing from both)."""
    from mslm_core.render import OUTPUTS, PREDICTIONS

    text = (REPO / "docs" / "cli.md").read_text()
    predictions = re.search(r"--format ([a-z_|]+)\]", text)
    outputs = re.search(r"--output-format ([a-z_|]+)", text)
    assert predictions and predictions.group(1).split("|") == list(PREDICTIONS)
    assert outputs and outputs.group(1).split("|") == list(OUTPUTS)
