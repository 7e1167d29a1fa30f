// The mslm web page: annotate, watch jobs, read model reports. No framework, no build, no
// third-party assets (hospital networks are closed). The API key lives in this closure and in
// the tab's sessionStorage (so that a reload keeps it; closing the tab forgets it): never in
// localStorage, cookies or the URL. Text is always inserted with textContent.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const PALETTE = ["#f6c85f", "#6fb1e0", "#9fd68c", "#f19c9c", "#c5a3e6", "#f5b971", "#7fd1c7"];
  const state = {
    key: "",
    types: new Map(), // entity type → colour
    lastResult: null, // {text, entities}
    jobTimer: null,
    bulkTimer: null,
    selectedBulk: null,
    selectedJob: null,
    diagramUrl: null,
    servedModel: null, // the active model's id, as /readyz said when the key was entered
  };

  // -- HTTP --------------------------------------------------------------------------------
  class ApiError extends Error {
    constructor(status, problem) {
      super(problem.detail || problem.title || `HTTP ${status}`);
      this.status = status;
      this.problem = problem;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (state.key) headers.Authorization = `Bearer ${state.key}`;
    const form = body instanceof FormData; // multipart: the browser sets its boundary
    if (body !== undefined && !form) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : form ? body : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
    if (response.status === 204) return null;
    const type = response.headers.get("content-type") || "";
    if (!response.ok) {
      const problem = type.includes("json") ? await response.json() : { detail: await response.text() };
      throw new ApiError(response.status, problem);
    }
    return type.includes("json") ? response.json() : response.blob();
  }

  function say(message, isError = false) {
    const status = $("status");
    status.textContent = message;
    status.classList.toggle("error", isError);
  }

  function fail(error) {
    const where = error.problem && error.problem.errors && error.problem.errors.length
      ? ` (${error.problem.errors.map((e) => `${e.field}: ${e.message}`).join("; ")})`
      : "";
    say(`${error.message}${where}`, true);
  }

  const el = (tag, props = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (k === "class") node.className = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else if (k === "style") Object.assign(node.style, v); // CSSOM: allowed by the strict CSP
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null) node.setAttribute(k, v);
    }
    for (const child of children) node.append(child);
    return node;
  };

  const pct = (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(1));

  // -- tabs (WAI-ARIA tabs pattern: arrows move, Enter/Space or click selects) ------------
  const tabs = ["annotate", "jobs", "models", "bulk"].map((name) => $(`tab-${name}`));
  function selectTab(tab) {
    for (const t of tabs) {
      const selected = t === tab;
      t.setAttribute("aria-selected", String(selected));
      t.tabIndex = selected ? 0 : -1;
      $(t.getAttribute("aria-controls")).hidden = !selected;
    }
    tab.focus();
    stopJobPolling();
    if (!state.key) return;
    if (tab.id === "tab-jobs") refreshJobs();
    if (tab.id === "tab-models") refreshModels();
    if (tab.id === "tab-bulk") refreshBulk();
  }
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => selectTab(tab));
    tab.addEventListener("keydown", (event) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
      if (step) selectTab(tabs[(i + step + tabs.length) % tabs.length]);
      if (event.key === "Home") selectTab(tabs[0]);
      if (event.key === "End") selectTab(tabs[tabs.length - 1]);
    });
  });

  // -- key ---------------------------------------------------------------------------------
  const KEY_ITEM = "mslm-api-key"; // sessionStorage: this tab only, gone when it closes
  $("key-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    state.key = $("api-key").value.trim();
    $("api-key").value = "";
    sessionStorage.setItem(KEY_ITEM, state.key);
    await connect();
  });

  async function connect() {
    try {
      // with the key: /readyz names the served model only to a caller with a valid one
      const ready = await fetch("/readyz", {
        cache: "no-store",
        headers: { Authorization: `Bearer ${state.key}` },
      }).then((r) => r.json());
      const coming = ready.coming
        ? `; a better model is on its way (job ${ready.coming.job_id}${left(ready.coming.eta_s)})`
        : "";
      const served = (ready.model ? `serving ${ready.model.id}` : "no model served yet") + coming;
      let models;
      try {
        models = await api("GET", "/v1/models?limit=500");
      } catch (error) {
        if (error.status !== 403) throw error;
        // a key without the annotate scope (e.g. train only) still reaches the jobs view
        return say(`Connected: ${served}; this key may not annotate or list models.`);
      }
      const picker = $("model");
      picker.replaceChildren(el("option", { value: "" }, "active model"));
      for (const m of models.data) {
        const label = `${m.id} · ${m.strategy} · ${m.base_model}${m.active ? " (active)" : ""}`;
        picker.append(el("option", { value: m.id }, label));
      }
      state.servedModel = ready.model ? ready.model.id : null;
      await showStyles();
      say(`Connected: ${served}; ${models.count} model(s).`);
    } catch (error) {
      if (error.status === 401) sessionStorage.removeItem(KEY_ITEM); // a bad key is not kept
      fail(error);
    }
  }

  // -- annotate ----------------------------------------------------------------------------
  // A model trained with source styles reads text as one of its corpora's (or with none, when
  // it has a blank style): the styles the service says the chosen model may read text as.
  $("model").addEventListener("change", () => showStyles().catch(fail));

  async function showStyles() {
    const id = $("model").value || state.servedModel;
    const picker = $("style");
    picker.replaceChildren(el("option", { value: "" }, "the model's own style"));
    $("style-choice").hidden = true;
    if (!id) return;
    const model = await api("GET", `/v1/models/${encodeURIComponent(id)}`);
    const styles = model.styles || [""];
    for (const style of styles) {
      // the option's value is the style as JSON: "" is a style too (none), not the default
      picker.append(el("option", { value: JSON.stringify(style) }, style || "no style (blank)"));
    }
    picker.options[0].textContent = `the model's own style (${model.style || "none"})`;
    $("style-choice").hidden = styles.length < 2; // one reading: nothing to choose
  }

  const threshold = () => Number($("threshold").value);
  $("present-only").addEventListener("change", render);
  // ConText attributes: every flag the service reports in an entity's assertion (the service
  // declares them) → the badge shown on the entity: a short one for some, else its name
  const BADGE = { negated: "NEG", historical: "HISTORY" };
  const contextOf = (e) =>
    e.assertion
      ? Object.keys(e.assertion)
          .filter((k) => e.assertion[k] === true)
          .map((k) => [k, BADGE[k] || k.toUpperCase()])
      : [];
  const sectionText = (e) => (e.section || "").replaceAll("_", " ");
  const contextText = (e) => {
    if (!e.assertion) return "";
    if (contextOf(e).length === 0) return "present";
    return e.assertion.cues.map((c) => `${c.attribute}: “${c.text}”`).join("; ");
  };
  // the linked concept: its id (a link to its page when the vocabulary gives one), name and
  // vocabulary (with its code, when the id is an OMOP concept id); "–" when the linker
  // abstained; nothing when the service links no concepts
  const conceptCell = (e) => {
    if (e.candidates === undefined) return "";
    if (!e.concept) return "–";
    const c = e.concept;
    const id = c.url
      ? el("a", { href: c.url, target: "_blank", rel: "noopener noreferrer" }, c.id)
      : el("span", {}, c.id);
    const sure = c.confidence == null ? "" : `, confidence ${c.confidence.toFixed(2)}`;
    const code = c.code && c.code !== c.id ? ` (${c.vocabulary} ${c.code})` : ` (${c.vocabulary})`;
    return el(
      "span",
      { title: `score ${c.score.toFixed(2)}${sure}` },
      id,
      ` ${c.name}${code}`,
    );
  };
  $("threshold").addEventListener("input", () => {
    $("threshold-value").textContent = threshold().toFixed(2);
    render();
  });

  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      annotate();
    }
  });
  $("text").addEventListener("dragover", (event) => {
    event.preventDefault();
    $("text").classList.add("drop");
  });
  $("text").addEventListener("dragleave", () => $("text").classList.remove("drop"));
  $("text").addEventListener("drop", async (event) => {
    event.preventDefault();
    $("text").classList.remove("drop");
    const file = event.dataTransfer.files[0];
    if (file) $("text").value = await file.text();
  });
  $("run").addEventListener("click", annotate);

  async function annotate() {
    const text = $("text").value;
    if (!state.key) return say("Enter an API key first.", true);
    if (!text.trim()) return say("Nothing to annotate: the text is empty.", true);
    $("run").disabled = true;
    const started = performance.now();
    try {
      const body = { texts: [text] };
      if ($("model").value) body.model = $("model").value;
      if ($("style").value) body.style = JSON.parse($("style").value);
      const out = await api("POST", "/v1/annotate", body);
      const first = out.results[0];
      state.lastResult = { text, entities: first.entities, relations: first.relations || [] };
      const ms = Math.round(performance.now() - started);
      $("annotate-info").textContent =
        `${out.results[0].entities.length} entities from ${out.model.id} (${out.model.backend} ${out.model.precision}) in ${ms} ms`;
      say("Done.");
      render();
    } catch (error) {
      fail(error);
    } finally {
      $("run").disabled = false;
    }
  }

  function colour(type) {
    if (!state.types.has(type)) state.types.set(type, PALETTE[state.types.size % PALETTE.length]);
    return state.types.get(type);
  }

  // Offsets are code points (Python string indices): walk the text by code point.
  function render() {
    const result = $("result");
    const rows = $("entities").querySelector("tbody");
    result.replaceChildren();
    rows.replaceChildren();
    if (!state.lastResult) return;
    const chars = Array.from(state.lastResult.text);
    // each modifier's head (the relation step): "dose of “metoprolol” (0.98)"
    const all = state.lastResult.entities;
    const headOf = new Map(
      state.lastResult.relations.map((r) => [all[r.modifier], { ...r, head: all[r.head] }]),
    );
    const headText = (e) => {
      const r = headOf.get(e);
      return r ? `${r.type} of “${r.head.text}” (${r.confidence.toFixed(2)})` : "";
    };
    const shown = state.lastResult.entities
      .filter((e) => e.confidence >= threshold())
      .filter((e) => !$("present-only").checked || contextOf(e).length === 0)
      .sort((a, b) => a.start - b.start);
    let at = 0;
    for (const e of shown) {
      if (e.start < at) continue; // entities never overlap; be safe anyway
      result.append(chars.slice(at, e.start).join(""));
      const context = contextText(e);
      const badge = contextOf(e).map(([, b]) => b).join(" ");
      const belongs = headText(e);
      const tip = `${e.type} · confidence ${e.confidence.toFixed(2)} (detection ${e.detection_score.toFixed(2)}, type ${e.type_score.toFixed(2)})${badge ? ` · ${context}` : ""}${belongs ? ` · ${belongs}` : ""}`;
      const data = { type: e.type, confidence: String(e.confidence), tip };
      if (badge) data.badge = badge; // drawn by CSS: the highlighted text stays the text
      result.append(
        el(
          "mark",
          {
            class: badge ? "ent not-present" : "ent",
            tabindex: "0",
            title: tip,
            "aria-label": `${chars.slice(e.start, e.end).join("")}: ${tip}`,
            dataset: data,
            style: { background: colour(e.type) },
          },
          chars.slice(e.start, e.end).join(""),
        ),
      );
      rows.append(
        el("tr", {},
          el("td", {}, e.text),
          el("td", {}, e.type),
          el("td", {}, e.confidence.toFixed(3)),
          el("td", { class: badge ? "context flagged" : "context" }, context),
          el("td", { class: "section" }, sectionText(e)),
          el("td", { class: "head" }, headText(e)),
          el("td", { class: "concept" }, conceptCell(e)),
          el("td", {}, `${e.start}–${e.end}`)),
      );
      at = e.end;
    }
    result.append(chars.slice(at).join(""));
    $("entities").hidden = shown.length === 0;
    const legend = $("legend");
    legend.replaceChildren();
    for (const type of new Set(state.lastResult.entities.map((e) => e.type))) {
      const n = shown.filter((e) => e.type === type).length;
      legend.append(el("span", { class: "chip", style: { background: colour(type) } }, `${type} (${n})`));
    }
  }

  // -- jobs --------------------------------------------------------------------------------
  // The strategies and the default, as the service declares them (its OpenAPI document), so
  // that a new strategy needs no edit here.
  let openapi = null;
  const openapiSpec = async () => (openapi ??= await api("GET", "/openapi.json"));

  async function loadStrategies() {
    const picker = $("job-strategy");
    if (picker.options.length > 1) return;
    const spec = await openapiSpec();
    const field = spec.components.schemas.JobCreate.properties.strategy;
    const names = (field.anyOf || [field]).flatMap((s) => s.enum || []);
    picker.replaceChildren(el("option", { value: "" }, `default (${field["x-default"]})`));
    for (const name of names) picker.append(el("option", { value: name }, name));
  }

  async function refreshJobs() {
    try {
      await loadStrategies();
      const [jobs, datasets] = await Promise.all([
        api("GET", "/v1/jobs?limit=50"),
        api("GET", "/v1/datasets?limit=200"),
      ]);
      showDatasetChoices(datasets.data);
      const body = $("jobs").querySelector("tbody");
      body.replaceChildren();
      for (const job of jobs.data) {
        const p = job.progress || {};
        const done = progressOf(job);
        body.append(
          el("tr", { dataset: { job: job.id } },
            el("td", {}, el("button", { type: "button", class: "link", onclick: () => showJob(job.id) }, job.id)),
            el("td", { class: `state ${job.state}` }, job.state),
            el("td", {}, el("progress", { max: "1", value: String(done), "aria-label": `job ${job.id} progress` })),
            el("td", {}, job.state === "running" ? timeLeft(p) : ""),
            el("td", {}, pct(p.best_dev_f1 ?? null)),
            el("td", {}, new Date(job.created_at).toLocaleString())),
        );
      }
      if (state.selectedJob) await showJob(state.selectedJob, false);
      const active = jobs.data.some((j) => j.state === "queued" || j.state === "running");
      scheduleJobPolling(active);
    } catch (error) {
      fail(error);
    }
  }

  // the job's own estimate (its measured pace and the phases left: mslm_core.train.pace)
  function left(seconds) {
    if (seconds === null || seconds === undefined) return "";
    return seconds >= 90 ? `, about ${Math.round(seconds / 60)} min left` : `, about ${Math.round(seconds)} s left`;
  }

  function timeLeft(p) {
    if (p.eta_s === null || p.eta_s === undefined) return p.phase || "starting";
    return `${p.phase || ""}${left(p.eta_s)}`.replace(/^, /, "");
  }

  // early stopping ends a job before its last step: a finished job is complete
  function progressOf(job) {
    const p = job.progress || {};
    if (job.state === "succeeded") return 1;
    return p.steps ? p.step / p.steps : 0;
  }

  function stopJobPolling() {
    clearTimeout(state.jobTimer);
    state.jobTimer = null;
    clearTimeout(state.bulkTimer);
    state.bulkTimer = null;
  }

  function scheduleJobPolling(active) {
    stopJobPolling();
    if (active && !$("panel-jobs").hidden) state.jobTimer = setTimeout(refreshJobs, 2000);
  }

  async function showJob(id, focus = true) {
    state.selectedJob = id;
    const job = await api("GET", `/v1/jobs/${encodeURIComponent(id)}`);
    $("job-detail").hidden = false;
    $("job-title").textContent = `Job ${job.id}`;
    const p = job.progress || {};
    const parts = [`state ${job.state}`];
    if (p.epochs) parts.push(`epoch ${p.epoch} of ${p.epochs}`);
    if (p.steps) parts.push(`step ${p.step} of ${p.steps}`);
    if (p.loss !== undefined && p.loss !== null) parts.push(`loss ${Number(p.loss).toFixed(4)}`);
    if (p.steps_per_s) parts.push(`${Number(p.steps_per_s).toFixed(2)} steps/s`);
    if (job.state === "running") parts.push(timeLeft(p));
    for (const warning of job.warnings || []) parts.push(`below its floor: ${warning}`);
    if ((job.datasets || []).length > 1) {
      parts.push(`datasets ${job.datasets.map((d) => `${d.id ?? "(deleted)"}${d.weight !== 1 ? ` ×${d.weight}` : ""}`).join(", ")}`);
    }
    if (job.model_id) parts.push(`model ${job.model_id}`);
    if (job.error) parts.push(`error: ${job.error}`);
    $("job-state").textContent = parts.join(" · ");
    $("job-progress").value = progressOf(job);
    $("job-cancel").hidden = !(job.state === "queued" || job.state === "running");
    drawCurve(job.history || []);
    if (focus) $("job-title").focus();
  }

  // -- datasets: upload (train, optional dev and test), every problem of the files shown with
  // its file and line (the service reads the whole file before it says anything)
  $("dataset-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = new FormData();
    for (const split of ["train", "dev", "test"]) {
      const file = $(`dataset-${split}`).files[0];
      if (file) form.append(split, file, file.name);
    }
    const name = $("dataset-name").value.trim();
    if (name) form.append("name", name);
    const problems = $("dataset-problems");
    problems.replaceChildren();
    problems.hidden = true;
    try {
      const dataset = await api("POST", "/v1/datasets", form);
      say(`Dataset ${dataset.id} uploaded: ${datasetMeta(dataset)}.`);
      $("dataset-form").reset();
      await refreshJobs();
    } catch (error) {
      const errors = (error.problem && error.problem.errors) || [];
      problems.append(...errors.map((e) => el("li", {},
        [e.file, e.line ? `line ${e.line}` : null, e.field].filter(Boolean).join(", ") + `: ${e.message}`)));
      problems.hidden = errors.length === 0;
      fail(error);
    }
  });

  $("job-cancel").addEventListener("click", async () => {
    try {
      await api("POST", `/v1/jobs/${encodeURIComponent(state.selectedJob)}/cancel`);
      await refreshJobs();
    } catch (error) {
      fail(error);
    }
  });

  // The datasets a job may train on: a check box each; a checked one shows its weight and a
  // target for each of its types. Choices survive the list's refresh.
  function showDatasetChoices(datasets) {
    const list = $("job-dataset-list");
    const kept = new Map([...list.querySelectorAll("[data-ds]")].map((row) => [row.dataset.ds, row]));
    const rows = datasets.map((d, i) => kept.get(d.id) || datasetRow(d, i === 0 && kept.size === 0));
    datasets.forEach((d, i) => {
      rows[i].querySelector(".ds-meta").textContent = datasetMeta(d);
      rows[i].querySelector(".suggest").hidden = !d.unlabelled;
    });
    list.replaceChildren(...rows);
  }

  // a dataset grows in versions; its unlabelled documents wait in a pool (docs/active-learning.md)
  function datasetMeta(d) {
    const pool = d.unlabelled ? `, ${d.unlabelled} to label` : "";
    return ` version ${d.version}${pool}`;
  }

  // the pool's documents to label next, most useful first, by the served model's uncertainty
  async function suggestFor(d, list) {
    try {
      const answer = await api("POST", `/v1/datasets/${encodeURIComponent(d.id)}/suggest`, { limit: 10 });
      list.replaceChildren(...answer.data.map((s) => el("li", { dataset: { doc: s.id } },
        el("code", {}, s.id), ` uncertainty ${s.uncertainty.toFixed(2)}`,
        s.similar_to ? ` (like ${s.similar_to})` : "", el("br"),
        el("span", { class: "snippet" }, s.text.length > 160 ? `${s.text.slice(0, 160)}…` : s.text))));
      say(`${answer.data.length} of ${answer.pool} unlabelled documents suggested by ${answer.model} (${answer.strategy}).`);
    } catch (error) {
      fail(error);
    }
  }

  function datasetRow(d, checked) {
    const key = d.id.replace(/[^A-Za-z0-9_-]/g, "_");
    const box = el("input", { type: "checkbox", id: `job-ds-${key}`, value: d.id });
    box.checked = checked;
    const types = (d.types || []).map((t, j) =>
      el("tr", {},
        el("th", { scope: "row" }, el("label", { for: `job-map-${key}-${j}` }, t)),
        el("td", {}, el("input", { id: `job-map-${key}-${j}`, class: "target", dataset: { type: t }, placeholder: t, size: "18" }))));
    const detail = el("div", { class: "ds-detail" },
      el("label", { for: `job-weight-${key}` }, "Weight"),
      el("input", { id: `job-weight-${key}`, class: "weight", type: "number", min: "0.05", max: "100", step: "0.05", value: "1" }),
      el("table", { class: "grid typemap" },
        el("caption", {}, `Types of ${d.name}`),
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Type"), el("th", { scope: "col" }, "Target"))),
        el("tbody", {}, ...types)));
    const suggestions = el("ol", { class: "suggestions", "aria-label": `Label next in ${d.name}` });
    const suggest = el("button", { type: "button", class: "suggest" }, "Suggest what to label next");
    suggest.addEventListener("click", () => suggestFor(d, suggestions));
    detail.append(suggest, suggestions);
    detail.hidden = !checked;
    box.addEventListener("change", () => { detail.hidden = !box.checked; });
    return el("div", { class: "ds", dataset: { ds: d.id } },
      box, el("label", { for: `job-ds-${key}` }, `${d.name} (${d.id})`, el("span", { class: "ds-meta" })), detail);
  }

  // "" keeps the type, "-" drops it, "A|B" (or "A, B") lists the types it may be
  function targetOf(text) {
    const value = text.trim();
    if (value === "-") return null;
    const parts = value.split(/[|,]/).map((x) => x.trim()).filter(Boolean);
    return parts.length > 1 ? parts : parts[0];
  }

  function chosenDatasets() {
    return [...$("job-dataset-list").querySelectorAll("[data-ds]")]
      .filter((row) => row.querySelector("input[type=checkbox]").checked)
      .map((row) => {
        const typeMap = {};
        for (const input of row.querySelectorAll("input.target")) {
          if (input.value.trim()) typeMap[input.dataset.type] = targetOf(input.value);
        }
        return { id: row.dataset.ds, type_map: typeMap, weight: Number(row.querySelector("input.weight").value) };
      });
  }

  $("job-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = chosenDatasets();
    if (chosen.length === 0) {
      fail(new Error("Choose at least one dataset."));
      return;
    }
    const plain = chosen.length === 1 && Object.keys(chosen[0].type_map).length === 0 && chosen[0].weight === 1;
    const body = plain ? { dataset_id: chosen[0].id } : { datasets: chosen };
    // only what the user set: an empty field leaves the API's default (the strategy's own)
    if ($("job-epochs").value.trim()) body.epochs = Number($("job-epochs").value);
    if ($("job-strategy").value) body.strategy = $("job-strategy").value;
    if ($("job-styles").checked) {
      body.source_styles = true;
      const blank = Number($("job-blank").value);
      if (blank > 0) body.blank_style = blank;
    }
    try {
      const job = await api("POST", "/v1/jobs", body);
      say(`Job ${job.id} queued.`);
      state.selectedJob = job.id;
      await refreshJobs();
    } catch (error) {
      fail(error);
    }
  });

  function drawCurve(history) {
    const svg = $("job-curve");
    const ns = "http://www.w3.org/2000/svg";
    const W = 480, H = 220, L = 44, R = 12, T = 12, B = 32;
    const make = (tag, attrs, text) => {
      const node = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
      if (text !== undefined) node.textContent = text;
      return node;
    };
    svg.replaceChildren();
    const points = history.filter((h) => h.dev_f1 !== null && h.dev_f1 !== undefined);
    const n = Math.max(history.length, 1);
    const x = (i) => L + ((W - L - R) * (i + 0.5)) / n;
    const y = (f) => T + (H - T - B) * (1 - f);
    svg.append(make("line", { x1: L, y1: y(0), x2: W - R, y2: y(0), class: "axis" }));
    svg.append(make("line", { x1: L, y1: y(0), x2: L, y2: y(1), class: "axis" }));
    for (const f of [0, 0.25, 0.5, 0.75, 1]) {
      svg.append(make("text", { x: L - 6, y: y(f) + 4, "text-anchor": "end", class: "tick" }, f.toFixed(2)));
    }
    history.forEach((h, i) => {
      svg.append(make("text", { x: x(i), y: H - 12, "text-anchor": "middle", class: "tick" }, String(h.epoch)));
    });
    svg.append(make("text", { x: (W + L) / 2, y: H - 1, "text-anchor": "middle", class: "tick" }, "epoch"));
    if (!points.length) {
      svg.append(make("text", { x: (W + L) / 2, y: H / 2, "text-anchor": "middle", class: "tick" }, "no epoch finished yet"));
      $("job-curve-caption").textContent = "Dev F1 per epoch: none yet";
      return;
    }
    const coords = history
      .map((h, i) => (h.dev_f1 === null || h.dev_f1 === undefined ? null : `${x(i)},${y(h.dev_f1)}`))
      .filter(Boolean);
    svg.append(make("polyline", { points: coords.join(" "), class: "curve" }));
    history.forEach((h, i) => {
      if (h.dev_f1 === null || h.dev_f1 === undefined) return;
      const dot = make("circle", { cx: x(i), cy: y(h.dev_f1), r: 4, class: "dot" });
      dot.append(make("title", {}, `epoch ${h.epoch}: dev F1 ${h.dev_f1.toFixed(4)}`));
      svg.append(dot);
    });
    $("job-curve-caption").textContent =
      "Dev F1 per epoch: " + points.map((h) => `epoch ${h.epoch} ${h.dev_f1.toFixed(3)}`).join(", ");
  }

  // -- bulk annotation jobs ----------------------------------------------------------------
  const BULK_OPEN = new Set(["queued", "running"]);
  const seconds = (s) => (s === null || s === undefined ? "–"
    : s < 90 ? `${Math.round(s)} s` : s < 5400 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`);

  // The output formats, as the service declares them (FileOutput in its OpenAPI document).
  async function loadOutputFormats() {
    const picker = $("bulk-format");
    if (picker.options.length) return;
    const spec = await openapiSpec();
    for (const name of spec.components.schemas.FileOutput.properties.format.enum) {
      picker.append(el("option", { value: name }, name));
    }
  }

  async function refreshBulk() {
    try {
      await loadOutputFormats();
      const jobs = await api("GET", "/v1/annotation-jobs?limit=50");
      const body = $("bulk-jobs").querySelector("tbody");
      body.replaceChildren();
      for (const job of jobs.data) {
        const p = job.progress || {};
        body.append(
          el("tr", { dataset: { bulk: job.id } },
            el("td", {}, el("button", { type: "button", class: "link", onclick: () => showBulk(job.id) }, job.id)),
            el("td", { class: `state ${job.state}` }, job.state),
            el("td", {}, `${p.committed ?? 0} / ${p.total ?? "…"}`),
            el("td", {}, (p.notes_per_second ?? 0).toFixed(1)),
            el("td", {}, seconds(p.eta_seconds)),
            el("td", {}, String(p.failed_notes ?? 0)),
            el("td", {}, new Date(job.created_at).toLocaleString())),
        );
      }
      if (state.selectedBulk) await showBulk(state.selectedBulk, false);
      clearTimeout(state.bulkTimer);
      if (jobs.data.some((j) => BULK_OPEN.has(j.state)) && !$("panel-bulk").hidden) {
        state.bulkTimer = setTimeout(refreshBulk, 2000);
      }
    } catch (error) {
      fail(error);
    }
  }

  async function showBulk(id, focus = true) {
    state.selectedBulk = id;
    const job = await api("GET", `/v1/annotation-jobs/${encodeURIComponent(id)}`);
    const p = job.progress || {};
    $("bulk-detail").hidden = false;
    $("bulk-title").textContent = `Annotation job ${job.id}`;
    const parts = [`state ${job.state}`, `${p.committed ?? 0} of ${p.total ?? "…"} notes`,
      `${p.entities ?? 0} entities`, `${(p.notes_per_second ?? 0).toFixed(1)} notes/s`];
    if (BULK_OPEN.has(job.state) && p.eta_seconds !== null && p.eta_seconds !== undefined) {
      parts.push(`about ${seconds(p.eta_seconds)} left`);
    }
    parts.push(`model ${job.model_id}`);
    const out = job.output || {};
    parts.push(out.kind === "omop" ? `NOTE_NLP rows in ${out.table}` : `output ${out.format}`);
    if (job.error) parts.push(`error: ${job.error}`);
    $("bulk-state").textContent = parts.join(" · ");
    $("bulk-progress").value = p.total ? (p.committed ?? 0) / p.total : job.state === "succeeded" ? 1 : 0;
    $("bulk-cancel").hidden = !BULK_OPEN.has(job.state);
    $("bulk-download").hidden = BULK_OPEN.has(job.state) || out.kind !== "file";
    const errors = await api("GET", `/v1/annotation-jobs/${encodeURIComponent(id)}/errors`);
    const table = $("bulk-errors");
    table.hidden = errors.count === 0;
    const rows = table.querySelector("tbody");
    rows.replaceChildren();
    for (const e of errors.data.slice(0, 200)) {
      rows.append(el("tr", {}, el("td", {}, e.note_id ?? "–"),
        el("td", {}, e.where ?? (e.chunk !== null && e.chunk !== undefined ? `chunk ${e.chunk}` : "–")),
        el("td", {}, e.reason)));
    }
    if (focus) $("bulk-title").focus();
  }

  $("bulk-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const file = $("bulk-file").files[0];
    if (!file) {
      say("Choose a file of notes first.", true);
      return;
    }
    try {
      const form = new FormData();
      form.append("file", file, file.name);
      const response = await fetch("/v1/annotation-jobs/inputs", {
        method: "POST",
        headers: { Authorization: `Bearer ${state.key}`, Accept: "application/json" },
        body: form,
        cache: "no-store",
        credentials: "omit",
      });
      const notes = await response.json();
      if (!response.ok) throw new ApiError(response.status, notes);
      const job = await api("POST", "/v1/annotation-jobs", {
        source: { kind: "file", input: notes.id },
        output: { kind: "file", format: $("bulk-format").value },
        min_confidence: Number($("bulk-threshold").value) || 0,
      });
      const unread = notes.problems.length ? `, ${notes.problems.length} could not be read` : "";
      say(`Job ${job.id} queued: ${notes.notes} notes${unread}.`);
      state.selectedBulk = job.id;
      await refreshBulk();
    } catch (error) {
      fail(error);
    }
  });

  $("bulk-cancel").addEventListener("click", async () => {
    try {
      await api("POST", `/v1/annotation-jobs/${encodeURIComponent(state.selectedBulk)}/cancel`);
      await refreshBulk();
    } catch (error) {
      fail(error);
    }
  });

  // the key goes in a header, so the file is fetched here and handed to the browser as a blob
  $("bulk-download").addEventListener("click", async () => {
    try {
      const id = state.selectedBulk;
      const response = await fetch(`/v1/annotation-jobs/${encodeURIComponent(id)}/output`, {
        headers: { Authorization: `Bearer ${state.key}` },
        cache: "no-store",
        credentials: "omit",
      });
      if (!response.ok) throw new ApiError(response.status, await response.json());
      const name = (response.headers.get("content-disposition") || "").match(/filename="([^"]+)"/);
      const url = URL.createObjectURL(await response.blob());
      const link = el("a", { href: url, download: name ? name[1] : id });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (error) {
      fail(error);
    }
  });

  // -- models ------------------------------------------------------------------------------
  async function refreshModels() {
    try {
      const models = await api("GET", "/v1/models?limit=200");
      const body = $("models").querySelector("tbody");
      body.replaceChildren();
      for (const m of models.data) {
        const test = m.metrics && m.metrics.test && m.metrics.test.strict;
        const actions = el("td", {},
          el("button", { type: "button", onclick: () => showModel(m.id) }, "Report"));
        const warnings = m.warnings || [];
        if (!m.active) {
          actions.append(" ", el("button", { type: "button", onclick: () => activate(m.id, warnings) }, "Serve"));
        }
        body.append(
          el("tr", { dataset: { model: m.id } },
            el("td", {}, m.id),
            el("td", {}, m.strategy),
            el("td", {}, m.base_model),
            el("td", {}, test ? pct(test.f1) : "–"),
            el("td", {}, m.active ? "yes" : ""),
            el("td", { class: warnings.length ? "warning" : "" },
              warnings.length ? `below its floor: ${warnings.join("; ")}` : ""),
            actions),
        );
      }
    } catch (error) {
      fail(error);
    }
  }

  // a model below its job's floor (it predicts nothing on dev, or under min_dev_f1) is served
  // only when the admin confirms it (force)
  async function activate(id, warnings = []) {
    const force = warnings.length > 0;
    if (force && !window.confirm(`Model ${id} is below its job's floor: ${warnings.join("; ")}. Serve it anyway?`)) {
      return;
    }
    try {
      await api("POST", `/v1/models/${encodeURIComponent(id)}/activate${force ? "?force=true" : ""}`);
      say(`Model ${id} is now served.`);
      await refreshModels();
      await connect();
    } catch (error) {
      fail(error);
    }
  }

  function metricsTable(metrics) {
    const table = el("table", { class: "grid" },
      el("caption", {}, "Strict (exact span and type) scores, honest evaluation"),
      el("thead", {}, el("tr", {},
        el("th", { scope: "col" }, "Split"), el("th", { scope: "col" }, "Type"),
        el("th", { scope: "col" }, "Precision"), el("th", { scope: "col" }, "Recall"),
        el("th", { scope: "col" }, "F1"), el("th", { scope: "col" }, "Gold"))));
    const body = el("tbody");
    for (const split of ["dev", "test"]) {
      const m = metrics[split];
      if (!m) continue;
      body.append(el("tr", {}, el("th", { scope: "row" }, split), el("td", {}, "all"),
        el("td", {}, pct(m.strict.precision)), el("td", {}, pct(m.strict.recall)),
        el("td", {}, pct(m.strict.f1)), el("td", {}, String(m.n_gold ?? "–"))));
      for (const [type, s] of Object.entries(m.per_type || {})) {
        body.append(el("tr", {}, el("td", {}, ""), el("td", {}, type),
          el("td", {}, pct(s.precision)), el("td", {}, pct(s.recall)), el("td", {}, pct(s.f1)),
          el("td", {}, String(s.support ?? s.n_gold ?? "–"))));
      }
    }
    table.append(body);
    return table;
  }

  async function showModel(id) {
    try {
      const model = await api("GET", `/v1/models/${encodeURIComponent(id)}`);
      const manifest = model.manifest || {};
      $("model-detail").hidden = false;
      $("model-title").textContent = `Model ${model.id}`;
      const facts = el("p", {},
        `${model.strategy} on ${model.base_model}; types ${model.types.join(", ")}; ` +
        `precisions ${model.precisions.join(", ") || "–"}; best epoch ${manifest.best_epoch ?? "–"}.`);
      $("model-report").replaceChildren(facts, metricsTable(model.metrics || {}));
      const cal = manifest.calibration;
      const img = $("model-diagram");
      if (state.diagramUrl) URL.revokeObjectURL(state.diagramUrl);
      state.diagramUrl = null;
      img.hidden = true;
      if (!cal) {
        $("model-calibration").textContent = "This model was trained before calibration existed.";
        return;
      }
      const split = cal.test ? "test" : "dev";
      $("model-calibration").textContent =
        `Temperature scaling fitted on dev: T(detection) ${cal.detection_temperature.toFixed(2)}, ` +
        `T(type) ${cal.type_temperature.toFixed(2)}. Expected calibration error on ${split}: ` +
        `${cal[split].before.ece.toFixed(3)} before, ${cal[split].after.ece.toFixed(3)} after.`;
      const png = await api("GET", `/v1/models/${encodeURIComponent(id)}/calibration.png`);
      state.diagramUrl = URL.createObjectURL(png);
      img.src = state.diagramUrl;
      img.hidden = false;
    } catch (error) {
      fail(error);
    }
  }

  // a reload keeps the tab's key: connected again without asking
  const kept = sessionStorage.getItem(KEY_ITEM);
  if (kept) {
    state.key = kept;
    connect();
  }
})();
