// The daemon's web page: chat with any model (streamed, with Stop), the models (loaded and
// stored: unload, pin, load, pull), and live figures from /metrics. Same-origin calls to the
// API the page is served by; nothing is fetched from anywhere else.
"use strict";

const $ = (selector) => document.querySelector(selector);
const state = { history: [], answering: null, lastTokens: null, lastAt: 0 };

// -- talking to the daemon ---------------------------------------------------------------

function headers(extra = {}) {
  const key = localStorage.getItem("localserve-key");
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function api(method, path, body, signal) {
  const init = { method, headers: headers(body ? { "Content-Type": "application/json" } : {}), signal };
  if (body) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.status === 401 && (await askForKey())) return api(method, path, body, signal);
  if (!response.ok) {
    const text = await response.text();
    let message = text;
    try {
      const parsed = JSON.parse(text);
      message = parsed.error?.message || parsed.error || text;
    } catch (_) { /* not JSON: the text as it came */ }
    throw new Error(`${path}: ${response.status} ${message}`);
  }
  return response;
}

function askForKey() {
  const dialog = $("#key-dialog");
  return new Promise((resolve) => {
    dialog.onclose = () => {
      const key = $("#key").value.trim();
      if (key) localStorage.setItem("localserve-key", key);
      resolve(Boolean(key));
    };
    dialog.showModal();
  });
}

function showError(error) {
  const box = $("#error");
  box.textContent = String(error.message || error);
  box.hidden = false;
  setTimeout(() => (box.hidden = true), 8000);
}

// Lines of a streamed body as they arrive (SSE's `data:` lines, or NDJSON).
async function* lines(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 1);
      if (line) yield line;
    }
  }
  if (buffer.trim()) yield buffer.trim();
}

// -- chat ------------------------------------------------------------------------------------

function addMessage(role, text) {
  const node = document.createElement("div");
  node.className = `message ${role}`;
  node.innerHTML = role === "assistant" ? renderMarkdown(text) : "";
  if (role !== "assistant") node.textContent = text;
  $("#messages").append(node);
  node.scrollIntoView({ block: "end" });
  return node;
}

async function send(event) {
  event.preventDefault();
  const text = $("#prompt").value.trim();
  const model = $("#model-select").value;
  if (!text || !model || state.answering) return;
  $("#prompt").value = "";
  state.history.push({ role: "user", content: text });
  addMessage("user", text);
  const node = addMessage("assistant", "");
  node.classList.add("streaming");
  const controller = new AbortController();
  state.answering = controller;
  $("#send").hidden = true;
  $("#stop").hidden = false;
  let answer = "";
  try {
    const body = { model, messages: state.history, stream: true };
    const most = Number($("#max-tokens").value);
    if (most > 0) body.max_tokens = most;
    const response = await api("POST", "/v1/chat/completions", body, controller.signal);
    for await (const line of lines(response)) {
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message || chunk.error);
      const delta = chunk.choices?.[0]?.delta?.content || "";
      if (delta) {
        answer += delta;
        node.innerHTML = renderMarkdown(answer);
      }
    }
  } catch (error) {
    if (error.name === "AbortError") node.dataset.stopped = "true";
    else showError(error);
  } finally {
    node.classList.remove("streaming");
    state.answering = null;
    $("#send").hidden = false;
    $("#stop").hidden = true;
    if (answer) state.history.push({ role: "assistant", content: answer });
  }
}

// -- models ----------------------------------------------------------------------------------

const bare = (name) => name.replace(/:latest$/, "");

function size(bytes) {
  if (!bytes) return "–";
  const units = [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]];
  for (const [unit, step] of units) if (bytes >= step) return `${(bytes / step).toFixed(1)} ${unit}`;
  return `${bytes} B`;
}

function until(model) {
  const ours = model.localserve || {};
  if (ours.pinned) return "pinned";
  if (ours.in_flight) return "busy";
  const seconds = (new Date(model.expires_at) - Date.now()) / 1000;
  if (!isFinite(seconds) || seconds > 100 * 365 * 86400) return "kept loaded";
  return seconds < 60 ? `${Math.max(0, Math.round(seconds))} s` : `${Math.round(seconds / 60)} min`;
}

function button(label, action, model) {
  const node = document.createElement("button");
  node.textContent = label;
  node.className = label.toLowerCase();
  node.dataset.model = model;
  node.onclick = async () => {
    node.disabled = true;
    try {
      await action();
      await refreshModels();
    } catch (error) {
      showError(error);
    } finally {
      node.disabled = false;
    }
  };
  return node;
}

