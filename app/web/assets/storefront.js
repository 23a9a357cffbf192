// The storefront: lists the vouchers on sale or coming up, logs a shopper
// in by phone code, buys, and follows the order until it is persisted.
// Every value from the server is set as text (textContent), never as HTML.
"use strict";

// The shopper's token lives in sessionStorage: never in a URL, gone when
// the tab closes, readable only by scripts of this origin — and the
// Content-Security-Policy admits no script but this file.
const tokenKey = "seckill.token";
const userKey = "seckill.user";
const phoneKey = "seckill.phone";

const $ = (id) => document.getElementById(id);

async function api(method, path, body, auth, extra) {
  const headers = { ...(extra || {}) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const token = sessionStorage.getItem(tokenKey);
  if (auth && token) headers["Authorization"] = "Bearer " + token;
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = {};
  try { data = await resp.json(); } catch (_) { data = {}; }
  return { status: resp.status, data, retryAfter: resp.headers.get("Retry-After") };
}

const messages = {
  sold_out: "Sold out.",
  already_purchased: "You already have an order for this voucher.",
  not_started: "The sale has not started yet.",
  not_admitted: "Wait for your turn in the queue.",
  ended: "The sale has ended.",
  paused: "The sale is paused for a moment: try again shortly.",
  busy: "Busy, try again in a moment.",
  rate_limited: "Too many tries, wait a second.",
  unconfirmed: "Reserved, but not yet confirmed: following your order…",
  unauthorized: "Please log in again.",
  voucher_not_found: "This voucher is gone.",
  unavailable: "The shop is unavailable, try again.",
};

function errorCode(data) { return data && data.error ? data.error.code : ""; }
function money(cents) { return "¥" + (cents / 100).toFixed(2); }

function showAccount() {
  const user = sessionStorage.getItem(userKey);
  const in_ = Boolean(sessionStorage.getItem(tokenKey));
  $("login").hidden = in_;
  $("who").hidden = !in_;
  $("logout").hidden = !in_;
  $("who").textContent = in_ ? (sessionStorage.getItem(phoneKey) || "Shopper " + user) : "";
  for (const card of cards.values()) buyButton(card, shopNow());
}

// buyButton says what the card's button can do now: buy, or why not —
// on the shop's clock, so it opens when the sale does.
function buyButton(card, now) {
  const b = card.li.querySelector(".buy");
  const v = card.voucher;
  const o = card.order;
  const in_ = Boolean(sessionStorage.getItem(tokenKey));
  let label = "Buy", can = true;
  if (in_ && o && o.status === "paid") {
    label = "Bought ✓"; can = false;
  } else if (in_ && o && o.status === "created") {
    label = "Yours: pay below"; can = false;
  } else if (in_ && o && o.status === "held") {
    label = "Held for review"; can = false;
  } else if (now >= Date.parse(v.endTime)) {
    label = "Ended"; can = false;
  } else if (v.state === "paused") {
    label = "Paused"; can = false; // not sold out: it may sell again
  } else if (v.room) {
    [label, can] = roomButton(card, now, in_);
  } else if (now < Date.parse(v.beginTime)) {
    label = "Opens at " + clockTime(v.beginTime);
    can = false;
  } else if (v.stock <= 0) {
    label = "Sold out"; can = false;
  } else if (!in_) {
    label = "Log in to buy"; can = false;
  }
  b.textContent = label;
  b.disabled = !can || b.dataset.busy === "1";
}

function clockTime(t) { return new Date(Date.parse(t)).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }); }

// A room voucher is bought with the admission its waiting room gives in
// turn: the button joins the queue, then waits, then buys. card.room is
// the shopper's place as the server last said it.
function roomButton(card, now, in_) {
  const v = card.voucher;
  const state = card.room ? card.room.state : "not_joined";
  if (!in_) return ["Log in to join the queue", false];
  if (now < Date.parse(v.room.opensAt)) return ["Queue opens at " + clockTime(v.room.opensAt), false];
  if (state === "admitted" && card.room.admission) return ["Buy now", true];
  if (state === "admitted") return ["Your turn has passed", false];
  if (state === "waiting") return ["In the queue", false];
  if (state === "sold_out") return ["Sold out", false];
  return ["Join the queue", true];
}

