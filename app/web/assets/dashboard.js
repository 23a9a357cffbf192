// The operations dashboard: polls /api/dashboard with the admin token,
// which the server computes once a second for every viewer, and shows it.
// Every value is set as text.
"use strict";

const $ = (id) => document.getElementById(id);

const guaranteeNames = {
  durableAcrossConsumerCrash: "durable across a consumer crash",
  acknowledged: "acknowledged",
  replayable: "replayable",
  competingConsumers: "competing consumers across processes",
  retainsWithoutConsumer: "keeps messages while no consumer runs",
  countsDeliveries: "counts deliveries (SECKILL_MAX_DELIVERIES applies)",
};

function figures(dl, pairs) {
  const rows = [];
  for (const [name, value] of pairs) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value;
    dd.dataset.figure = name;
    const pair = document.createElement("div");
    pair.append(dt, dd);
    rows.push(pair);
  }
  dl.replaceChildren(...rows);
}

function num(v, digits) {
  if (v === null || v === undefined) return "unknown";
  return Number(v).toFixed(digits === undefined ? 0 : digits);
}

function render(d) {
  $("backend").textContent = d.backend;
  $("iteration").textContent = d.iteration || "";
  const items = [];
  for (const [key, label] of Object.entries(guaranteeNames)) {
    if (!d.guarantees) break;
    const li = document.createElement("li");
    li.textContent = (d.guarantees[key] ? "✔ " : "✘ ") + label;
    li.className = d.guarantees[key] ? "yes" : "no";
    items.push(li);
  }
  $("guarantees").replaceChildren(...items);
  const codes = Object.keys(d.perSecond).sort();
  figures($("per-second"), codes.length ? codes.map((c) => [c, num(d.perSecond[c], 1)]) : [["requests", "0"]]);
  figures($("latency"), ["p50", "p90", "p99"].map((q) => [q, d.latencyMs[q] === undefined ? "—" : num(d.latencyMs[q], 2) + " ms"]));
  const q = d.queue || {};
  figures($("queue"), [
    ["depth", num(q.depth)],
    ["pending", num(q.pending)],
    ["lag", q.lagMs === null || q.lagMs === undefined ? "unknown" : num(q.lagMs) + " ms"],
    ["oldest pending", q.oldestPendingMs === null || q.oldestPendingMs === undefined ? "unknown" : num(q.oldestPendingMs) + " ms"],
    ["dead letters open", q.deadLettersOpen === null || q.deadLettersOpen === undefined ? "unknown" : num(q.deadLettersOpen)],
    ["dead letters ever (the backend's dead stream)", q.deadLetters === null || q.deadLetters === undefined ? "none kept" : num(q.deadLetters)],
    ["persisted per second", num(d.persistedPerSecond, 1)],
  ]);
  const rl = d.relay;
  $("relay-title").hidden = $("relay").hidden = !rl;
  if (rl) {
    figures($("relay"), [
      ["forwarded per second", num(rl.forwardedPerSecond, 1)],
      ["forwarded", num(rl.forwarded)],
      ["failed forwards", num(rl.failures)],
      ["outbox: unread", num(rl.outboxDepth)],
      ["outbox: in a relay's hands", num(rl.outboxPending)],
      ["outbox lag", rl.lagMs === null || rl.lagMs === undefined ? "unknown" : num(rl.lagMs) + " ms"],
      ["last failure", rl.lastError || "none"],
    ]);
  }
  figures($("totals"), Object.keys(d.totals).sort().map((k) => [k, num(d.totals[k])]));
  const o = d.orders || {};
  figures($("orders"), ["unpaid", "paid", "expired", "cancelled by shopper", "discarded by operator", "cancelled, no reason kept", "refunded"]
    .filter((k) => k in o).map((k) => [k, num(o[k])]));
  const r = d.redis;
  figures($("redis"), r ? [
    ["may evict keys", r.evicting && r.evicting.length ? r.evicting.join(", ") : "no (noeviction)"],
    ["evicted keys", num(r.evictedKeys)],
  ] : [["eviction", "not told (embedded Redis)"]]);
  renderRooms(d.rooms || []);
  $("updated").textContent = "updated " + new Date(d.at).toLocaleTimeString();
  $("warnings").replaceChildren(...(d.warnings || []).map((w) => {
    const li = document.createElement("li");
    li.textContent = w;
    return li;
  }));
}