function row(cells, actions) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    td.textContent = cell;
    tr.append(td);
  }
  const td = document.createElement("td");
  td.append(...actions);
  tr.append(td);
  return tr;
}

async function refreshModels() {
  const [ps, tags] = await Promise.all([
    api("GET", "/api/ps").then((r) => r.json()),
    api("GET", "/api/tags").then((r) => r.json()),
  ]);
  const loaded = new Set(ps.models.map((m) => bare(m.name)));
  $("#loaded tbody").replaceChildren(...ps.models.map((m) => {
    const name = bare(m.name), ours = m.localserve || {};
    return row([name, size(m.size), ours.device || "cpu", String(ours.in_flight || 0), until(m)], [
      button("Unload", () => api("POST", "/api/admin/unload", { model: name }), name),
      button(ours.pinned ? "Unpin" : "Pin",
        () => api("POST", "/api/admin/pin", { model: name, pinned: !ours.pinned }), name),
    ]);
  }));
  $("#stored tbody").replaceChildren(...tags.models.map((m) => {
    const name = bare(m.name);
    // An upstream's model (docs/upstreams.md) runs on its server: nothing here to load.
    if (m.remote_host) return row([name, "remote: " + m.remote_host, m.details?.parameter_size || "–"], []);
    const load = loaded.has(name) ? [] : [button("Load", () => api("POST", "/api/admin/load", { model: name }), name)];
    return row([name, size(m.size), m.details?.parameter_size || "–"], load);
  }));
  const select = $("#model-select"), chosen = select.value;
  const names = [...new Set([...loaded, ...tags.models.map((m) => bare(m.name))])];
  select.replaceChildren(...names.map((name) => new Option(name, name)));
  select.value = names.includes(chosen) ? chosen : names[0] || "";
}

async function pull(event) {
  event.preventDefault();
  const name = $("#pull-name").value.trim();
  const bar = $("#pull-progress"), status = $("#pull-status");
  bar.hidden = false;
  try {
    const response = await api("POST", "/api/pull", { model: name, stream: true });
    for await (const line of lines(response)) {
      const event = JSON.parse(line);
      if (event.error) throw new Error(event.error);
      status.textContent = event.status || "";
      if (event.total) bar.value = event.completed / event.total;
    }
    await refreshModels();
  } catch (error) {
    showError(error);
  } finally {
    bar.hidden = true;
  }
}

// -- live figures, from /metrics ---------------------------------------------------------

function metricSums(text) {
  const sums = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = line.match(/^([a-z_]+)(\{[^}]*\})?\s+(\S+)/);
    if (!match) continue;
    const device = match[2]?.match(/device="([^"]+)"/);
    const key = device ? `${match[1]}|${device[1]}` : match[1];
    sums[key] = (sums[key] || 0) + Number(match[3]);
  }
  return sums;
}

async function refreshFigures() {
  const sums = metricSums(await (await api("GET", "/metrics")).text());
  const tokens = sums.localserve_generated_tokens_total || 0, now = performance.now();
  if (state.lastTokens !== null && now > state.lastAt) {
    $("#rate").textContent = ((tokens - state.lastTokens) / ((now - state.lastAt) / 1000)).toFixed(1);
  }
  state.lastTokens = tokens;
  state.lastAt = now;
  $("#queue").textContent = String(sums.localserve_sequences_waiting || 0);
  const pools = Object.keys(sums).filter((k) => k.startsWith("localserve_pool_reserved_bytes|"));
  $("#memory").textContent = pools.map((k) => `${k.split("|")[1]} ${size(sums[k])}`).join(", ") || "–";
  // The requests of the batches still running (/v1/batches), answered of all.
  const batched = sums.localserve_batch_requests || 0;
  $("#batches").textContent = batched ? `${sums.localserve_batch_requests_done || 0}/${batched}` : "–";
}

// -- the page --------------------------------------------------------------------------------

function show(view) {
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === view);
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== view;
  if (view === "models") refreshModels().catch(showError);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const tab of document.querySelectorAll(".tab")) tab.onclick = () => show(tab.dataset.view);
  $("#ask").onsubmit = send;
  $("#prompt").onkeydown = (event) => {
    if (event.key === "Enter" && !event.shiftKey) send(event);
  };
  $("#stop").onclick = () => state.answering?.abort();
  $("#clear").onclick = () => {
    state.history = [];
    $("#messages").replaceChildren();
  };
  $("#pull").onsubmit = pull;
  refreshModels().catch(showError);
  refreshFigures().catch(() => {});
  setInterval(() => refreshFigures().catch(() => {}), 2000);
  setInterval(() => {
    if (!$("#models").hidden) refreshModels().catch(() => {});
  }, 3000);
});