// roomText says where the shopper stands: the countdown to the room's
// opening, the draw, their place with how many are ahead and the wait,
// their turn with the time left to buy, or sold out.
function roomText(card, now) {
  const v = card.voucher, r = card.room;
  const opens = Date.parse(v.room.opensAt), begin = Date.parse(v.beginTime);
  if (now < opens) return "Waiting room opens in " + duration(opens - now) + ". Join before the sale for a fair draw.";
  if (!sessionStorage.getItem(tokenKey)) return "Sold through a waiting room: who joins before the opening is placed by a draw, then first come.";
  const o = card.order;
  if (o && o.status !== "cancelled" && r && r.position) return "Let in at place #" + r.position + ": the order is yours.";
  if (!r || r.state === "not_joined") {
    return now < begin ? "Join the queue: places are drawn when the sale opens, in " + duration(begin - now) + "."
      : "Join the queue: you get the next place; " + v.room.admitPerSecond + " shoppers are let in each second.";
  }
  if (r.state === "waiting" && r.position === null) return "You're in the draw. Places are drawn when the sale opens, in " + duration(begin - now) + ".";
  if (r.state === "waiting") {
    return "Your place: #" + r.position + " · " + r.ahead + " ahead · about " + duration((r.etaSeconds || 0) * 1000);
  }
  if (r.state === "admitted" && r.admissionExpiresAt) {
    const left = Date.parse(r.admissionExpiresAt) - now;
    return left > 0 ? "Your turn (place #" + r.position + "): buy within " + duration(left) + "." : "Your turn has passed.";
  }
  if (r.state === "admitted") return "You were let in (place #" + r.position + ").";
  return "Sold out while you waited (place #" + r.position + ").";
}

// seenCommitment is the draw's commitment as this browser first saw it
// (kept across reloads), and whether that was before the draw: the check
// of the published seed compares with it, never with the commitment the
// draw's own answer carries (a server that swapped the seed would send a
// matching one).
function seenCommitment(v) {
  const key = "seckill.commitment." + v.id;
  let seen = null;
  try { seen = JSON.parse(localStorage.getItem(key) || "null"); } catch (e) { seen = null; }
  if (!seen || !seen.commitment) {
    seen = { commitment: v.roomCommitment, before: shopNow() < Date.parse(v.beginTime), at: new Date(shopNow()).toISOString() };
    try { localStorage.setItem(key, JSON.stringify(seen)); } catch (e) { /* private mode: kept for this page only */ }
  }
  return seen;
}

function showRoom(card, now) {
  const box = card.li.querySelector(".room");
  box.hidden = !card.voucher.room;
  if (!card.voucher.room) return;
  card.seen = card.seen || seenCommitment(card.voucher);
  const c = card.li.querySelector(".commitment");
  c.textContent = "Draw commitment: " + card.seen.commitment + (card.seen.commitment !== card.voucher.roomCommitment
    ? " ✗ the shop now shows " + card.voucher.roomCommitment + ": the commitment changed" : "");
  const p = card.li.querySelector(".room-state");
  p.textContent = roomText(card, now);
  p.classList.toggle("turn", Boolean(card.room && card.room.admission));
  if (card.room && card.room.position !== null && now >= Date.parse(card.voucher.beginTime) && !card.draw) showDraw(card);
}

// pollRoom reads the shopper's place in the voucher's room.
async function pollRoom(id) {
  const card = cards.get(id);
  if (!card || !card.voucher.room || !sessionStorage.getItem(tokenKey)) return;
  const r = await api("GET", "/api/vouchers/" + id + "/room", undefined, true);
  if (r.status === 200) card.room = r.data;
  showRoom(card, shopNow());
  buyButton(card, shopNow());
}

// pollRooms follows, every second, the rooms the shopper waits in.
function pollRooms() {
  for (const [id, card] of cards) {
    const o = card.order;
    if (card.voucher.room && card.room && ["waiting", "admitted"].includes(card.room.state) && !(o && o.status !== "cancelled")) pollRoom(id);
  }
}

