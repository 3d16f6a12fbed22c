#include "cli/bench_serve_html.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <string_view>

namespace tokamak::cli {
namespace {

using nlohmann::json;

// The page; __DATA__ becomes the chart data: {"date", "runs": html_chart_data()}.
constexpr std::string_view kPage = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>tokamak bench serve</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.sub{color:#666;margin-bottom:12px}
table{border-collapse:collapse;background:#fff}
th,td{padding:4px 8px;border-bottom:1px solid #e4e4e4;text-align:right;white-space:nowrap}
#table{overflow-x:auto}td:first-child{white-space:normal;min-width:120px;max-width:280px}
th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}
.grid{display:flex;flex-wrap:wrap;gap:16px}
.chart{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px}
.chart h3{font-size:14px;margin:0 0 4px}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;max-width:640px}
.legend span{display:inline-flex;align-items:center;gap:5px}
.legend i{display:inline-block;width:18px;height:0;border-top:3px solid}
.legend i.dash{border-top-style:dashed}
svg text{font-size:11px;fill:#444}.axis line{stroke:#ccc}.axis path{stroke:#888}
.empty{color:#999;padding:20px}
</style></head><body>
<h1>tokamak bench serve</h1>
<div class="sub" id="sub"></div>
<label><input type="checkbox" id="logx" checked> logarithmic latency axis</label>
<h2>Runs</h2><div id="table"></div>
<h2>Latency CDFs</h2><div class="grid" id="cdfs"></div>
<div id="sweep"></div>
<div id="turns"></div>
<script>
const DATA = __DATA__;
const W = 640, H = 360, M = {l: 64, r: 20, t: 12, b: 44};
const HUES = [210, 20, 130, 280, 50, 340, 180, 0, 90, 250];

function esc(s) { return String(s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c])); }
function fmt(v) {
  if (v === null || v === undefined || !isFinite(v)) return '-';
  const a = Math.abs(v);
  if (a >= 10000) return (v / 1000).toFixed(0) + 'k';
  if (a >= 1000) return (v / 1000).toFixed(1) + 'k';
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}
function tick(v) { return v >= 1000 ? (v / 1000) + 'k' : String(+v.toPrecision(6)); }
function niceTicks(lo, hi, n) {
  const span = hi - lo || 1, raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / mag, step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag, t = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push(+v.toPrecision(12));
  return t;
}
function logTicks(lo, hi) {
  const t = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++)
    for (const m of [1, 2, 5]) { const v = m * Math.pow(10, e); if (v >= lo * 0.999 && v <= hi * 1.001) t.push(v); }
  return t;
}
function extent(series, k) {
  let lo = Infinity, hi = -Infinity;
  for (const s of series) for (const p of s.points) { lo = Math.min(lo, p[k]); hi = Math.max(hi, p[k]); }
  return [lo, hi];
}
// series: [{name, color, dash, points: [[x, y]], marks}]; o: {xLabel, yLabel, logX, xTicks, y01}
function chart(title, series, o) {
  series = series.filter(s => s.points.length);
  const box = '<div class="chart"><h3>' + esc(title) + '</h3>';
  if (!series.length) return box + '<div class="empty">no data</div></div>';
  let [x0, x1] = extent(series, 0), [y0, y1] = extent(series, 1);
  if (o.logX) { x0 = Math.max(x0, 1e-3); x1 = Math.max(x1, x0 * 1.01); x0 /= 1.15; x1 *= 1.15; }
  else { const pad = (x1 - x0) * 0.04 || Math.abs(x1) * 0.1 || 1; x0 = Math.max(0, x0 - pad); x1 += pad; }
  if (o.y01) { y0 = 0; y1 = 1; } else { y0 = 0; y1 = y1 > 0 ? y1 * 1.08 : 1; }
  const pw = W - M.l - M.r, ph = H - M.t - M.b;
  const lx = v => Math.log10(Math.max(v, 1e-3));
  const sx = o.logX ? v => M.l + (lx(v) - lx(x0)) / (lx(x1) - lx(x0)) * pw : v => M.l + (v - x0) / (x1 - x0) * pw;
  const sy = v => M.t + ph - (v - y0) / (y1 - y0) * ph;
  let g = '<svg width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + ' ' + H + '"><g class="axis">';
  const xt = o.xTicks || (o.logX ? logTicks(x0, x1) : niceTicks(x0, x1, 7));
  for (const v of xt) {
    const x = sx(v).toFixed(1);
    g += '<line x1="' + x + '" x2="' + x + '" y1="' + M.t + '" y2="' + (M.t + ph) + '"/>';
    g += '<text x="' + x + '" y="' + (M.t + ph + 16) + '" text-anchor="middle">' + tick(v) + '</text>';
  }
  for (const v of niceTicks(y0, y1, 5)) {
    const y = sy(v).toFixed(1);
    g += '<line x1="' + M.l + '" x2="' + (M.l + pw) + '" y1="' + y + '" y2="' + y + '"/>';
    g += '<text x="' + (M.l - 6) + '" y="' + y + '" dy="4" text-anchor="end">' + tick(v) + '</text>';
  }
  g += '<path d="M' + M.l + ',' + M.t + 'V' + (M.t + ph) + 'H' + (M.l + pw) + '" fill="none"/></g>';
  g += '<text x="' + (M.l + pw / 2) + '" y="' + (H - 6) + '" text-anchor="middle">' + esc(o.xLabel) + '</text>';
  g += '<text transform="translate(14,' + (M.t + ph / 2) + ') rotate(-90)" text-anchor="middle">' + esc(o.yLabel) + '</text>';
  for (const s of series) {
    const d = s.points.map((p, i) => (i ? 'L' : 'M') + sx(p[0]).toFixed(1) + ',' + sy(p[1]).toFixed(1)).join('');
    g += '<path d="' + d + '" fill="none" stroke="' + s.color + '" stroke-width="2"' +
         (s.dash ? ' stroke-dasharray="6 4"' : '') + '><title>' + esc(s.name) + '</title></path>';
    if (s.marks) for (const p of s.points)
      g += '<circle cx="' + sx(p[0]).toFixed(1) + '" cy="' + sy(p[1]).toFixed(1) + '" r="3.5" fill="' + s.color +
           '"><title>' + esc(s.name + ': ' + fmt(p[1]) + ' at ' + tick(p[0])) + '</title></circle>';
  }
  g += '</svg><div class="legend">';
  for (const s of series)
    g += '<span><i class="' + (s.dash ? 'dash' : '') + '" style="border-color:' + s.color + '"></i>' + esc(s.name) + '</span>';
  return box + g + '</div></div>';
}

const labels = [...new Set(DATA.runs.map(r => r.label))];
const multiLabel = labels.length > 1;
function concName(r) { return r.concurrency === null ? 'c=inf' : 'c=' + r.concurrency; }
function runName(r) {
  const perLabel = DATA.runs.filter(q => q.label === r.label).length;
  if (!multiLabel) return perLabel > 1 ? concName(r) : r.label;
  return perLabel > 1 ? r.label + ' ' + concName(r) : r.label;
}
function runColor(r) {
  const hue = HUES[labels.indexOf(r.label) % HUES.length];
  const mine = DATA.runs.filter(q => q.label === r.label), k = mine.indexOf(r);
  if (!multiLabel) return 'hsl(' + HUES[DATA.runs.indexOf(r) % HUES.length] + ',70%,42%)';
  return 'hsl(' + hue + ',75%,' + (mine.length > 1 ? 22 + 48 * k / (mine.length - 1) : 42) + '%)';
}
// The empirical CDF as a step line: up by 1/n at every value.
function cdf(values) {
  const n = values.length, pts = [];
  values.forEach((v, i) => { pts.push([v, i / n]); pts.push([v, (i + 1) / n]); });
  return pts;
}

function renderTable() {
  const cols = ['run', 'conc', 'ok', 'failed', 'req/s', 'out tok/s', 'total tok/s', 'TTFT p50', 'TTFT p99',
                'TPOT p50', 'TPOT p99', 'ITL p50', 'E2E p50', 'E2E p99', 'goodput'];
  let h = '<table><tr>' + cols.map(c => '<th>' + c + '</th>').join('') + '</tr>';
  for (const r of DATA.runs) {
    const cells = [runName(r), r.concurrency === null ? 'inf' : r.concurrency, r.completed, r.failed,
      fmt(r.requests_per_s), fmt(r.output_tokens_per_s), fmt(r.total_tokens_per_s),
      fmt(r.ttft && r.ttft.p50), fmt(r.ttft && r.ttft.p99), fmt(r.tpot && r.tpot.p50), fmt(r.tpot && r.tpot.p99),
      fmt(r.itl && r.itl.p50), fmt(r.e2e && r.e2e.p50), fmt(r.e2e && r.e2e.p99), fmt(r.goodput_rps)];
    h += '<tr>' + cells.map(c => '<td>' + esc(c) + '</td>').join('') + '</tr>';
  }
  const workloads = new Map();  // workload -> the labels that ran it
  for (const r of DATA.runs) workloads.set(r.workload, (workloads.get(r.workload) || new Set()).add(r.label));
  const about = workloads.size === 1 ? 'workload: ' + esc([...workloads.keys()][0])
      : [...workloads].map(([w, ls]) => esc([...ls].join(', ') + ': ' + w)).join('<br>');
  document.getElementById('table').innerHTML = h + '</table><p class="sub">latencies in ms; ' + about + '</p>';
}

function renderCdfs() {
  const logX = document.getElementById('logx').checked;
  let h = '';
  for (const [key, title] of [['ttft', 'TTFT'], ['tpot', 'TPOT'], ['e2e', 'E2E latency']]) {
    const series = DATA.runs.map(r => ({name: runName(r), color: runColor(r), points: cdf(r.cdf[key])}));
    h += chart(title + ' CDF', series, {xLabel: title + ' (ms)', yLabel: 'fraction of requests', logX, y01: true});
  }
  document.getElementById('cdfs').innerHTML = h;
}

function renderSweep() {
  const byLabel = labels.map(l => DATA.runs.filter(r => r.label === l && r.concurrency !== null)
                                          .sort((a, b) => a.concurrency - b.concurrency));
  if (!byLabel.some(rs => rs.length > 1)) return;
  const levels = [...new Set(DATA.runs.filter(r => r.concurrency !== null).map(r => r.concurrency))].sort((a, b) => a - b);
  const logX = levels[levels.length - 1] / levels[0] >= 8;
  const color = i => 'hsl(' + HUES[i % HUES.length] + ',70%,42%)';
  const o = (yLabel) => ({xLabel: 'max concurrency', yLabel, logX, xTicks: levels});
  const pct = (key, title) => {
    const series = [];
    byLabel.forEach((rs, i) => {
      for (const [p, dash] of [['p50', false], ['p99', true]])
        series.push({name: (multiLabel ? labels[i] + ' ' : '') + title + ' ' + p, color: color(i), dash, marks: true,
                     points: rs.filter(r => r[key]).map(r => [r.concurrency, r[key][p]])});
    });
    return chart(title + ' vs concurrency', series, o(title + ' (ms)'));
  };
  const tput = (key, title) => chart(title + ' vs concurrency', byLabel.map((rs, i) => ({
    name: labels[i], color: color(i), marks: true, points: rs.map(r => [r.concurrency, r[key]])})), o(title));
  document.getElementById('sweep').innerHTML = '<h2>Against concurrency</h2><div class="grid">' +
    pct('ttft', 'TTFT') + pct('tpot', 'TPOT') + tput('output_tokens_per_s', 'output tokens/s') +
    tput('requests_per_s', 'requests/s') + '</div>';
}

// Multi-turn runs: TTFT and the server's prefix-cache hit rate against the turn, and a table.
function renderTurns() {
  const runs = DATA.runs.filter(r => r.turns && r.turns.length);
  if (!runs.length) return;
  const per = (f) => runs.map(r => ({name: runName(r), color: runColor(r), marks: true,
    points: r.turns.filter(t => f(t) !== null && f(t) !== undefined).map(t => [t.turn, f(t)])}));
  const xTicks = [...new Set(runs.flatMap(r => r.turns.map(t => t.turn)))].sort((a, b) => a - b);
  let h = '<h2>Per turn</h2><div class="grid">' +
    chart('TTFT p50 per turn', per(t => t.ttft_ms && t.ttft_ms.p50), {xLabel: 'turn', yLabel: 'TTFT p50 (ms)', xTicks}) +
    chart('prefix-cache hit rate per turn', per(t => t.prefix_hit_rate), {xLabel: 'turn', yLabel: 'cached / prompt tokens', xTicks, y01: true}) +
    '</div>';
  const cols = ['turn', 'ok', 'failed', 'TTFT mean', 'TTFT p50', 'TTFT p99', 'prompt tok', 'cached tok', 'hit rate'];
  for (const r of runs) {
    h += '<p class="sub">' + esc(runName(r)) + '</p><table><tr>' + cols.map(c => '<th>' + c + '</th>').join('') + '</tr>';
    for (const t of r.turns) {
      const rate = t.prefix_hit_rate === null ? '-' : (100 * t.prefix_hit_rate).toFixed(1) + '%';
      const cells = [t.turn, t.completed, t.failed, fmt(t.ttft_ms && t.ttft_ms.mean), fmt(t.ttft_ms && t.ttft_ms.p50),
        fmt(t.ttft_ms && t.ttft_ms.p99), fmt(t.prompt_tokens_mean), fmt(t.cached_tokens_mean), rate];
      h += '<tr>' + cells.map(c => '<td>' + esc(c) + '</td>').join('') + '</tr>';
    }
    h += '</table>';
  }
  document.getElementById('turns').innerHTML = h;
}

document.getElementById('sub').textContent = 'written ' + DATA.date + ' · ' + DATA.runs.length + ' run' +
  (DATA.runs.length === 1 ? '' : 's') + (multiLabel ? ' · ' + labels.join(' vs ') : '');
document.getElementById('logx').onchange = renderCdfs;
renderTable(); renderCdfs(); renderSweep(); renderTurns();
</script></body></html>
)HTML";

std::vector<double> sorted_column(const json& run, const char* key) {
  std::vector<double> values;
  if (!run.contains("requests") || !run["requests"].contains(key)) return values;
  for (const json& v : run["requests"][key]) {
    if (v.is_number()) values.push_back(v.get<double>());
  }
  std::sort(values.begin(), values.end());
  return values;
}

std::string workload_text(const json& s) {
  if (s.contains("turns") && s["turns"].is_number()) {
    return "multiturn, " + s.value("conversations", json(0)).dump() + " conversations x " +
           s["turns"].dump() + " turns, user " + std::to_string(s.value("input_len", 0)) +
           " / reply " + std::to_string(s.value("output_len", 0)) + " tokens, system " +
           s.value("system_len", json(0)).dump() + " tokens, " + s.value("url", std::string("?"));
  }
  std::string text =
      s.value("dataset", std::string("?")) + ", " + std::to_string(s.value("num_prompts", 0)) +
      " prompts, in " + std::to_string(s.value("input_len", 0)) + " / out " +
      std::to_string(s.value("output_len", 0)) + " tokens, " +
      s.value("endpoint", std::string("?")) + ", " + s.value("url", std::string("?"));
  if (s.contains("prefix_groups") && s["prefix_groups"].is_number()) {
    text += ", " + s["prefix_groups"].dump() + " groups sharing a " +
            s.value("prefix_len", json(0)).dump() + "-token prefix";
  }
  if (s.contains("request_rate") && s["request_rate"].is_number()) {
    text += ", " + s["request_rate"].dump() + " req/s";
  }
  return text;
}

std::string now_text() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", &tm);
  return buf;
}

}  // namespace

