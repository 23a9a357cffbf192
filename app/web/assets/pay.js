// The payment sandbox's pay page: shows the payment and makes the
// sandbox's signed notification when a button is pressed. Every value
// from the server is set as text (textContent), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const paymentId = location.pathname.split("/").pop();

const results = {
  paid: "Paid. The order is yours.",
  already_recorded: "This payment was recorded already.",
  refunded: "The order was cancelled before the payment arrived: the money goes back (refunded).",
  failed: "The payment failed; the order is still unpaid.",
  taken: "Paid. The shop records it in a moment.",
};

async function call(method, path, body) {
  const resp = await fetch(path, {
    method,
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = {};
  try { data = await resp.json(); } catch (_) { data = {}; }
  return { status: resp.status, data };
}

async function complete(status) {
  $("pay").disabled = $("fail").disabled = true;
  const r = await call("POST", "/api/payments/sandbox/" + encodeURIComponent(paymentId) + "/complete", { status });
  if (r.status === 200) {
    // The sandbox answers what it did; the shop's result is there only
    // when its notice reached the shop at once (it may come later, or be
    // lost: the shop then asks the sandbox).
    const outcome = r.data.result || (r.data.status === "succeeded" ? "taken" : r.data.status);
    $("result").textContent = results[outcome] || outcome;
    if (r.data.status === "failed") $("pay").disabled = $("fail").disabled = false;
    if (r.data.status === "succeeded" && outcome !== "refunded") $("actions").hidden = true;
  } else {
    $("result").textContent = (r.data.error && r.data.error.message) || "The shop did not answer; try again.";
    $("pay").disabled = $("fail").disabled = false;
  }
}

async function load() {
  const r = await call("GET", "/api/payments/sandbox/" + encodeURIComponent(paymentId));
  if (r.status !== 200) {
    $("result").textContent = "No such payment.";
    return;
  }
  $("amount").textContent = "¥" + (r.data.amount / 100).toFixed(2);
  // The shop's words: the item, and the short reference it shows.
  $("item").textContent = r.data.title || "Your order";
  $("order").textContent = String(r.data.orderId).slice(-6);
  if (r.data.orderStatus === "paid" || r.data.orderStatus === "refunded") {
    // Nothing to pay: never offer a second payment of a paid order.
    $("pay-title").textContent = "Paid";
    $("actions").hidden = true;
    $("result").textContent = r.data.orderStatus === "paid" ? "This order is paid. Nothing more to do." : "This order's payment was returned (refunded).";
    return;
  }
  $("pay").disabled = $("fail").disabled = false;
}

$("pay").addEventListener("click", () => complete("succeeded"));
$("fail").addEventListener("click", () => complete("failed"));
load();
