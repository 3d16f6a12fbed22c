// tokamak web page: a chat over POST /v1/chat/completions (streamed, SSE) and a live dashboard
// over GET /dashboard/data. No framework and no build step: this file is embedded into the
// binary as is, so it must run offline in any current browser.
"use strict";

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------------------------------------
// Settings kept in localStorage (it can throw when storage is disabled: the page still works).

const store = {
  get(key, fallback) {
    try {
      const v = localStorage.getItem("tokamak." + key);
      return v === null ? fallback : v;
    } catch { return fallback; }
  },
  set(key, value) {
    try { localStorage.setItem("tokamak." + key, value); } catch { /* not persisted */ }
  },
};

function bindSetting(id, key) {
  const el = $(id);
  el.value = store.get(key, el.value);
  el.addEventListener("input", () => store.set(key, el.value));
}

// ---------------------------------------------------------------------------------------------
// Formatting. Every value may be null or missing (an empty window has no percentiles).

const isNum = (v) => typeof v === "number" && Number.isFinite(v);
const DASH = "–";

function fmtInt(v) { return isNum(v) ? Math.round(v).toLocaleString("en-US") : DASH; }
function fmtRate(v) { return isNum(v) ? (v < 100 ? v.toFixed(1) : Math.round(v).toLocaleString("en-US")) : DASH; }
function fmtMs(v) {
  if (!isNum(v)) return DASH;
  if (v >= 1000) return (v / 1000).toFixed(2) + " s";
  return (v < 10 ? v.toFixed(1) : Math.round(v)) + " ms";
}
// Short axis labels: 1500 -> "1.5k".
function fmtAxis(v) {
  if (v >= 1000) return +(v / 1000).toFixed(1) + "k";
  return String(+v.toFixed(v < 10 ? 1 : 0));
}

// ---------------------------------------------------------------------------------------------
// API helpers.

function authHeaders() {
  const key = $("api-key").value.trim();
  return key ? { Authorization: "Bearer " + key } : {};
}

// The message of an OpenAI error object {"error":{"message":...}}, else the status line.
async function errorMessage(resp) {
  const text = await resp.text().catch(() => "");
  try {
    const body = JSON.parse(text);
    if (body && body.error && body.error.message) return body.error.message;
  } catch { /* not JSON */ }
  return `HTTP ${resp.status}` + (text ? ": " + text.slice(0, 200) : "");
}

// Yields the data of each server-sent event. Per the SSE format: lines "data: x" accumulate,
// a blank line ends the event; other fields (event:, id:, comments) are ignored.
async function* sseData(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl).replace(/\r$/, "");
      buffer = buffer.slice(nl + 1);
      if (line === "") {
        if (data.length) yield data.join("\n");
        data = [];
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
  }
  // A stream that ends without the final newline or blank line.
  if (buffer.startsWith("data:")) data.push(buffer.slice(buffer.startsWith("data: ") ? 6 : 5));
  if (data.length) yield data.join("\n");
}

// ---------------------------------------------------------------------------------------------
// Model id: the first model of GET /v1/models, retried until the server answers.

let modelId = null;

async function loadModel() {
  try {
    const resp = await fetch("/v1/models", { headers: authHeaders() });
    if (resp.status === 401) throw new Error("set the API key");
    if (!resp.ok) throw new Error(await errorMessage(resp));
    const list = await resp.json();
    const first = list && list.data && list.data[0];
    if (!first) throw new Error("no model served");
    modelId = first.id;
    $("model-id").textContent = modelId;
    $("model-id").title = first.max_model_len ? `context ${first.max_model_len} tokens` : "";
  } catch (e) {
    $("model-id").textContent = "unavailable (" + e.message + ")";
    setTimeout(loadModel, 3000);
  }
}

// ---------------------------------------------------------------------------------------------
// Chat. `history` holds the finished turns; the system prompt is prepended at send time so that
// editing it applies to the next turn.

const history = [];     // [{role: "user"|"assistant", content}]
let inflight = null;    // AbortController of the request being streamed, null when idle
let conversation = 0;   // bumped by "New chat", so that an answer cut by it leaves the new one alone