json html_chart_data(std::span<const json> runs) {
  json out = json::array();
  for (const json& run : runs) {
    const json& s = run.at("settings");
    const auto figure = [&](const char* key) { return run.contains(key) ? run[key] : json(); };
    out.push_back({{"label", run.value("label", std::string("?"))},
                   {"concurrency", s.contains("max_concurrency") ? s["max_concurrency"] : json()},
                   {"workload", workload_text(s)},
                   {"completed", figure("completed")},
                   {"failed", figure("failed")},
                   {"requests_per_s", figure("requests_per_s")},
                   {"output_tokens_per_s", figure("output_tokens_per_s")},
                   {"total_tokens_per_s", figure("total_tokens_per_s")},
                   {"goodput_rps", figure("goodput_rps")},
                   {"ttft", figure("ttft_ms")},
                   {"tpot", figure("tpot_ms")},
                   {"itl", figure("itl_ms")},
                   {"e2e", figure("e2e_ms")},
                   {"turns", figure("turns")},
                   {"cdf",
                    {{"ttft", sorted_column(run, "ttft_ms")},
                     {"tpot", sorted_column(run, "tpot_ms")},
                     {"e2e", sorted_column(run, "e2e_ms")}}}});
  }
  return out;
}

std::string html_report(std::span<const json> runs) {
  std::string data = json{{"date", now_text()}, {"runs", html_chart_data(runs)}}.dump(
      -1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
  // Inside <script>, "</" could close the element: JSON allows "<\/" for it.
  for (size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3)) {
    data.replace(at, 2, "<\\/");
  }
  std::string page(kPage);
  page.replace(page.find("__DATA__"), 8, data);
  return page;
}

}  // namespace tokamak::cli