// joinRoom joins the voucher's queue; where the room asks a proof of
// work, this device solves the room's challenge first (pow.js), and a
// challenge that lapsed meanwhile is asked again once.
async function joinRoom(id) {
  const card = cards.get(id);
  let r;
  for (let attempt = 0; attempt < 2; attempt++) {
    if (!card.room || attempt > 0) await pollRoom(id);
    let body;
    if (card.room && card.room.pow) {
      answer(id, "Getting your ticket: a moment of work on this device…", true);
      const started = performance.now();
      const nonce = await solvePow(card.room.pow.challenge, card.room.pow.bits);
      card.powMs = Math.round(performance.now() - started);
      body = { pow: { challenge: card.room.pow.challenge, nonce } };
    }
    r = await api("POST", "/api/vouchers/" + id + "/room", body, true);
    if (errorCode(r.data) !== "pow_required") break;
  }
  if (r.status === 200) {
    card.room = r.data;
    answer(id, "", true);
  } else {
    if (errorCode(r.data) === "unauthorized") logOut();
    answer(id, (r.data.error && r.data.error.message) || "Could not join the queue.", false);
  }
  showRoom(card, shopNow());
}

// hex and the Web Crypto digests let the shopper check the draw here:
// the seed against the commitment shown before the opening, and their own
// key (HMAC-SHA256 of the seed over "<user id>:<salt>", the salt theirs
// alone: GET …/room) among the published.
const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");
const unhex = (s) => new Uint8Array(s.match(/../g).map((h) => parseInt(h, 16)));

async function showDraw(card) {
  card.draw = "loading";
  const r = await api("GET", "/api/vouchers/" + card.voucher.id + "/room/draw");
  if (r.status !== 200) { card.draw = undefined; return; }
  const d = r.data, user = sessionStorage.getItem(userKey) || "";
  const seen = card.seen || seenCommitment(card.voucher);
  let lines = ["Seed: " + d.seed, "Commitment this page saw " + (seen.before ? "before the draw" : "first, after the draw") + ": " + seen.commitment];
  const b = d.beacon;
  if (b) {
    lines.push(b.missed ? "Beacon round " + b.round + " (" + b.url + ") could not be read in time: the keys use the seed alone."
      : "Beacon round " + b.round + " (" + b.url + "/public/" + b.round + "): randomness " + b.randomness);
  }
  if (window.crypto && crypto.subtle) {
    const seed = unhex(d.seed);
    const sum = hex(await crypto.subtle.digest("SHA-256", seed));
    lines.push(sum !== seen.commitment ? "✗ SHA-256(seed) is " + sum + ", not the commitment this page saw."
      : seen.before ? "✓ SHA-256(seed) is the commitment this page saw before the draw."
        : "SHA-256(seed) is the commitment this page first saw after the draw: compare it with one kept from before.");
    let keySeed = seed, keyName = "seed";
    if (b && !b.missed) {
      keySeed = unhex(hex(await crypto.subtle.digest("SHA-256", new Uint8Array([...seed, ...unhex(b.randomness)]))));
      keyName = "SHA-256(seed + randomness)";
      lines.push(hex(keySeed) === b.mixedSeed ? "✓ The beacon's randomness is mixed into the seed." : "✗ SHA-256(seed + randomness) is not the mixed seed the shop names.");
    }
    const key = await crypto.subtle.importKey("raw", keySeed, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const salt = card.room && card.room.salt, over = salt ? user + ":" + salt : user;
    const mine = hex(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(over)));
    const rank = d.keys.indexOf(mine);
    lines.push("Your key, HMAC-SHA256(" + keyName + ", \"" + over + "\")" + (salt ? " (the salt is yours alone)" : "") + ": " + mine);
    lines.push(rank >= 0 ? "It is #" + (rank + 1) + " of the " + d.keys.length + " keys in ascending order: your place."
      : "You joined after the opening: your place is by arrival, behind the " + d.keys.length + " drawn.");
  } else {
    lines.push("Check it: SHA-256(seed) must be the commitment this page saw; your key is " + (d.keyedWith || "HMAC-SHA256(seed, userId)") + " with your user id (" + user + ")" +
      (card.room && card.room.salt ? " and your salt (" + card.room.salt + ")" : "") + ", and your place its rank among the " + d.keys.length + " keys.");
  }
  card.draw = d;
  card.li.querySelector(".draw-text").textContent = lines.join("\n");
  card.li.querySelector(".draw").hidden = false;
}

