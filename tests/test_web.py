"""The web page in a real browser: Debian's Chromium, headless, driven by Playwright (no
browser download). The API runs in uvicorn in this process over SQLite; training jobs are run
by calling the worker's runner, as in test_service.py. Screenshots land in test-artifacts/
(or $MSLM_TEST_ARTIFACTS)."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from service_helpers import (
    ADMIN,
    ANNOTATE,
    JOB,
    TRAIN,
    auth,
    make_settings,
    serve_model_of,
    serving,
    upload_toy,
    wait_for,
)

from api.main import create_app
from worker.runner import run_training_job

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("MSLM_TEST_ARTIFACTS", REPO / "test-artifacts"))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# what this machine's closed network needs (see the environment notes): no background traffic
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not Path(CHROMIUM).exists():
        if os.environ.get("MSLM_REQUIRE_SERVICES") == "1":
            pytest.fail("the browser tests need playwright and Debian's chromium in CI")
        pytest.skip("playwright or chromium (apt-get install chromium) is missing")
    return sync_playwright


@pytest.fixture(scope="module")
def site(tmp_path_factory, tiny_encoder):
    """A running install with one trained, served model: (base URL, settings, dataset id)."""
    sync_playwright = _browser_or_skip()
    tmp = tmp_path_factory.mktemp("web")
    settings = make_settings(tmp, tiny_encoder)
    with TestClient(create_app(settings)) as c:
        dataset = upload_toy(c, tmp / "corpus")
        job = c.post("/v1/jobs", headers=auth(TRAIN), json={"dataset_id": dataset["id"], **JOB})
        assert run_training_job(job.json()["id"], settings) == "succeeded"
        serve_model_of(c, job.json()["id"])
    vocabulary = tmp / "mesh.tsv"  # concepts linked, with their MeSH pages
    vocabulary.write_text("D009369\tNeoplasms\tcancer|tumour\n", encoding="utf-8")
    linked = {
        "vocabulary": vocabulary,
        "vocabulary_name": "MeSH",
        "vocabulary_url": "https://meshb.nlm.nih.gov/record/ui?ui={id}",
        "link_threshold": 0.6,
    }
    settings = settings.model_copy(update=linked)
    with serving(create_app(settings)) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield base, settings, dataset["id"], browser
        finally:
            browser.close()


@pytest.fixture()
def page(site):
    base, _, _, browser = site
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"console {msg.type}: {msg.text}")
            # a refused request (a bad key's 401) is logged by the browser itself; the page says
            # so in its status line
            if msg.type in ("error", "warning")
            and not msg.text.startswith("Failed to load resource")
            else None
        ),
    )
    page.goto(base + "/")
    yield page
    context.close()
    # a script the page's Content-Security-Policy blocked would show here
    assert problems == []


def connect(page, key: str) -> None:
    page.fill("#api-key", key)
    page.click("#key-form button[type=submit]")
    page.wait_for_function(
        "() => document.getElementById('status').textContent.startsWith('Connected')"
    )
    assert page.input_value("#api-key") == ""  # the field is cleared


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_the_page_and_its_assets_are_served_with_a_strict_policy(site):
    base = site[0]
    for path in ("/", "/static/app.js", "/static/app.css"):
        r = httpx.get(base + path)
        assert r.status_code == 200, path
        csp = r.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "unsafe-inline" not in csp
    html = httpx.get(base + "/").text
    assert "http" not in html.replace('lang="en"', "")  # no CDN or other origin: closed networks


def highlighted(page, text: str, fields: str) -> list:
    """Annotate ``text`` on the page (its default threshold, the API's) and read each
    highlighted entity's ``fields`` (a JavaScript array expression over the mark ``m``)."""
    from mslm_core.pipeline import DEFAULTS

    connect(page, ANNOTATE)
    page.fill("#text", text)
    assert float(page.input_value("#threshold")) == DEFAULTS.min_confidence  # one default
    page.click("#run")
    page.wait_for_selector("#result mark.ent")
    return page.eval_on_selector_all("#result mark.ent", f"ms => ms.map(m => {fields})")


def test_the_status_names_the_served_model_and_a_reload_keeps_the_key(page, site):
    """/readyz is asked with the key, so the status line names the model served; the key is
    kept for the tab (sessionStorage), not in localStorage, and not in another tab."""
    base = site[0]
    connect(page, ANNOTATE)
    served = httpx.get(f"{base}/readyz", headers=auth(ANNOTATE)).json()["model"]["id"]
    assert page.text_content("#status").startswith(f"Connected: serving {served};")
    assert page.evaluate("() => localStorage.length") == 0
    page.reload()
    page.wait_for_function(
        "() => document.getElementById('status').textContent.startsWith('Connected')"
    )
    assert page.text_content("#status").startswith(f"Connected: serving {served};")
    other = page.context.new_page()
    other.goto(base + "/")
    assert other.evaluate("() => sessionStorage.length") == 0
    assert not other.text_content("#status").startswith("Connected")
    other.close()


def test_a_refused_key_is_not_kept(page):
    page.fill("#api-key", "not-a-key-of-this-service-0123456789")
    page.click("#key-form button[type=submit]")
    page.wait_for_function("() => document.getElementById('status').textContent.length > 0")
    page.wait_for_function("() => sessionStorage.length === 0")
    assert not page.text_content("#status").startswith("Connected")


def test_annotate_highlights_entities_with_their_confidence(page):
    text = "Cisplatin caused renal failure in the patient ."
    marks = highlighted(
        page, text, "[m.textContent, m.dataset.type, Number(m.dataset.confidence), m.title]"
    )
    assert ("renal failure", "Disease") in {(t, ty) for t, ty, _, _ in marks}
    for _, etype, confidence, title in marks:
        assert 0.0 < confidence <= 1.0 and title.startswith(f"{etype} · confidence")
    # the highlighted text is the submitted text, character for character
    assert page.text_content("#result") == text
    rows = page.locator("#entities tbody tr")
    assert rows.count() == len(marks)
    # keyboard: from the Run button, Tab reaches the first entity, whose tip shows on focus
    page.focus("#run")
    page.keyboard.press("Tab")
    focused = page.evaluate("[document.activeElement.tagName, document.activeElement.textContent]")
    assert focused == ["MARK", marks[0][0]]
    shot(page, "web-annotate.png")
    # the slider filters on the page, without asking the server again
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.fill("#threshold", "1")
    assert page.locator("#result mark.ent").count() == sum(c >= 1.0 for _, _, c, _ in marks)
    assert page.text_content("#threshold-value") == "1.00"
    assert page.text_content("#result") == text and requests == []


def test_a_modifier_shows_the_head_it_belongs_to(page):
    """Each modifier's row and tip say which head the relation step tied it to (the answer
    is the service's, as a bundle with a relation scorer gives it)."""
    text = "Aspirin 81 mg and heparin 5000 units"

    def entity(piece: str, kind: str) -> dict:
        start = text.index(piece)
        scores = {"confidence": 0.9, "detection_score": 0.95, "type_score": 0.95}
        return {"start": start, "end": start + len(piece), "text": piece, "type": kind, **scores}

    entities = [
        entity("Aspirin", "Drug"),
        entity("81 mg", "Dosage"),
        entity("heparin", "Drug"),
        entity("5000 units", "Dosage"),
    ]
    relations = [
        {"type": "dose", "head": 0, "modifier": 1, "confidence": 0.97},
        {"type": "dose", "head": 2, "modifier": 3, "confidence": 0.91},
    ]
    model = {"id": "m", "backend": "onnx", "precision": "int8", "provider": "cpu", "types": []}
    answer = {"model": model, "linking": None, "results": [{"entities": entities}]}
    answer["results"][0] |= {"relations": relations, "facts": {}, "warnings": []}
    page.route("**/v1/annotate", lambda route: route.fulfill(json=answer))
    titles = highlighted(page, text, "m.title")
    heads = page.eval_on_selector_all("#entities td.head", "tds => tds.map(t => t.textContent)")
    assert heads == ["", "dose of “Aspirin” (0.97)", "", "dose of “heparin” (0.91)"]
    assert titles[1].endswith("· dose of “Aspirin” (0.97)") and "dose of" not in titles[0]


def test_clinical_context_badges_and_the_present_only_filter(page):
    text = "The patient has breast cancer . No sign of diabetes or cancer today ."
    marks = highlighted(page, text, "[m.textContent, m.dataset.badge || '', m.className, m.title]")
    got = {(t, badge) for t, badge, _, _ in marks}
    assert {("breast cancer", ""), ("diabetes", "NEG"), ("cancer", "NEG")} <= got
    for _, badge, cls, title in marks:
        assert ("not-present" in cls) == bool(badge)
        assert ("negated: “No sign of”" in title) == bool(badge)
    # the badge is drawn by CSS: the highlighted text is still the text
    assert page.text_content("#result") == text
    badge = page.eval_on_selector(
        "#result mark.ent[data-badge]", "m => getComputedStyle(m, '::before').content"
    )
    assert badge == '"NEG"'
    contexts = page.eval_on_selector_all(
        "#entities td.context", "tds => tds.map(t => t.textContent)"
    )
    assert "present" in contexts and "negated: “No sign of”" in contexts
    shot(page, "web-context.png")
    page.check("#present-only")
    shown = page.eval_on_selector_all("#result mark.ent", "ms => ms.map(m => m.textContent)")
    assert "breast cancer" in shown and "diabetes" not in shown and shown.count("cancer") == 0
    assert page.text_content("#result") == text
    page.uncheck("#present-only")
    assert page.locator("#result mark.ent").count() == len(marks)


def test_the_entity_table_shows_each_concept_linked_to_its_page(page):
    """Issue 21: the id is shown, as a link when the vocabulary gives a URL pattern; below
    the threshold a dash."""
    text = "The patient has breast cancer . No sign of diabetes today ."
    highlighted(page, text, "m.textContent")
    cells = page.eval_on_selector_all(
        "#entities tr",
        "rows => rows.map(r => [r.cells[0].textContent, r.querySelector('td.concept')"
        "?.textContent, r.querySelector('td.concept a')?.href || ''])",
    )
    by_text = {t: (concept, href) for t, concept, href in cells if concept is not None}
    assert by_text["breast cancer"][0] == "D009369 Neoplasms (MeSH)"  # with its vocabulary
    assert by_text["breast cancer"][1] == "https://meshb.nlm.nih.gov/record/ui?ui=D009369"
    assert by_text["diabetes"] == ("–", "")  # nothing near enough in this vocabulary


def test_offsets_hold_for_accents_and_emoji(page):
    connect(page, ANNOTATE)
    text = "Le patient 😷 — renal failure après cisplatine ; « renal failure » encore."
    page.fill("#text", text)
    page.fill("#threshold", "0")
    page.focus("#text")
    page.keyboard.press("Control+Enter")  # the shortcut runs it
    page.wait_for_selector("#result mark.ent")
    assert page.text_content("#result") == text
    assert "renal failure" in page.eval_on_selector_all(
        "#result mark.ent", "ms => ms.map(m => m.textContent)"
    )


def test_a_bad_key_says_so(page):
    page.fill("#api-key", "not-a-key")
    page.click("#key-form button[type=submit]")
    page.wait_for_function("() => document.getElementById('status').classList.contains('error')")
    assert "key" in page.text_content("#status").lower()


def test_jobs_view_follows_a_job_to_the_end(page, site):
    base, settings, dataset_id, _ = site
    job = httpx.post(
        base + "/v1/jobs",
        headers=auth(TRAIN),
        json={"dataset_id": dataset_id, **JOB, "epochs": 6, "patience": 0},
    ).json()
    connect(page, TRAIN)
    page.click("#tab-jobs")
    page.wait_for_selector(f"tr[data-job='{job['id']}']")
    # the strategies and the default come from the service's own schema
    from mslm_core.config import DEFAULT_STRATEGY, STRATEGY_CHOICES

    values = page.eval_on_selector_all("#job-strategy option", "os => os.map(o => o.value)")
    assert values[0] == "" and set(values[1:]) == set(STRATEGY_CHOICES)
    assert page.text_content("#job-strategy option") == f"default ({DEFAULT_STRATEGY})"
    assert page.text_content(f"tr[data-job='{job['id']}'] td.state") == "queued"
    page.click(f"tr[data-job='{job['id']}'] button.link")
    page.wait_for_function(
        "() => document.getElementById('job-state').textContent.includes('queued')"
    )
    worker = threading.Thread(target=run_training_job, args=(job["id"], settings))
    worker.start()
    # the page polls on its own: no reload, no click
    page.wait_for_function(
        "() => document.getElementById('job-state').textContent.includes('succeeded')",
        timeout=120_000,
    )
    worker.join(60)
    assert page.eval_on_selector("#job-progress", "p => p.value") == 1
    dots = page.locator("#job-curve circle.dot")
    assert dots.count() == 6  # one point per epoch's dev F1
    caption = page.text_content("#job-curve-caption")
    assert caption.startswith("Dev F1 per epoch: epoch 1 ")
    assert page.is_hidden("#job-cancel")
    shot(page, "web-jobs.png")


SIGNS = "Fever\tB-Sign\nand\tO\npain\tB-Sign\n.\tO\n"


def upload_tsv(base: str, name: str, tsv: str) -> dict:
    """A dataset named ``name`` whose train and dev splits are both ``tsv`` (IOB)."""
    files = {split: (f"{split}.tsv", tsv, "text/plain") for split in ("train", "dev")}
    return httpx.post(
        base + "/v1/datasets", headers=auth(TRAIN), files=files, data={"name": name}
    ).json()


def test_the_job_form_trains_on_several_datasets_with_type_maps(page, site, tmp_path):
    """Issue 28: check a second dataset, map its types, set its weight, start the job."""
    base, _, first_id, _ = site
    second = upload_tsv(base, "signs", SIGNS)
    connect(page, TRAIN)
    page.click("#tab-jobs")
    page.wait_for_selector(f"[data-ds='{second['id']}']")
    # the newest dataset is chosen by default; the other's types show once it is checked
    assert page.is_checked(f"[data-ds='{second['id']}'] input[type=checkbox]")
    assert page.is_hidden(f"[data-ds='{first_id}'] .ds-detail")
    page.check(f"#job-ds-{first_id}")
    page.fill(f"[data-ds='{second['id']}'] input[data-type='Sign']", "Problem")
    page.fill(f"[data-ds='{second['id']}'] input.weight", "0.5")
    page.fill(f"[data-ds='{first_id}'] input[data-type='Disease']", "Problem")
    page.fill(f"[data-ds='{first_id}'] input[data-type='Chemical']", "Drug|Procedure")
    page.fill("#job-epochs", "2")
    page.check("#job-styles")
    page.fill("#job-blank", "0.5")
    page.click("#job-form button[type=submit]")
    page.wait_for_function("() => document.getElementById('status').textContent.includes('queued')")
    job_id = page.text_content("#status").split()[1]
    job = httpx.get(f"{base}/v1/jobs/{job_id}", headers=auth(TRAIN)).json()
    assert job["datasets"] == [  # in the page's order: the newest first
        {"id": second["id"], "type_map": {"Sign": "Problem"}, "weight": 0.5, "version": 1},
        {
            "id": first_id,
            "type_map": {"Chemical": ["Drug", "Procedure"], "Disease": "Problem"},
            "weight": 1.0,
            "version": 1,
        },
    ]
    assert job["params"]["epochs"] == 2
    assert (job["params"]["source_styles"], job["params"]["blank_style"]) == (True, 0.5)
    httpx.post(f"{base}/v1/jobs/{job_id}/cancel", headers=auth(TRAIN))
    shot(page, "web-job-datasets.png")


def test_the_job_form_sends_only_what_the_user_set(page, site):
    """Untouched, the form asks for the dataset alone: the epochs, strategy and styles are
    the API's defaults (``auto`` picks the epochs), not the page's."""
    base, _, _, _ = site
    connect(page, TRAIN)
    page.click("#tab-jobs")
    page.wait_for_selector("[data-ds] input[type=checkbox]:checked")
    assert page.input_value("#job-epochs") == ""
    with page.expect_request(lambda r: r.url.endswith("/v1/jobs") and r.method == "POST") as sent:
        page.click("#job-form button[type=submit]")
    body = json.loads(sent.value.post_data or "{}")
    assert list(body) == ["dataset_id"]
    page.wait_for_function("() => document.getElementById('status').textContent.includes('queued')")
    job_id = page.text_content("#status").split()[1]
    job = httpx.get(f"{base}/v1/jobs/{job_id}", headers=auth(TRAIN)).json()
    assert "epochs" not in job["params"]  # its strategy picks the epochs
    httpx.post(f"{base}/v1/jobs/{job_id}/cancel", headers=auth(TRAIN))


def test_a_model_with_source_styles_reads_text_in_the_style_chosen(page, site):
    """A model trained with source styles and a blank style: its styles are offered beside
    the model picker, and the one chosen goes with the request ("" too: no style)."""
    base, settings, first_id, _ = site
    second = upload_tsv(base, "styled", SIGNS)
    datasets = [{"id": first_id}, {"id": second["id"], "type_map": {"Sign": "Disease"}}]
    body = {**JOB, "epochs": 2, "datasets": datasets, "source_styles": True, "blank_style": 0.5}
    job = httpx.post(base + "/v1/jobs", headers=auth(TRAIN), json=body).json()
    assert run_training_job(job["id"], settings) == "succeeded"
    model_id = httpx.get(f"{base}/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["model_id"]
    connect(page, ANNOTATE)
    assert page.is_hidden("#style-choice")  # the served model has no styles
    page.select_option("#model", model_id)
    page.wait_for_selector("#style-choice", state="visible")
    options = page.eval_on_selector_all("#style option", "os => os.map(o => o.textContent)")
    own = "the model's own style (none)"  # a blank style: it reads with none unless asked
    assert options == [own, first_id, second["id"], "no style (blank)"]
    page.fill("#text", "Cisplatin caused renal failure .")
    for label, style in ((second["id"], second["id"]), ("no style (blank)", "")):
        page.select_option("#style", label=label)
        with page.expect_request(lambda r: r.url.endswith("/v1/annotate")) as sent:
            page.click("#run")
        assert sent.value.post_data_json == {
            "texts": [page.input_value("#text")],
            "model": model_id,
            "style": style,
        }
        page.wait_for_function("() => !document.getElementById('run').disabled")
        assert f"from {model_id}" in page.text_content("#annotate-info")  # answered
    page.select_option("#model", "")  # back to the served model: no styles to choose
    page.wait_for_selector("#style-choice", state="hidden")


def test_the_job_form_suggests_what_to_label_next(page, site):
    """Issue 33: a dataset's version and its unlabelled pool show beside it; the served model
    ranks the pool, near-identical notes spread out."""
    base, *_ = site
    ds = upload_tsv(base, "growing", "Cisplatin\tB-Chemical\ncaused\tO\nfever\tB-Disease\n")
    pool = [
        {"id": "twin-a", "text": "Patient denies chest pain and fever today ."},
        {"id": "twin-b", "text": "Patient denies chest pain and fever today !"},
        {"id": "other", "text": "Cisplatin was stopped after renal failure ."},
    ]
    r = httpx.post(
        f"{base}/v1/datasets/{ds['id']}/documents", headers=auth(TRAIN), json={"documents": pool}
    )
    assert r.status_code == 201, r.text
    connect(page, TRAIN)
    page.click("#tab-jobs")
    row = f"[data-ds='{ds['id']}']"
    page.wait_for_selector(row)
    assert "version 2, 3 to label" in page.text_content(f"{row} .ds-meta")
    page.check(f"{row} input[type=checkbox]")
    page.click(f"{row} button.suggest")
    page.wait_for_selector(f"{row} .suggestions li")
    items = page.locator(f"{row} .suggestions li")
    assert items.count() == 3
    ids = [items.nth(i).get_attribute("data-doc") for i in range(3)]
    assert sorted(ids) == ["other", "twin-a", "twin-b"]
    assert "twin" not in ids[1] or "twin" not in ids[0]  # the twins are not both first
    assert "uncertainty" in page.text_content(f"{row} .suggestions")
    assert "unlabelled documents suggested" in page.text_content("#status")
    page.uncheck(f"{row} input[type=checkbox]")  # the other job tests choose their own


def test_model_view_shows_the_evaluation_report_and_reliability_diagram(page):
    connect(page, ADMIN)
    page.click("#tab-models")
    page.wait_for_selector("#models tbody tr")
    page.locator("#models tbody tr").first.get_by_role("button", name="Report").click()
    page.wait_for_function("() => document.getElementById('model-diagram').hidden === false")
    page.wait_for_function("() => document.getElementById('model-diagram').naturalWidth > 0")
    report = page.text_content("#model-report")
    assert "Strict (exact span and type) scores" in report and "Disease" in report
    assert "before" in page.text_content("#model-calibration")
    shot(page, "web-model.png")


def test_tabs_work_from_the_keyboard(page):
    page.focus("#tab-annotate")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.id") == "tab-jobs"
    assert page.is_visible("#panel-jobs") and page.is_hidden("#panel-annotate")
    page.keyboard.press("End")
    assert page.evaluate("document.activeElement.id") == "tab-bulk"
    assert page.get_attribute("#tab-bulk", "aria-selected") == "true"
    page.keyboard.press("ArrowLeft")
    assert page.get_attribute("#tab-models", "aria-selected") == "true"


def test_api_docs_render_offline(page, site):
    page.goto(site[0] + "/docs")
    page.wait_for_selector(".swagger-ui .info .title")
    assert "mslm" in page.text_content(".swagger-ui .info .title")
    assert page.locator(".opblock-summary-path[data-path='/v1/annotate']").count() == 1


def test_bulk_view_runs_a_file_job_and_downloads_its_annotations(page, site, tmp_path):
    from worker import bulk as bulk_runner

    _, settings, _, _ = site
    notes = tmp_path / "notes.jsonl"
    notes.write_text(
        '{"id": "n1", "text": "Cisplatin caused renal failure ."}\n'
        "not json\n"
        '{"id": "n2", "text": "No cancer was found ."}\n'
    )
    connect(page, ANNOTATE)
    page.click("#tab-bulk")
    page.set_input_files("#bulk-file", str(notes))
    from mslm_core.render import OUTPUTS  # the choices come from the service's declaration

    page.wait_for_selector("#bulk-format option", state="attached")
    formats = page.eval_on_selector_all("#bulk-format option", "os => os.map(o => o.value)")
    assert formats == list(OUTPUTS)
    page.select_option("#bulk-format", "jsonl")
    page.click("#bulk-form button[type=submit]")
    page.wait_for_function(
        "() => document.getElementById('status').textContent.includes('queued: 2 notes, 1 could')"
    )
    job_id = page.text_content("#status").split()[1]
    published: list[tuple[str, int]] = []
    bulk_runner.run_plan(job_id, settings, lambda j, s: published.append((j, s)))
    for _, seq in published:
        bulk_runner.run_chunk(job_id, seq, settings)
    # the page polls on its own
    page.wait_for_function(
        "() => document.getElementById('bulk-state').textContent.startsWith('state succeeded')",
        timeout=60_000,
    )
    assert page.text_content(f"tr[data-bulk='{job_id}'] td.state") == "succeeded"
    assert page.eval_on_selector("#bulk-progress", "p => p.value") == 1
    assert page.text_content("#bulk-errors tbody td:nth-child(2)") == "line 2"
    assert page.is_hidden("#bulk-cancel")
    with page.expect_download() as download:
        page.click("#bulk-download")
    saved = tmp_path / "out.jsonl"
    download.value.save_as(saved)
    assert download.value.suggested_filename == f"{job_id}.jsonl"
    assert [json.loads(line)["id"] for line in saved.read_text().splitlines()] == ["n1", "n2"]
    shot(page, "web-bulk.png")


def test_a_dataset_is_uploaded_from_the_page_and_its_problems_shown_line_by_line(page, site):
    """Issue 60: the page uploads a dataset; a bad file is refused with each problem's file
    and line, listed, and nothing is stored."""
    base = site[0]
    connect(page, TRAIN)
    page.click("#tab-jobs")
    before = httpx.get(f"{base}/v1/datasets", headers=auth(TRAIN)).json()["count"]
    bad = "Fever\tB-Sign\npain\tX-Sign\n.\tO\n"  # line 2: not an IOB tag
    page.set_input_files(
        "#dataset-train",
        files=[{"name": "bad.tsv", "mimeType": "text/plain", "buffer": bad.encode()}],
    )
    page.fill("#dataset-name", "bad")
    page.click("#dataset-form button[type=submit]")
    page.wait_for_selector("#dataset-problems li")
    problem = page.text_content("#dataset-problems li")
    assert problem.startswith("train (bad.tsv), line 2, tag: invalid tag 'X-Sign'"), problem
    assert httpx.get(f"{base}/v1/datasets", headers=auth(TRAIN)).json()["count"] == before
    page.set_input_files(
        "#dataset-train",
        files=[{"name": "signs.tsv", "mimeType": "text/plain", "buffer": SIGNS.encode()}],
    )
    page.fill("#dataset-name", "signs from the page")
    page.click("#dataset-form button[type=submit]")
    page.wait_for_function(
        "() => document.getElementById('status').textContent.includes('uploaded')"
    )
    assert page.is_hidden("#dataset-problems")
    names = [
        d["name"] for d in httpx.get(f"{base}/v1/datasets", headers=auth(TRAIN)).json()["data"]
    ]
    assert "signs from the page" in names
    shot(page, "web-dataset-upload.png")


def test_a_running_job_shows_its_time_left_and_a_coming_model_is_said(page, site):
    """Issue 60: the jobs table shows a running job's own estimate of its time left, its
    detail the pace; a job that will replace the served model is named in the status line."""
    from store import transitions
    from store.db import session_factory
    from store.jobs import create_job
    from store.queue import TaskQueue
    from store.tables import Job, Model

    base, settings, dataset_id, _ = site
    served = httpx.get(f"{base}/readyz", headers=auth(ADMIN)).json()["model"]["id"]
    factory = session_factory(settings.sqlalchemy_url)

    class NoQueue(TaskQueue):
        def train(self, job_id: str) -> None: ...

    with factory() as session:
        served_by = session.get(Model, served).job_id
        job, _ = create_job(
            settings, session, NoQueue(), dataset_id, {**JOB, "epochs": 1}, {}, replaces=served_by
        )
        assert transitions.claim(session, Job, job.id, "w", 0)
        progress = {
            "step": 40,
            "steps": 100,
            "phase": "training",
            "eta_s": 600.0,
            "steps_per_s": 2.5,
        }
        transitions.heartbeat(session, Job, job.id, "w", progress=progress)
    try:
        wait_for(  # the service reads what is coming at its next poll of the store
            lambda: httpx.get(f"{base}/readyz", headers=auth(ADMIN)).json()["coming"],
            lambda coming: coming is not None and coming["eta_s"] == 600.0,
            timeout=30,
        )
        connect(page, ADMIN)
        assert (
            f"a better model is on its way (job {job.id}, about 10 min left)"
            in page.text_content("#status")
        )
        page.click("#tab-jobs")
        page.wait_for_selector(f"tr[data-job='{job.id}']")
        assert (
            page.text_content(f"tr[data-job='{job.id}'] td:nth-child(4)")
            == "training, about 10 min left"
        )
        page.click(f"tr[data-job='{job.id}'] button.link")
        page.wait_for_function(
            "() => document.getElementById('job-state').textContent.includes('steps/s')"
        )
        assert "2.50 steps/s" in page.text_content("#job-state")
    finally:
        with factory() as session:
            transitions.finish(session, Job, job.id, "w", "cancelled")


def test_a_model_below_its_floor_is_served_only_when_the_admin_confirms(page, site):
    """Issue 60: the models table says why a model is below its floor; Serve asks first, and
    serves it (force) only on yes."""
    from store.db import session_factory
    from store.tables import Model

    base, settings, dataset_id, _ = site
    served = httpx.get(f"{base}/readyz", headers=auth(ADMIN)).json()["model"]["id"]
    job = httpx.post(
        base + "/v1/jobs", headers=auth(TRAIN), json={"dataset_id": dataset_id, **JOB, "epochs": 1}
    ).json()
    assert run_training_job(job["id"], settings) == "succeeded"
    other = httpx.get(f"{base}/v1/jobs/{job['id']}", headers=auth(TRAIN)).json()["model_id"]
    factory = session_factory(settings.sqlalchemy_url)
    with factory() as session:
        session.get(Model, other).warnings = ["it predicts no entity on dev (40 annotated)"]
        session.commit()
    try:
        connect(page, ADMIN)
        page.click("#tab-models")
        row = f"#models tr[data-model='{other}']"
        page.wait_for_selector(row)
        assert "below its floor: it predicts no entity on dev" in page.text_content(
            f"{row} td.warning"
        )
        page.once("dialog", lambda dialog: dialog.dismiss())
        page.locator(row).get_by_role("button", name="Serve").click()
        page.wait_for_timeout(300)
        assert httpx.get(f"{base}/readyz", headers=auth(ADMIN)).json()["model"]["id"] == served
        page.once("dialog", lambda dialog: dialog.accept())
        with page.expect_request(lambda r: "/activate" in r.url) as sent:
            page.locator(row).get_by_role("button", name="Serve").click()
        assert sent.value.url.endswith(f"/v1/models/{other}/activate?force=true")
        page.wait_for_function(
            "() => document.getElementById('status').textContent.includes('is now served')"
        )
    finally:
        httpx.post(f"{base}/v1/models/{served}/activate", headers=auth(ADMIN))
        with factory() as session:
            session.get(Model, other).warnings = []
            session.commit()