function addMessage(role, text) {
  $("empty-hint").hidden = true;
  const el = document.createElement("div");
  el.className = "msg " + role;
  const label = document.createElement("div");
  label.className = "role";
  label.textContent = role === "user" ? "you" : "assistant";
  const body = document.createElement("div");
  body.className = "body";
  body.textContent = text;   // textContent, never innerHTML: model output is untrusted
  el.append(label, body);
  $("messages").append(el);
  scrollMessages();
  return { el, body };
}

function scrollMessages() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

function requestBody() {
  const messages = [];
  const system = $("system-prompt").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...history);
  const body = {
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: parseFloat($("temperature").value),
  };
  const maxTokens = parseInt($("max-tokens").value, 10);
  if (maxTokens > 0) body.max_tokens = maxTokens;
  if (modelId) body.model = modelId;   // else let the server say what is missing
  return body;
}

async function send() {
  const input = $("chat-input");
  const text = input.value;
  if (!text.trim() || inflight) return;
  input.value = "";
  history.push({ role: "user", content: text });
  addMessage("user", text);
  const msg = addMessage("assistant", "");
  msg.el.dataset.state = "streaming";

  const ctl = new AbortController();
  const conv = conversation;
  inflight = ctl;
  setBusy(true);

  // Client-side timings: TTFT from send to the first content; speed over the tokens after it.
  const t0 = performance.now();
  let tFirst = null, tLast = null, chunks = 0, usage = null, finish = null;
  let answer = "", state = "done", error = null;
  try {
    const resp = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify(requestBody()),
      signal: ctl.signal,
    });
    if (!resp.ok) throw new Error(await errorMessage(resp));
    for await (const data of sseData(resp.body)) {
      if (data === "[DONE]") break;
      const event = JSON.parse(data);
      if (event.error) throw new Error(event.error.message || "server error");
      if (event.usage) usage = event.usage;   // the last chunk, with "choices": []
      for (const choice of event.choices || []) {
        const piece = choice.delta && choice.delta.content;
        if (piece) {
          tLast = performance.now();
          if (tFirst === null) tFirst = tLast;
          answer += piece;
          chunks += 1;
          msg.body.textContent = answer;
          msg.el.dataset.chunks = chunks;   // lets tests see that the text came in pieces
          scrollMessages();
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
  } catch (e) {
    if (e.name === "AbortError") state = "stopped";
    else { state = "error"; error = e.message; }
  } finally {
    inflight = null;
    setBusy(false);
  }
  if (conv !== conversation) return;   // "New chat" was pressed meanwhile

  msg.el.dataset.state = state;
  if (answer) {
    history.push({ role: "assistant", content: answer });
  } else {
    // Nothing came back: drop the user turn so that the history stays user/assistant pairs,
    // and give the text back for a retry.
    history.pop();
    if (!input.value) input.value = text;
  }
  if (error) {
    const el = document.createElement("div");
    el.className = "error";
    el.textContent = error;
    msg.el.append(el);
  }
  if (tFirst !== null) {
    const tokens = usage && isNum(usage.completion_tokens) ? usage.completion_tokens : chunks;
    const parts = [`${tokens} tokens`, `TTFT ${fmtMs(tFirst - t0)}`];
    // Decode speed as TPOT sees it: the first token's time is TTFT, not generation.
    if (tokens > 1 && tLast > tFirst) parts.push(`${fmtRate((tokens - 1) / ((tLast - tFirst) / 1000))} tok/s`);
    if (finish === "length") parts.push("hit max tokens");
    const stats = document.createElement("div");
    stats.className = "stats";
    stats.textContent = parts.join(" · ");
    msg.el.append(stats);
  } else if (state === "stopped") {
    msg.body.textContent = "(stopped before the first token)";
  }
  scrollMessages();
}

function newChat() {
  if (inflight) inflight.abort();
  conversation += 1;
  history.length = 0;
  for (const el of [...$("messages").querySelectorAll(".msg")]) el.remove();
  $("empty-hint").hidden = false;
  $("chat-input").focus();
}

// ---------------------------------------------------------------------------------------------
// Canvas drawing. Colours come from the CSS variables (so the theme applies).

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// Sizes the canvas backing store to its CSS box times the device pixel ratio (sharp lines on
// HiDPI screens) and returns a context that draws in CSS pixels.
function prepareCanvas(canvas, cssHeight) {
  if (cssHeight !== undefined) canvas.style.height = cssHeight + "px";
  const w = canvas.clientWidth, h = canvas.clientHeight;
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return { ctx, w, h };
}

// The smallest 1/2/5 x 10^k step that splits `max` into at most `n` intervals.
function niceStep(max, n) {
  const raw = max / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

const SERIES_SECONDS = 300;
const CHART_FONT = "10px system-ui, sans-serif";

// A line chart of `points` (series objects with "t") over the last 5 minutes ending at `tEnd`.
// lines: [{key, label, color}]. A null value breaks its line. `integer`: counts, no 0.5 ticks.
function drawChart(canvas, points, tEnd, lines, integer = false) {
  const { ctx, w, h } = prepareCanvas(canvas);
  const pad = { left: 38, right: 8, top: 16, bottom: 16 };
  const pw = w - pad.left - pad.right, ph = h - pad.top - pad.bottom;
  if (pw <= 0 || ph <= 0) return;
  const tStart = tEnd - SERIES_SECONDS;

  let max = 0;
  for (const p of points) for (const l of lines) if (isNum(p[l.key])) max = Math.max(max, p[l.key]);
  const step = Math.max(integer ? 1 : 0, niceStep(max > 0 ? max : 1, 4));
  const top = Math.max(step, Math.ceil(max / step) * step);
  const x = (t) => pad.left + ((t - tStart) / SERIES_SECONDS) * pw;
  const y = (v) => pad.top + ph - (v / top) * ph;

  // Grid and y labels.
  ctx.font = CHART_FONT;
  ctx.lineWidth = 1;
  ctx.strokeStyle = cssVar("--grid");
  ctx.fillStyle = cssVar("--muted");
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let v = 0; v <= top + step / 2; v += step) {
    const yy = Math.round(y(v)) + 0.5;
    ctx.beginPath(); ctx.moveTo(pad.left, yy); ctx.lineTo(pad.left + pw, yy); ctx.stroke();
    ctx.fillText(fmtAxis(v), pad.left - 5, yy);
  }
  // x labels: one a minute, "-5m" .. "now".
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (let m = 5; m >= 0; m--) {
    const xx = x(tEnd - m * 60);
    ctx.textAlign = m === 5 ? "left" : m === 0 ? "right" : "center";
    ctx.fillText(m === 0 ? "now" : `-${m}m`, xx, pad.top + ph + 4);
  }
  // Axes.
  ctx.strokeStyle = cssVar("--border");
  ctx.beginPath();
  ctx.moveTo(pad.left + 0.5, pad.top); ctx.lineTo(pad.left + 0.5, pad.top + ph + 0.5);
  ctx.lineTo(pad.left + pw, pad.top + ph + 0.5);
  ctx.stroke();

  // Lines; a point alone between gaps gets a dot, else it would not show.
  let any = false;
  for (const l of lines) {
    ctx.strokeStyle = ctx.fillStyle = l.color;
    ctx.lineWidth = 1.5;
    ctx.lineJoin = "round";
    ctx.beginPath();
    let prevOk = false;
    points.forEach((p, i) => {
      const v = p[l.key];
      if (!isNum(v) || !isNum(p.t) || p.t < tStart) { prevOk = false; return; }
      any = true;
      const xx = x(p.t), yy = y(v);
      if (prevOk) ctx.lineTo(xx, yy); else ctx.moveTo(xx, yy);
      const next = points[i + 1];
      if (!prevOk && !(next && isNum(next[l.key]))) ctx.fillRect(xx - 1.5, yy - 1.5, 3, 3);
      prevOk = true;
    });
    ctx.stroke();
  }

  // Legend, top right, when there is more than one line.
  ctx.textBaseline = "middle";
  ctx.textAlign = "left";
  if (lines.length > 1) {
    let lx = pad.left + pw;
    for (const l of [...lines].reverse()) {
      lx -= ctx.measureText(l.label).width + 22;
      ctx.fillStyle = l.color;
      ctx.fillRect(lx, 4, 10, 3);
      ctx.fillStyle = cssVar("--muted");
      ctx.fillText(l.label, lx + 14, 6);
    }
  }
  if (!any) {
    ctx.textAlign = "center";
    ctx.fillStyle = cssVar("--muted");
    ctx.fillText("no data yet", pad.left + pw / 2, pad.top + ph / 2);
  }
}

// The KV cache map: one square per cell of kv.cells ('.' free, 'c' cached: in the prefix cache,
// used by no request, free on demand; 'u' used, 's' shared). The square
// size is the largest that keeps the map under KV_MAX_HEIGHT px, so the whole cache is visible.
const KV_MAX_HEIGHT = 100, KV_GAP = 1;
let kvLayout = null;   // {cols, side, n, perCell} for the hover title

function drawKvMap(kv) {
  const canvas = $("kv-map");
  const cells = kv && typeof kv.cells === "string" ? kv.cells : "";
  const n = cells.length;
  const width = canvas.clientWidth;
  let side = 3, cols = 1;
  for (let s = 14; s >= 3; s--) {
    cols = Math.max(1, Math.floor((width + KV_GAP) / (s + KV_GAP)));
    side = s;
    if (Math.ceil(n / cols) * (s + KV_GAP) <= KV_MAX_HEIGHT) break;
  }
  const rows = Math.max(1, Math.ceil(n / cols));
  const { ctx, w } = prepareCanvas(canvas, n ? rows * (side + KV_GAP) - KV_GAP : 40);
  kvLayout = { cols, side, n, perCell: (kv && kv.blocks_per_cell) || 1 };
  if (!n) {
    ctx.font = CHART_FONT;
    ctx.fillStyle = cssVar("--muted");
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText("no KV data", w / 2, 20);
    return;
  }
  const colour = { ".": cssVar("--kv-free"), c: cssVar("--kv-cached"), u: cssVar("--kv-used"),
                   s: cssVar("--kv-shared") };
  for (let i = 0; i < n; i++) {
    ctx.fillStyle = colour[cells[i]] || colour["."];
    ctx.fillRect((i % cols) * (side + KV_GAP), Math.floor(i / cols) * (side + KV_GAP), side, side);
  }
}

function kvHover(ev) {
  const canvas = $("kv-map");
  if (!kvLayout || !kvLayout.n) { canvas.title = ""; return; }
  const { cols, side, n, perCell } = kvLayout;
  const col = Math.floor(ev.offsetX / (side + KV_GAP)), row = Math.floor(ev.offsetY / (side + KV_GAP));
  const i = row * cols + col;
  if (col >= cols || i >= n) { canvas.title = ""; return; }
  canvas.title = perCell > 1 ? `blocks ${i * perCell}–${(i + 1) * perCell - 1}` : `block ${i}`;
}

// ---------------------------------------------------------------------------------------------
// Dashboard: polled every second; each poll waits for the previous one (no pile-up when the
// server is slow).

let lastDashboard = null;
let polls = 0;

function setText(id, text) {
  const el = $(id);
  if (el.textContent !== text) el.textContent = text;
}

function setConnection(state, text) {
  $("conn").dataset.state = state;
  setText("conn-text", text);
}

function renderDashboard(d) {
  const totals = d.totals || {}, win = d.window || {};
  const ttft = win.ttft_ms || {}, tpot = win.tpot_ms || {};
  setText("dash-running", fmtInt(d.running));
  setText("dash-waiting", fmtInt(d.waiting));
  setText("dash-tokens-per-s", fmtRate(win.gen_tokens_per_s));
  setText("dash-requests", fmtInt(totals.requests));
  setText("dash-prompt-tokens", fmtInt(totals.prompt_tokens));
  setText("dash-gen-tokens", fmtInt(totals.generation_tokens));
  setText("dash-preemptions", fmtInt(totals.preemptions));
  setText("dash-errors", fmtInt(totals.errors));
  setText("dash-window", isNum(win.seconds) ? String(win.seconds) : "60");
  for (const p of ["p50", "p90", "p99"]) {
    setText("dash-ttft-" + p, fmtMs(ttft[p]));
    setText("dash-tpot-" + p, fmtMs(tpot[p]));
  }

  const series = Array.isArray(d.series) ? d.series : [];
  const last = series.length ? series[series.length - 1].t : null;
  const tEnd = isNum(d.time) ? d.time : isNum(last) ? last : Date.now() / 1000;
  drawChart($("chart-tokens"), series, tEnd, [
    { key: "gen_tokens_per_s", label: "generation", color: cssVar("--accent") },
    { key: "prompt_tokens_per_s", label: "prompt", color: cssVar("--accent-2") },
  ]);
  drawChart($("chart-ttft"), series, tEnd, [
    { key: "ttft_p50_ms", label: "p50", color: cssVar("--accent") },
    { key: "ttft_p99_ms", label: "p99", color: cssVar("--accent-2") },
  ]);
  drawChart($("chart-tpot"), series, tEnd, [
    { key: "tpot_p50_ms", label: "p50", color: cssVar("--accent") },
    { key: "tpot_p99_ms", label: "p99", color: cssVar("--accent-2") },
  ]);
  drawChart($("chart-queue"), series, tEnd, [
    { key: "running", label: "running", color: cssVar("--accent") },
    { key: "waiting", label: "waiting", color: cssVar("--accent-2") },
  ], true);

  const kv = d.kv || null;
  drawKvMap(kv);
  setText("kv-used", kv ? `${fmtInt(kv.blocks_used)} / ${fmtInt(kv.blocks_total)}` : DASH);
  setText("kv-usage", kv && isNum(kv.usage) ? (kv.usage * 100).toFixed(kv.usage < 0.1 ? 2 : 1) + " %" : DASH);
  const scale = [];
  if (kv && kv.blocks_per_cell > 1) scale.push(`1 square = ${kv.blocks_per_cell} blocks`);
  if (kv && kv.block_size) scale.push(`${kv.block_size} tokens/block`);
  if (kv && isNum(kv.blocks_shared)) scale.push(`${fmtInt(kv.blocks_shared)} shared`);
  if (kv && isNum(kv.blocks_cached)) scale.push(`${fmtInt(kv.blocks_cached)} cached`);
  if (kv && isNum(kv.prefix_cache_hit_rate)) {
    scale.push(`prefix hit rate ${(kv.prefix_cache_hit_rate * 100).toFixed(1)} %`);
  }
  setText("kv-scale", scale.join(" · "));

  const when = isNum(d.time) ? new Date(d.time * 1000) : new Date();
  setText("dash-updated", "updated " + when.toLocaleTimeString("en-GB"));
}

async function pollDashboard() {
  try {
    const opts = { cache: "no-store" };
    if (AbortSignal.timeout) opts.signal = AbortSignal.timeout(5000);
    const resp = await fetch("/dashboard/data", opts);
    if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
    lastDashboard = await resp.json();
    polls += 1;
    $("dash-updated").dataset.polls = polls;
    renderDashboard(lastDashboard);
    setConnection("ok", "live");
  } catch (e) {
    setConnection("error", "offline");
  } finally {
    setTimeout(pollDashboard, 1000);
  }
}

// ---------------------------------------------------------------------------------------------
// Wiring.

function init() {
  bindSetting("api-key", "apiKey");
  bindSetting("system-prompt", "systemPrompt");
  bindSetting("temperature", "temperature");
  bindSetting("max-tokens", "maxTokens");
  const showTemperature = () => { $("temperature-value").textContent = (+$("temperature").value).toFixed(2); };
  $("temperature").addEventListener("input", showTemperature);
  showTemperature();
  // A new key may unlock /v1/models.
  $("api-key").addEventListener("change", () => { if (!modelId) loadModel(); });

  $("composer").addEventListener("submit", (ev) => { ev.preventDefault(); send(); });
  $("chat-input").addEventListener("keydown", (ev) => {
    // Enter sends, Shift+Enter is a newline; not while an IME is composing a character.
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      send();
    }
  });
  $("stop").addEventListener("click", () => { if (inflight) inflight.abort(); });
  $("new-chat").addEventListener("click", newChat);
  $("kv-map").addEventListener("mousemove", kvHover);

  // Canvases are sized from their CSS box: redraw when the window changes.
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (lastDashboard) renderDashboard(lastDashboard); }, 100);
  });

  loadModel();
  pollDashboard();
}

init();