// challenges name the codes sent from this page, newest first: a code is
// judged only with the challenge its request was answered with, and a
// shopper may type the code of an earlier text.
let challenges = [];

// say shows a line under the login form: an error in red, news in the
// text's colour.
function say(text, isError) {
  $("login-message").textContent = text;
  $("login-message").classList.toggle("ok", !isError);
}

async function sendCode() {
  const phone = $("phone").value.trim();
  say("", true);
  const r = await api("POST", "/api/auth/code", { phone });
  if (r.status === 429) {
    // The server says how long: the phone's codes of the last 15 minutes
    // are spent, or this address asked too often.
    const wait = Math.max(1, parseInt(r.retryAfter, 10) || 60);
    say("Too many codes were asked for: use one you have, or ask for another in " + seconds(wait) + ".", true);
    holdButton($("send-code"), wait, "Send again in ");
    return;
  }
  if (r.status !== 200) {
    const why = errorCode(r.data) === "phone_not_allowed" ? "Codes are sent only to mobile numbers of the regions this shop serves."
      : { 400: "Check the phone number.", 503: "The code could not be sent: try again." }[r.status];
    say(why || "Could not send a code.", true);
    return;
  }
  challenges = [r.data.challenge, ...challenges].slice(0, 5);
  if (r.data.code) {
    // Dev codes are on (the embedded stand-ins): no SMS is sent.
    $("dev-code").hidden = false;
    $("dev-code").textContent = "Development code: " + r.data.code;
    $("code").value = r.data.code;
  } else {
    say("Code sent.", false);
  }
}

function seconds(n) { return n < 90 ? n + " s" : Math.ceil(n / 60) + " min"; }

// holdButton disables a button for the wait the server gave, counting it
// down on the button, then gives it its label back.
function holdButton(button, wait, prefix) {
  const label = button.dataset.label || button.textContent;
  button.dataset.label = label;
  clearInterval(Number(button.dataset.timer || 0));
  const until = Date.now() + wait * 1000;
  const show = () => {
    const left = Math.ceil((until - Date.now()) / 1000);
    if (left <= 0) {
      clearInterval(Number(button.dataset.timer));
      button.textContent = label;
      button.disabled = false;
      return;
    }
    button.textContent = prefix + seconds(left);
    button.disabled = true;
  };
  show();
  button.dataset.timer = String(setInterval(show, 1000));
}

async function logIn() {
  if (challenges.length === 0) {
    say("Ask for a code first.", true);
    return;
  }
  let r;
  for (const challenge of challenges) {
    // Newest first; a wrong code on one challenge goes on to the next.
    r = await api("POST", "/api/auth/login", { phone: $("phone").value.trim(), code: $("code").value.trim(), challenge });
    if (r.status !== 401) break;
  }
  if (r.status !== 200) {
    // 401: the server says whether guesses are left or a new code is needed.
    const why = r.status === 401 && r.data.error ? r.data.error.message
      : r.status === 429 ? "Too many attempts: try again in " + seconds(Math.max(1, parseInt(r.retryAfter, 10) || 60))
      : "Could not log in.";
    say(why.charAt(0).toUpperCase() + why.slice(1) + ".", true);
    return;
  }
  challenges = [];
  sessionStorage.setItem(tokenKey, r.data.token);
  sessionStorage.setItem(userKey, String(r.data.userId));
  const me = await api("GET", "/api/me", undefined, true);
  if (me.status === 200 && me.data.phone) sessionStorage.setItem(phoneKey, me.data.phoneDisplay || me.data.phone);
  $("dev-code").hidden = true;
  say("", true);
  showAccount();
  checkHeld();
  for (const [id, card] of cards) if (card.voucher.room) pollRoom(id);
}