// renderRooms shows each waiting room this instance admits: its size, how
// fast it admits against its rate, its no-shows, when it sold out.
function renderRooms(rooms) {
  $("rooms-section").hidden = rooms.length === 0;
  $("room-table").querySelector("tbody").replaceChildren(...rooms.map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.voucher = String(r.voucher);
    for (const v of [r.voucher, r.title, num(r.waiting), num(r.admitted), num(r.admittedPerSecond, 1) + " (" + r.rate + ")",
      num(r.noShows), r.soldOutAt ? new Date(r.soldOutAt).toLocaleTimeString() : "—"]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.append(td);
    }
    return tr;
  }));
}

// The charts are drawn on the server, once a second for every viewer. An
// <img> cannot send the token, so each is fetched and shown from a blob.
async function drawCharts(at, token) {
  for (const name of ["answers", "persisted", "depth"]) {
    const resp = await fetch("/api/dashboard/charts/" + name + ".svg?at=" + encodeURIComponent(at),
      { headers: { "Authorization": "Bearer " + token } });
    if (!resp.ok) continue;
    const img = $("chart-" + name);
    const old = img.src;
    img.src = URL.createObjectURL(await resp.blob());
    img.hidden = false; // shown once drawn: no alt text in an empty frame before the token
    if (old.startsWith("blob:")) URL.revokeObjectURL(old);
  }
}

const voucherStates = { upcoming: "upcoming", on_sale: "on sale", paused: "paused", ended: "ended" };
let vouchersAt = 0;

// loadVouchers fills the operator's voucher table: the newest 50, every
// five seconds (two database queries each time, not on every second's
// refresh).
async function loadVouchers(token) {
  if (Date.now() - vouchersAt < 5000) return;
  vouchersAt = Date.now();
  const resp = await fetch("/api/admin/vouchers?limit=50", { headers: { "Authorization": "Bearer " + token } });
  if (!resp.ok) return;
  const d = await resp.json();
  const rows = d.vouchers.map((v) => {
    const tr = document.createElement("tr");
    tr.dataset.voucher = String(v.id);
    const cells = [v.id, v.title, voucherStates[v.state] || v.state, v.databaseStock, v.orders.unpaid, v.orders.paid,
      v.orders.cancelled, v.orders.refunded, v.endTime.replace("T", " ").slice(0, 16)];
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = String(c); // titles are text, never markup
      tr.append(td);
    }
    tr.append(steerCell(v));
    return tr;
  });
  $("voucher-table").querySelector("tbody").replaceChildren(...rows);
  $("voucher-table").dataset.loaded = "1";
  await loadConsumers(token);
  await loadPayments(token);
  await loadActions(token);
}

// steerCell holds a voucher's buttons while its sale has not ended: pause
// or resume, end now, and units added or taken (the number beside them).
function steerCell(v) {
  const td = document.createElement("td");
  if (v.state === "ended") return td;
  const button = (label, act) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.className = "steer " + act;
    b.addEventListener("click", () => steer(v.id, act, td));
    td.append(b);
  };
  button(v.paused ? "Resume" : "Pause", v.paused ? "resume" : "pause");
  button("End now", "end");
  const units = document.createElement("input");
  units.type = "number";
  units.className = "steer-units";
  units.setAttribute("aria-label", "units to add (negative: to take) to voucher " + v.id);
  units.value = "10";
  td.append(units);
  button("Stock ±", "stock");
  return td;
}

// steer carries out a button's action, as the operator the page names.
async function steer(id, act, td) {
  const path = "/api/admin/vouchers/" + id + "/" + act;
  const body = act === "stock" ? { delta: Number(td.querySelector(".steer-units").value || 0) } : {};
  await admin("POST", path, body, { "X-Seckill-Operator": "dashboard" });
  vouchersAt = 0; // the table shows the new state at once
  await loadVouchers($("admin-token").value.trim());
}

// loadConsumers shows the operator's hold on the consumers (none under a
// backend with no queue: the section says so).
async function loadConsumers(token) {
  const resp = await fetch("/api/admin/consumers", { headers: { "Authorization": "Bearer " + token } });
  if (!resp.ok) return;
  const c = await resp.json();
  $("consumers-state").textContent = (c.paused ? "paused" : "running") +
    (c.perSecond > 0 ? ", at most " + c.perSecond + " orders a second in all" : ", no cap");
  $("consumers-state").dataset.paused = String(c.paused);
}

