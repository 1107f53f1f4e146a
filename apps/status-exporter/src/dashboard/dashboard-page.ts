/**
 * The exporter's dashboard (`GET /`; README "Status"): one self-contained HTML page, no CDN, inline
 * CSS and JS. It fetches `/status` every 2 s and renders one table per node: resource, category,
 * adapter, models, state, an in_flight / max_concurrency bar, queued; then the clients (docs/architecture.md,
 * "Clients, priority and fair share"): id, band, weight, `max_in_flight`, `max_queued` ("none" when
 * unset), in_flight and queued over every pool, and its token budget (README "Token budgets"): per
 * window (`data-window="minute"|"day"`) a bar of used + reserved of the limit (used solid, reserved
 * lighter, red when nothing remains) with `<used> + <reserved> / <limit>`, then what remains and when
 * the window resets ("none" without a budget). Unknown counts (`null`) show as "—". Resource rows
 * carry `data-resource="<id>"`, client rows `data-client="<id>"`, cells `data-field="<name>"`, for
 * tests. The header links to the queue board (`queues`). All text is set with `textContent` (config
 * values are never parsed as HTML).
 */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>iop-edge status</title>
<style>
  :root { --bg:#f6f7f9; --card:#fff; --ink:#1d2330; --muted:#677085; --line:#e3e6ec; --ok:#1f9d55; --warn:#c77c02; --bad:#d64545; --off:#8a93a6; --bar:#3b6fd8; --full:#d64545; }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background:var(--bg); color:var(--ink); }
  header { display:flex; align-items:baseline; gap:16px; padding:16px 24px; background:var(--card); border-bottom:1px solid var(--line); }
  header h1 { font-size:18px; margin:0; }
  header .meta { color:var(--muted); font-size:12px; }
  #error { color:var(--bad); font-weight:600; }
  main { padding:16px 24px; display:grid; gap:16px; }
  section { background:var(--card); border:1px solid var(--line); border-radius:8px; overflow:hidden; }
  section h2 { font-size:15px; margin:0; padding:10px 14px; border-bottom:1px solid var(--line); display:flex; gap:10px; align-items:center; }
  .source { font-size:11px; font-weight:500; color:var(--muted); border:1px solid var(--line); border-radius:10px; padding:1px 8px; }
  table { width:100%; border-collapse:collapse; }
  th, td { text-align:left; padding:8px 14px; border-bottom:1px solid var(--line); vertical-align:middle; }
  th { font-size:11px; text-transform:uppercase; letter-spacing:.04em; color:var(--muted); font-weight:600; }
  tr:last-child td { border-bottom:none; }
  .models { color:var(--muted); font-size:12px; }
  .state { font-weight:600; font-size:12px; }
  .state.ready { color:var(--ok); } .state.unhealthy { color:var(--warn); } .state.invalid { color:var(--bad); } .state.disabled { color:var(--off); }
  .bar { position:relative; width:180px; height:16px; background:#edf0f5; border-radius:4px; overflow:hidden; }
  .bar > span { position:absolute; inset:0 auto 0 0; background:var(--bar); }
  .bar.full > span { background:var(--full); }
  .bar > span.reserved { background:#9db7ec; }
  .bar.full > span.reserved { background:#eba3a3; }
  .budget { display:flex; align-items:center; gap:8px; margin:2px 0; }
  .budget .window { width:52px; color:var(--muted); font-size:12px; white-space:nowrap; }
  .budget .bar { width:150px; flex:none; }
  tr[data-client] td[data-field="client"] { white-space:nowrap; }
  .budget .left { color:var(--muted); font-size:12px; white-space:nowrap; }
  .bar > em { position:absolute; inset:0; font-style:normal; font-size:11px; line-height:16px; text-align:center; color:var(--ink); }
  .na { color:var(--off); }
  .num { font-variant-numeric: tabular-nums; }
  header a { margin-left:auto; font-size:13px; color:var(--bar); }
</style>
</head>
<body>
<header><h1>iop-edge resources</h1><span class="meta" id="meta">loading…</span><span id="error"></span><a href="queues">queue board</a></header>
<main><div id="nodes" style="display:grid;gap:16px"></div><div id="clients"></div></main>
<script>
(function () {
  var nodesEl = document.getElementById('nodes');
  var metaEl = document.getElementById('meta');
  var errorEl = document.getElementById('error');
  var clientsEl = document.getElementById('clients');
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function cell(row, field, child) {
    var td = el('td');
    td.setAttribute('data-field', field);
    if (typeof child === 'string') td.textContent = child; else td.appendChild(child);
    row.appendChild(td);
    return td;
  }
  function bar(r) {
    if (r.in_flight === null || r.max_concurrency === null) {
      var na = el('span', 'na', r.in_flight === null ? '—' : String(r.in_flight));
      return na;
    }
    var b = el('div', 'bar' + (r.in_flight >= r.max_concurrency ? ' full' : ''));
    var fill = el('span');
    fill.style.width = Math.min(100, (100 * r.in_flight) / Math.max(1, r.max_concurrency)) + '%';
    b.appendChild(fill);
    b.appendChild(el('em', '', r.in_flight + ' / ' + r.max_concurrency));
    return b;
  }
  function render(s) {
    nodesEl.textContent = '';
    s.nodes.forEach(function (node) {
      var section = el('section');
      section.setAttribute('data-node', node.node_id);
      var h = el('h2', '', node.node_id);
      h.appendChild(el('span', 'source', node.source === 'catalog' ? 'catalog' : 'adapters (no catalog)'));
      section.appendChild(h);
      var table = el('table');
      var head = el('tr');
      ['resource', 'category', 'adapter', 'state', 'in flight / max', 'queued'].forEach(function (t) { head.appendChild(el('th', '', t)); });
      table.appendChild(head);
      node.resources.forEach(function (r) {
        var row = el('tr');
        row.setAttribute('data-resource', r.id);
        var name = el('div');
        name.appendChild(el('div', '', r.id));
        name.appendChild(el('div', 'models', r.models.join(', ')));
        cell(row, 'resource', name);
        cell(row, 'category', r.category + (r.pool ? ' · pool' : ''));
        cell(row, 'adapter', r.adapter);
        cell(row, 'state', el('span', 'state ' + r.state, r.state));
        cell(row, 'in_flight', bar(r));
        cell(row, 'queued', el('span', r.queued === null ? 'na' : 'num', r.queued === null ? '—' : String(r.queued)));
        table.appendChild(row);
      });
      section.appendChild(table);
      nodesEl.appendChild(section);
    });
    renderClients(s.clients || []);
    metaEl.textContent = 'updated ' + new Date(s.generated_at).toLocaleTimeString() + (s.config_hash ? ' · config ' + s.config_hash.slice(0, 12) : '');
  }
  function count(n) { return el('span', n === null ? 'na' : 'num', n === null ? '—' : String(n)); }
  function duration(ms) {
    if (ms < 1000) return ms + 'ms';
    var s = Math.ceil(ms / 1000);
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + (s % 60) + 's';
    return Math.floor(s / 3600) + 'h' + Math.floor((s % 3600) / 60) + 'm';
  }
  function budgets(list) {
    if (list === undefined) return el('span', 'na', 'none');
    if (list === null) return el('span', 'na', '—');
    var box = el('div');
    list.forEach(function (w) {
      var line = el('div', 'budget');
      line.setAttribute('data-window', w.window);
      line.appendChild(el('span', 'window', w.window === 'minute' ? 'per min' : 'per day'));
      var b = el('div', 'bar' + (w.remaining === 0 ? ' full' : ''));
      var pct = function (n) { return Math.min(100, (100 * n) / Math.max(1, w.limit)); };
      var used = el('span');
      used.style.width = pct(w.used) + '%';
      var reserved = el('span', 'reserved');
      reserved.style.left = pct(w.used) + '%';
      reserved.style.width = Math.max(0, Math.min(100 - pct(w.used), pct(w.reserved))) + '%';
      b.appendChild(used);
      b.appendChild(reserved);
      b.appendChild(el('em', '', w.used + ' + ' + w.reserved + ' / ' + w.limit));
      line.appendChild(b);
      var left = el('span', 'left', w.remaining + ' left · ');
      left.setAttribute('data-part', 'left');
      left.appendChild(el('span', '', w.reset_ms === 0 ? 'nothing charged' : 'resets in ' + duration(w.reset_ms)));
      line.appendChild(left);
      box.appendChild(line);
    });
    return box;
  }
  function renderClients(clients) {
    clientsEl.textContent = '';
    if (clients.length === 0) return;
    var section = el('section');
    section.appendChild(el('h2', '', 'clients'));
    var table = el('table');
    var head = el('tr');
    ['client', 'band', 'weight', 'max in flight', 'max queued', 'in flight', 'queued', 'token budget'].forEach(function (t) { head.appendChild(el('th', '', t)); });
    table.appendChild(head);
    clients.forEach(function (c) {
      var row = el('tr');
      row.setAttribute('data-client', c.id);
      cell(row, 'client', c.id);
      cell(row, 'band', el('span', 'num', String(c.band)));
      cell(row, 'weight', el('span', 'num', String(c.weight)));
      cell(row, 'max_in_flight', c.max_in_flight === null ? el('span', 'na', 'none') : count(c.max_in_flight));
      cell(row, 'max_queued', c.max_queued === null ? el('span', 'na', 'none') : count(c.max_queued));
      cell(row, 'in_flight', count(c.in_flight));
      cell(row, 'queued', count(c.queued));
      cell(row, 'token_budgets', budgets(c.token_budgets));
      table.appendChild(row);
    });
    section.appendChild(table);
    clientsEl.appendChild(section);
  }
  function refresh() {
    fetch('status', { cache: 'no-store' })
      .then(function (res) { if (!res.ok) throw new Error('HTTP ' + res.status); return res.json(); })
      .then(function (s) { errorEl.textContent = ''; render(s); })
      .catch(function (err) { errorEl.textContent = 'cannot load /status: ' + err.message; })
      .then(function () { setTimeout(refresh, 2000); });
  }
  refresh();
})();
</script>
</body>
</html>
`;