function logOut() {
  sessionStorage.removeItem(tokenKey);
  sessionStorage.removeItem(userKey);
  sessionStorage.removeItem(phoneKey);
  $("my-orders-section").hidden = true;
  $("my-orders").replaceChildren();
  for (const card of cards.values()) {
    card.order = undefined;
    card.room = undefined;
    card.draw = undefined;
    card.li.querySelector(".draw").hidden = true;
    card.checked = false;
    card.li.querySelector(".answer").textContent = "";
    card.li.querySelector(".payby").hidden = true;
    card.li.querySelector(".order-actions").hidden = true;
  }
  showAccount();
}

const cards = new Map(); // voucher id -> {li, voucher}

// clockSkew is the shop's clock less this device's, from the listing's
// serverTime (taken at the request's midpoint): the countdowns run on the
// shop's clock, the one that opens the sale and ends the time to pay.
let clockSkew = 0;
function shopNow() { return Date.now() + clockSkew; }

function windowText(v, now) {
  const begin = Date.parse(v.beginTime), end = Date.parse(v.endTime);
  if (now < begin) return "Opens in " + duration(begin - now);
  if (now < end) return "On sale, ends in " + duration(end - now);
  return "Ended";
}

function duration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  if (h > 0) return h + "h " + m + "m";
  if (m > 0) return m + "m " + sec + "s";
  return sec + "s";
}

function render(vouchers) {
  const list = $("vouchers");
  const seen = new Set();
  for (const v of vouchers) {
    seen.add(v.id);
    let card = cards.get(v.id);
    if (!card) {
      const li = $("voucher-card").content.firstElementChild.cloneNode(true);
      li.dataset.voucher = String(v.id);
      li.querySelector(".buy").addEventListener("click", () => act(v.id));
      li.querySelector(".pay-order").addEventListener("click", () => payOrder(v.id));
      li.querySelector(".cancel-order").addEventListener("click", () => cancelOrder(v.id));
      card = { li };
      cards.set(v.id, card);
      list.appendChild(li);
    }
    if (v.room && !card.voucher && sessionStorage.getItem(tokenKey)) setTimeout(() => pollRoom(v.id), 0);
    card.voucher = v;
    card.li.querySelector(".title").textContent = v.title;
    card.li.querySelector(".pay").textContent = money(v.payValue);
    card.li.querySelector(".actual").textContent = money(v.actualValue);
    card.li.querySelector(".stock").textContent = v.state === "paused" ? "Paused (" + v.stock + " left)" : v.stock > 0 ? v.stock + " left" : "Sold out";
  }
  for (const [id, card] of cards) {
    if (!seen.has(id)) { card.li.remove(); cards.delete(id); }
  }
  tick();
  showAccount();
  if (sessionStorage.getItem(tokenKey)) {
    // A shopper back from the pay page, or after a reload: their orders.
    if ([...cards.values()].some((card) => !card.checked)) checkHeld();
  }
}

function tick() {
  const now = shopNow();
  for (const card of cards.values()) {
    card.li.querySelector(".window").textContent = windowText(card.voucher, now);
    showRoom(card, now);
    buyButton(card, now);
    const o = card.order;
    if (o && o.status === "created" && o.payBy) {
      const left = Date.parse(o.payBy) - now;
      card.li.querySelector(".payby").textContent = left > 0 ? "Pay within " + duration(left) : "The time to pay has passed.";
      if (left < -1500 && !card.rechecking) {
        // The server cancels it within a second or two: show what it did.
        card.rechecking = true;
        showOrder(card.voucher.id, o.orderId).finally(() => { card.rechecking = false; loadMyOrders(); });
      }
    }
  }
}

const orderWords = {
  created: "Yours: pay before the time runs out", paid: "Paid ✓",
  refunded: "Refunded: paid after it was cancelled, the money goes back",
  held: "Held for review: the shop is confirming your order; nothing to pay yet",
};

const cancelWords = {
  expired: "Cancelled: not paid in time", shopper: "Cancelled by you",
  discarded: "Cancelled by the shop: it could not be confirmed, nothing was charged",
};

// shortRef is what a shopper reads out to support: the order id's last
// six digits (My orders shows the same).
function shortRef(orderId) { return String(orderId).slice(-6); }