// steerConsumers pauses, resumes or caps every instance's consumers.
async function steerConsumers(method, action, body) {
  await admin(method, "/api/admin/consumers/" + action, body, { "X-Seckill-Operator": "dashboard" });
  const token = $("admin-token").value.trim();
  await loadConsumers(token);
  await loadActions(token);
}

// loadPayments shows the reconciliation report: counts and mismatches.
async function loadPayments(token) {
  const resp = await fetch("/api/admin/payments/reconciliation", { headers: { "Authorization": "Bearer " + token } });
  if (!resp.ok) return;
  const r = await resp.json();
  $("payments-summary").textContent = r.payments + " payments: " + r.paid + " paid, " + r.refunded + " refunded, " +
    r.pending + " pending, " + r.failed + " failed; " + r.mismatches.length + " mismatches";
  $("payments-summary").dataset.mismatches = String(r.mismatches.length);
  const rows = r.mismatches.map((m) => {
    const tr = document.createElement("tr");
    for (const c of [m.kind, m.paymentId, m.orderId, m.orderStatus, m.providerSays || "—", m.taken, m.refunded]) {
      const td = document.createElement("td");
      td.textContent = String(c);
      tr.append(td);
    }
    return tr;
  });
  $("mismatch-table").querySelector("tbody").replaceChildren(...rows);
}

// loadActions fills the record of operators' actions: the newest 20.
async function loadActions(token) {
  const resp = await fetch("/api/admin/actions?limit=20", { headers: { "Authorization": "Bearer " + token } });
  if (!resp.ok) return;
  const d = await resp.json();
  const rows = d.items.map((a) => {
    const tr = document.createElement("tr");
    const cells = [a.at.replace("T", " ").slice(0, 19), a.operator || "—", a.action, a.voucherId === null ? "all" : a.voucherId,
      JSON.stringify(a.after || {}), a.note];
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = String(c); // operators' notes are text, never markup
      tr.append(td);
    }
    return tr;
  });
  $("action-table").querySelector("tbody").replaceChildren(...rows);
  $("action-table").dataset.loaded = "1";
}

async function refresh() {
  const token = $("admin-token").value.trim();
  if (!token) {
    $("dashboard-message").textContent = "Enter the admin token to see the live figures.";
    return;
  }
  try {
    const resp = await fetch("/api/dashboard", { headers: { "Authorization": "Bearer " + token } });
    if (resp.status === 401) {
      $("dashboard-message").textContent = "The admin token is not accepted.";
      return;
    }
    if (!resp.ok) throw new Error("status " + resp.status);
    const d = await resp.json();
    render(d);
    $("dashboard-message").textContent = "";
    await drawCharts(d.at, token);
    await loadVouchers(token);
  } catch (_) {
    $("dashboard-message").textContent = "The server does not answer, retrying…";
  }
}

// The admin token is kept in sessionStorage, like the shopper's token on
// the storefront: never in a URL, gone with the tab.
const adminKey = "seckill.admin";

