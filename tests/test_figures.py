"""The README's measured figures are their committed result files' (benchmarks/harness/figures.py;
``python scripts/figures.py [--write]``), and the check catches what it is there for."""

from __future__ import annotations

import json

from harness.figures import LINES, Fig, Line, all_lines, check, numbers, unaccounted


def test_every_registered_figure_is_its_result_file_s():
    assert check() == []
    assert sum(f is not None for line in all_lines() for f in line.figures) >= 280


def test_every_readme_line_with_a_measured_figure_is_registered():
    """The README's lines whose numbers are measurements (a table row of results, a figure in
    bold) are registered: a new one must name its source."""
    from harness.figures import REPO

    registered = [line.anchor for line in LINES if line.page == "README.md"]
    text = (REPO / "README.md").read_text(encoding="utf-8").split("\n")
    unregistered = [
        row
        for row in text
        if row.startswith("|")
        and any("." in m.group() for m in numbers(row))
        and not any(anchor in row for anchor in registered)
    ]
    assert unregistered == []


def test_every_row_of_the_benchmark_scripts_table_with_a_number_is_registered():
    """docs/benchmarks.md's table of the scripts and their latest results: a row that quotes a
    number names its source, as the README's rows do."""
    from harness.figures import REPO

    page = "docs/benchmarks.md"
    registered = [line.anchor for line in all_lines() if line.page == page]
    text = (REPO / page).read_text(encoding="utf-8").split("\n")
    rows = [row for row in text if row.startswith("| `benchmarks/")]
    assert len(rows) >= 10
    unregistered = [
        row[:60] for row in rows if numbers(row) and not any(a in row for a in registered)
    ]
    assert unregistered == []


def test_every_line_with_a_decimal_names_its_file_or_why_it_has_none():
    """Every line of the README and docs/ with a decimal number is registered (its figures read
    from their result files) or listed as unmeasured with the reason (harness.figures)."""
    assert unaccounted() == []


def test_a_decimal_added_to_a_page_without_a_source_or_a_reason_is_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Title\n", encoding="utf-8")
    (tmp_path / "docs" / "new.md").write_text(
        "Three seeds, 2 corpora.\nThe new model scores 0.91 strict F1.\n"
        "```\nmslm train --lr 2e-4 --ratio 0.5\n```\n",
        encoding="utf-8",
    )
    found = [p for p in unaccounted(tmp_path) if p.startswith("docs/new.md")]
    assert found == ["docs/new.md:2: The new model scores 0.91 strict F1."]


def test_a_figure_that_differs_is_named_and_written_from_its_file(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"f1": 0.8516, "runs": [0.7, 0.75]}))
    page = tmp_path / "page.md"
    page.write_text(
        "# Figures\n| ours | **0.850** | 3 seeds, [run](results/r2.json) |\n"
        "Median 0.70–0.75 on H100, p95 149 ms.\n",
        encoding="utf-8",
    )
    src = str(tmp_path / "r.json")
    lines = (
        Line("page.md", "| ours |", (Fig(src, ("f1",), "3"), None)),
        Line(
            "page.md",
            "Median",
            (
                Fig(src, lambda d: min(d["runs"]), "2"),
                Fig(src, lambda d: max(d["runs"]), "2"),
                None,  # 149 ms: not registered as a figure here
            ),
        ),
    )
    problems = check(lines, root=tmp_path)
    assert problems == ["page.md:2: 0.850 where " + src + " gives 0.852 (('f1',))"]
    assert check(lines, write=True, root=tmp_path) == problems
    assert "| **0.852** |" in page.read_text(encoding="utf-8")
    assert check(lines, root=tmp_path) == []


def test_a_number_added_without_its_source_and_an_ambiguous_anchor_are_caught(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"x": 2.0}))
    (tmp_path / "page.md").write_text("a 2.0 b\na 2.0 c 3.5\n", encoding="utf-8")
    src = str(tmp_path / "r.json")
    assert check((Line("page.md", "a 2.0", (Fig(src, ("x",), "1"),)),), root=tmp_path) == [
        "page.md: anchor 'a 2.0' is on 2 lines, not one"
    ]
    found = check((Line("page.md", "c 3.5", (Fig(src, ("x",), "1"),)),), root=tmp_path)
    assert found == ["page.md:2: 2 numbers on the line (2.0, 3.5), 1 registered"]


def test_numbers_are_figures_not_parts_of_words_links_or_versions():
    row = "| p95 on H100, v5.4, [x](a/b-2.json) | −1.9 | +0.2 | 1,200–1,500 | 5.18× | 2,000-fold |"
    assert [m.group() for m in numbers(row)] == ["−1.9", "+0.2", "1,200", "1,500", "5.18", "2,000"]


def test_numbers_joined_by_slashes_are_each_a_figure_but_paths_are_not():
    row = "| p50/p95/p99 966.8/1149.5/1252.1 ms; ok: 17/17; /v1/annotate, UTF-16/32, 2/ |"
    assert [m.group() for m in numbers(row)] == ["966.8", "1149.5", "1252.1", "17", "17"]