// showOrder reads the shopper's order and shows where it is: unpaid with
// the time left and its Pay and Cancel buttons, paid, or cancelled.
async function showOrder(id, orderId) {
  const card = cards.get(id);
  if (!card) return;
  const r = await api("GET", "/api/orders/" + orderId, undefined, true);
  if (r.status !== 200) return;
  card.order = r.data;
  const o = r.data;
  const unpaid = o.status === "created";
  if (o.status === "cancelled") {
    answer(id, (cancelWords[o.cancelReason] || "Cancelled") + " · ref " + shortRef(o.orderId), false);
  } else {
    answer(id, (orderWords[o.status] || o.status) + " · ref " + shortRef(o.orderId), o.status !== "refunded");
  }
  card.li.querySelector(".payby").hidden = !unpaid || !o.payBy;
  card.li.querySelector(".order-actions").hidden = !unpaid;
  tick();
}

const orderStates = {
  created: "unpaid", paid: "paid", refunded: "refunded", held: "held for review",
};

// loadMyOrders lists the shopper's orders, ended sales included: on
// login, on load, and after anything the shopper does to an order (not on
// the two-second poll: a crowd polling it would cost the database).
async function loadMyOrders() {
  const section = $("my-orders-section");
  if (!sessionStorage.getItem(tokenKey)) { section.hidden = true; return null; }
  const r = await api("GET", "/api/orders", undefined, true);
  if (r.status !== 200) return null;
  const items = r.data.orders.map((o) => {
    const li = document.createElement("li");
    const card = cards.get(o.voucherId);
    const what = card ? card.voucher.title : "Voucher " + o.voucherId;
    const state = o.status === "cancelled"
      ? "cancelled (" + (o.cancelReason === "expired" ? "not paid in time" : "by you") + ")"
      : orderStates[o.status] || o.status;
    // A short reference: the order id's last six digits.
    li.textContent = what + " — " + state + " — ref " + shortRef(o.orderId);
    li.dataset.order = o.orderId;
    li.dataset.status = o.status;
    return li;
  });
  $("my-orders").replaceChildren(...items);
  section.hidden = items.length === 0;
  return r.data.orders;
}

// checkHeld shows, on each card not checked yet, the shopper's order of
// its voucher: one read of their orders, then the order of each voucher
// they have one of. A voucher they never bought costs no request (asked
// one by one, each answered 404 in the console at every login).
async function checkHeld() {
  const orders = await loadMyOrders();
  if (orders === null) return;
  const mine = new Set(orders.map((o) => o.voucherId));
  for (const [id, card] of cards) {
    if (card.checked) continue;
    card.checked = true;
    if (mine.has(id)) showHeld(id);
  }
}

// showHeld shows the shopper's order of the voucher, if they have one.
async function showHeld(id) {
  const r = await api("GET", "/api/vouchers/" + id + "/order", undefined, true);
  if (r.status !== 200) return;
  if (r.data.status === "queued") await follow(id, r.data.orderId);
  else await showOrder(id, r.data.orderId);
}

async function payOrder(id) {
  const card = cards.get(id);
  if (!card || !card.order) return;
  const r = await api("POST", "/api/orders/" + card.order.orderId + "/pay", undefined, true);
  if (r.status === 200) {
    location.href = r.data.payUrl; // the provider's page; it brings the shopper back here
    return;
  }
  answer(id, (r.data.error && r.data.error.message) || "Could not start the payment.", false);
  await showOrder(id, card.order.orderId);
}

async function cancelOrder(id) {
  const card = cards.get(id);
  if (!card || !card.order) return;
  const r = await api("POST", "/api/orders/" + card.order.orderId + "/cancel", undefined, true);
  if (r.status !== 200) answer(id, (r.data.error && r.data.error.message) || "Could not cancel.", false);
  await showOrder(id, card.order.orderId);
  await refresh();
  await loadMyOrders();
}

async function refresh() {
  try {
    const sent = Date.now();
    const r = await api("GET", "/api/vouchers");
    if (r.status === 200) {
      const at = Date.parse(r.data.serverTime);
      if (!Number.isNaN(at)) clockSkew = at - (sent + Date.now()) / 2;
      $("sale-message").textContent = r.data.vouchers.length === 0 ? "Nothing on sale right now." : "";
      render(r.data.vouchers);
    } else {
      $("sale-message").textContent = "The shop is unavailable, retrying…";
    }
  } catch (_) {
    $("sale-message").textContent = "The shop is unreachable, retrying…";
  }
}