async function admin(method, path, body, extraHeaders) {
  const token = $("admin-token").value.trim();
  sessionStorage.setItem(adminKey, token);
  const headers = { "Authorization": "Bearer " + token, ...(extraHeaders || {}) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = {};
  try { data = await resp.json(); } catch (_) { data = {}; }
  $("admin-result").textContent = resp.status + "\n" + JSON.stringify(data, null, 2);
  return { status: resp.status, data };
}

function createVoucher() {
  const now = Date.now();
  const opens = now + 1000 * Number($("new-opens").value || 0);
  const price = Number($("new-price").value || 0);
  return admin("POST", "/api/admin/vouchers", {
    title: $("new-title").value,
    stock: Number($("new-stock").value || 0),
    payValue: price,
    actualValue: price * 2,
    beginTime: new Date(opens).toISOString(),
    endTime: new Date(opens + 60000 * Number($("new-lasts").value || 0)).toISOString(),
  });
}

function voucherPath(action) {
  const id = $("audit-id").value.trim();
  return "/api/admin/vouchers/" + encodeURIComponent(id) + "/" + action;
}

// The dead letters: the register's list, a page at a time, filtered on
// the server; a row shows its letter; re-drive and discard first count
// what matches (a dry run) and act only once that count is confirmed.
const dead = { cursor: null, pending: null };

function deadFilter() {
  const f = {};
  for (const [key, id] of [["reason", "dead-reason"], ["voucher", "dead-voucher"], ["since", "dead-since"], ["until", "dead-until"]]) {
    const v = $(id).value.trim();
    if (v) f[key] = v;
  }
  return f;
}

async function loadDead(more) {
  const q = new URLSearchParams(deadFilter());
  q.set("limit", "50");
  if (more && dead.cursor) q.set("cursor", dead.cursor);
  const token = $("admin-token").value.trim();
  const resp = await fetch("/api/admin/deadletters?" + q, { headers: { "Authorization": "Bearer " + token } });
  const d = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    $("dead-open").textContent = (d.error && d.error.message) || "status " + resp.status;
    return;
  }
  const rows = d.items.map((l) => {
    const tr = document.createElement("tr");
    tr.dataset.letter = l.id;
    for (const c of [l.id, l.reason, l.orderId || "—", l.userId || "—", l.voucherId || "—", l.deliveries, l.redriven,
      l.firstFailedAt.replace("T", " ").slice(0, 19), l.backend, l.error]) {
      const td = document.createElement("td");
      td.textContent = String(c);
      tr.append(td);
    }
    tr.addEventListener("click", () => admin("GET", "/api/admin/deadletters/" + encodeURIComponent(l.id)).then((r) => {
      $("dead-detail").textContent = JSON.stringify(r.data, null, 2);
    }));
    return tr;
  });
  const body = $("dead-table").querySelector("tbody");
  if (more) body.append(...rows); else body.replaceChildren(...rows);
  dead.cursor = d.nextCursor;
  $("dead-more").hidden = !d.nextCursor;
  $("dead-open").textContent = d.open + " open match the filter";
  $("dead-table").dataset.loaded = "1";
}

async function askDead(action) {
  const body = Object.assign(deadFilter(), { dryRun: true });
  if (action === "discard" && Object.keys(body).length === 1) body.all = true;
  const r = await admin("POST", "/api/admin/deadletters/" + action, body);
  if (r.status !== 200) return;
  dead.pending = action;
  const verb = action === "redrive" ? "Re-drive" : "Discard";
  $("dead-confirm-text").textContent = verb + " " + r.data.matched + " open letter" + (r.data.matched === 1 ? "" : "s") +
    (action === "discard" ? "? Their orders are cancelled and their units go back on sale." : "? Each order goes through persistence again.");
  $("dead-confirm").hidden = false;
}

async function confirmDead() {
  const action = dead.pending;
  $("dead-confirm").hidden = true;
  dead.pending = null;
  const body = deadFilter();
  if (action === "discard") {
    body.note = $("dead-note").value;
    if (Object.keys(body).length === 1) body.all = true;
  }
  // A call goes on for a few seconds and says if there is more.
  let r;
  do {
    r = await admin("POST", "/api/admin/deadletters/" + action, body);
    $("dead-detail").textContent = r.status + "\n" + JSON.stringify(r.data, null, 2);
  } while (r.status === 200 && r.data.more);
  await loadDead(false);
}

document.addEventListener("DOMContentLoaded", () => {
  $("dead-show").addEventListener("click", () => loadDead(false));
  $("dead-more").addEventListener("click", () => loadDead(true));
  $("dead-redrive").addEventListener("click", () => askDead("redrive"));
  $("dead-discard").addEventListener("click", () => askDead("discard"));
  $("dead-confirm-yes").addEventListener("click", confirmDead);
  $("dead-confirm-no").addEventListener("click", () => { $("dead-confirm").hidden = true; dead.pending = null; });
});

document.addEventListener("DOMContentLoaded", () => {
  $("admin-token").value = sessionStorage.getItem(adminKey) || "";
  $("admin-token").addEventListener("change", () => {
    sessionStorage.setItem(adminKey, $("admin-token").value.trim());
    refresh();
  });
  $("create-voucher").addEventListener("click", createVoucher);
  $("consumers-pause").addEventListener("click", () => steerConsumers("POST", "pause", {}));
  $("consumers-resume").addEventListener("click", () => steerConsumers("POST", "resume", {}));
  $("consumers-cap").addEventListener("click", () => steerConsumers("PUT", "rate", { perSecond: Number($("consumers-rate").value || 0) }));
  $("audit").addEventListener("click", () => admin("GET", voucherPath("audit")));
  $("reconcile").addEventListener("click", () => admin("POST", voucherPath("reconcile")));
  refresh();
  setInterval(refresh, 1000);
});