function answer(id, text, ok) {
  const card = cards.get(id);
  if (!card) return;
  const p = card.li.querySelector(".answer");
  // A note about the last tap (already bought) stays in front of the
  // order's state, which polling rewrites.
  p.textContent = (card.note ? card.note + " " : "") + text;
  p.className = "answer " + (ok ? "ok" : "refused");
}

// act is the card's button: a room voucher's shopper joins its queue
// until the room lets them in; then, as for any voucher, buys.
function act(id) {
  const card = cards.get(id);
  if (card.voucher.room && !(card.room && card.room.admission)) {
    // Taken at once: the join may take a second (a proof of work, a slow
    // network), and a button still saying "Join the queue" invites a
    // second press.
    const button = card.li.querySelector(".buy");
    button.dataset.busy = "1";
    button.disabled = true;
    button.textContent = "Joining…";
    return joinRoom(id).finally(() => { button.dataset.busy = ""; buyButton(card, shopNow()); });
  }
  return buy(id);
}

async function buy(id) {
  const card = cards.get(id);
  const button = card.li.querySelector(".buy");
  button.dataset.busy = "1";
  button.disabled = true;
  card.note = "";
  answer(id, "Buying…", true);
  try {
    const admission = card.room && card.room.admission;
    const r = await api("POST", "/api/vouchers/" + id + "/seckill", undefined, true, admission ? { "X-Seckill-Admission": admission } : {});
    const code = errorCode(r.data);
    if (r.status === 200) {
      answer(id, "Reserved · ref " + shortRef(r.data.orderId) + " · saving your order…", true);
      await follow(id, r.data.orderId);
    } else if (code === "unconfirmed" || code === "already_purchased") {
      // Both carry the shopper's order: a first answer that was lost (a
      // timeout, a retry) is never the last word.
      answer(id, messages[code], code === "unconfirmed");
      if (code === "already_purchased") card.note = messages[code];
      await follow(id, r.data.error.orderId || "");
    } else if (code === "sold_out" && (await holdsOrder(id))) {
      // An answer from the server's sold-out memory may reach a shopper who
      // holds one of the units: the order endpoint tells them.
      await follow(id, "");
    } else {
      if (code === "unauthorized") logOut();
      answer(id, messages[code] || "Could not buy (" + r.status + ").", false);
    }
  } finally {
    button.dataset.busy = "";
    showAccount();
    loadMyOrders();
  }
}

// holdsOrder: whether the shopper holds an order of the voucher.
async function holdsOrder(id) {
  const r = await api("GET", "/api/vouchers/" + id + "/order", undefined, true);
  return r.status === 200 && r.data.status !== "cancelled";
}

// follow polls the shopper's order for the voucher until it is persisted.
async function follow(id, orderId) {
  for (let i = 0; i < 60; i++) {
    const r = await api("GET", "/api/vouchers/" + id + "/order", undefined, true);
    if (r.status === 200) {
      if (r.data.status !== "queued") {
        await showOrder(id, r.data.orderId);
        return;
      }
      answer(id, "Reserved · ref " + shortRef(r.data.orderId) + " · saving your order…", true);
    } else if (errorCode(r.data) === "order_not_found" && orderId) {
      answer(id, "Sorry, your reservation (ref " + shortRef(orderId) + ") was lost: it was not kept.", false);
      return;
    } else if (r.status === 503 && r.data.error && r.data.error.orderId) {
      // The shop knows the order, not its state right now: say so and go on asking.
      answer(id, "Your order (ref " + shortRef(r.data.error.orderId) + ") is kept; its state cannot be read right now, retrying…", true);
    }
    await new Promise((done) => setTimeout(done, 500));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("send-code").addEventListener("click", sendCode);
  $("log-in").addEventListener("click", logIn);
  $("logout").addEventListener("click", logOut);
  showAccount();
  refresh().then(loadMyOrders);
  setInterval(refresh, 2000);
  setInterval(tick, 1000);
  setInterval(pollRooms, 1000);
});
