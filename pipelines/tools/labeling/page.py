"""The labeling page of `ccrs label` (pipelines/tools/labeling/server.py serves it): one HTML file, no
external resource, kept here as a module so that every install (a wheel too) ships it."""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ccrs label</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 1rem 2rem; color: #222; }
  header { display: flex; gap: 2rem; align-items: baseline; flex-wrap: wrap; }
  #construct { background: #f4f6fa; padding: .6rem .8rem; border-radius: 6px; margin: .8rem 0; }
  #question { font-size: 1.15rem; font-weight: 600; margin: 1rem 0 .4rem; }
  #answers { display: grid; grid-template-columns: repeat(auto-fit, minmax(18rem, 1fr)); gap: 1rem; }
  .answer { border: 2px solid #ccd; border-radius: 8px; padding: .8rem; outline: none; }
  .answer.focused { border-color: #2a62d4; box-shadow: 0 0 0 3px #c9d8f7; }
  .answer h3 { margin: 0 0 .4rem; }
  .answer .text { white-space: pre-wrap; }
  .marks { margin-top: .6rem; display: flex; flex-wrap: wrap; gap: .3rem; align-items: center; }
  .marks button { min-width: 2.2rem; padding: .3rem; border: 1px solid #99a; background: #fff;
                  border-radius: 4px; }
  .marks button.chosen { background: #2a62d4; color: #fff; border-color: #2a62d4; }
  .mark-value { font-weight: 600; min-width: 3rem; }
  .marks input[type=range]:not(.set) { opacity: .35; }  /* no mark yet, whatever the thumb shows */
  details { margin-top: .5rem; }
  details li { margin-bottom: .3rem; white-space: pre-wrap; }
  #message { color: #a11; min-height: 1.2rem; margin: .5rem 0; }
  #controls { margin: 1rem 0; display: flex; gap: 1rem; align-items: center; }
  .keys { color: #666; font-size: .9rem; }
  #decisions { background: #f7f7ef; padding: .5rem .8rem; border-radius: 6px; margin: .5rem 0; }
  #decisions ul { margin: .3rem 0; columns: 2; }
  #decisions .open { color: #8a5a00; } #decisions .settled { color: #1d6b2f; }
  #stop { color: #1d6b2f; font-weight: 700; } #stop[data-stop="exhausted"] { color: #8a5a00; }
</style>
</head>
<body>
<header>
  <h1>ccrs label</h1>
  <label>Annotator <input id="annotator" autocomplete="off" placeholder="your name"></label>
  <span id="progress"></span>
  <span id="agreement"></span>
</header>
<div id="construct"></div>
<section id="decisions" hidden aria-live="polite"></section>
<div id="message" role="alert"></div>
<main id="work" hidden>
  <div id="question"></div>
  <details id="reference-box"><summary>Reference answer</summary><div id="reference"></div></details>
  <div id="answers"></div>
  <div id="controls">
    <button id="submit">Submit (Enter)</button>
    <button id="skip">Skip (s)</button>
    <span class="keys">digits: mark the focused answer · Tab / arrows: next answer · Enter: submit ·
      s: skip (recorded)</span>
  </div>
</main>
<div id="done" hidden>Every question is labeled or skipped for this annotator. Thank you.</div>
<script>
"use strict";
const STORE_KEY = "ccrs-label-annotator";
const TOKEN = new URLSearchParams(location.search).get("token") || "";  // from the URL ccrs label printed
let state = null;      // the server's state for the annotator
let marks = {};        // slot -> mark given on this page
let typed = "";        // digits typed for the focused answer
let focused = 0;       // index into the answers that still need a mark
let busy = false;      // a request is on its way: Enter twice sends one

const $ = (id) => document.getElementById(id);
const nameField = $("annotator");

function annotator() { return nameField.value.trim(); }
function say(text) { $("message").textContent = text || ""; }
function open() {  // the answers this annotator has not marked yet
  return state && state.question ? state.question.answers.filter((a) => a.labeled === null) : [];
}

async function call(path, body) {
  if (busy) { throw new Error("saving…"); }
  const headers = {"X-CCRS-Token": TOKEN};  // every request carries the server's secret
  const options = body === undefined ? {headers} : {
    method: "POST", headers: {...headers, "Content-Type": "application/json"}, body: JSON.stringify(body)};
  busy = true;
  let reply, data;
  try { reply = await fetch(path, options); data = await reply.json(); } finally { busy = false; }
  if (!reply.ok) { throw new Error(data.error || reply.statusText); }
  return data;
}

async function decisions() {  // an active design: which comparisons the labels so far settle
  try {
    const reply = await fetch("/api/decisions", {headers: {"X-CCRS-Token": TOKEN}});
    const data = await reply.json();
    showDecisions(reply.ok ? data : {design: "uniform"});
  } catch (error) { showDecisions({design: "uniform"}); }
}

function showDecisions(data) {
  const box = $("decisions");
  box.hidden = data.design !== "active";
  if (box.hidden) { return; }
  box.replaceChildren();
  const head = document.createElement("div");
  head.textContent = `Comparisons: ${data.settled} settled, ${data.open} open — ${data.labeled_questions} ` +
    `drawn questions labeled (anytime intervals, alpha ${data.alpha} over ${data.family_size} ` +
    `comparisons, equivalent within ±${data.margin})`;
  const list = document.createElement("ul");
  for (const pair of data.pairs) {
    const item = document.createElement("li");
    item.className = pair.decision === "open" ? "open" : "settled";
    item.dataset.pair = `${pair.a}|${pair.b}`;
    item.textContent = `${pair.a} vs ${pair.b}: ` +
      (pair.decision === "open" ? "open" : `settled (${pair.decision})`);
    list.append(item);
  }
  box.append(head, list);
  if (data.stop) {
    const stop = document.createElement("div");
    stop.id = "stop";
    stop.dataset.stop = data.stop;
    stop.textContent = data.stop === "settled" ? "You can stop: every comparison is settled." :
      "Labeling can stop here: every question the design drew is labeled or skipped, " +
      "so it has nothing more to serve; " +
      `${data.open} of ${data.pairs.length} comparisons stay open. ` +
      "For the labels a settled verdict would need: ccrs plan labels --design active.";
    box.append(stop);
  }
}

async function load() {
  try { show(await call("/api/state?annotator=" + encodeURIComponent(annotator()))); }
  catch (error) { say(error.message); }
}

function show(data) {
  state = data;
  decisions();
  marks = {}; typed = ""; focused = 0;
  if (!nameField.value && data.default_annotator) {
    nameField.value = data.default_annotator;
    localStorage.setItem(STORE_KEY, annotator());
    load();
    return;
  }
  const metric = data.metric;
  const [low, high] = metric.scale;
  $("construct").textContent =
    `${metric.name}: ${metric.description} — mark each answer from ${low} to ${high}.`;
  const p = data.progress;
  $("progress").textContent =
    `${p.labeled} of ${p.total} labeled` + (p.skipped ? `, ${p.skipped} skipped` : "");
  const a = data.agreement;
  $("agreement").textContent = !a ? "" : (a.alpha === null
    ? `agreement of ${a.annotators.length} annotators: not yet (${a.note})`
    : `agreement of ${a.annotators.length} annotators: Krippendorff's alpha ${a.alpha.toFixed(3)} ` +
      `(${a.level}) over ${a.answers_by_2plus} answers labeled by 2+`);
  $("work").hidden = !data.question;
  $("done").hidden = !!data.question || !data.annotator;
  if (!data.annotator) { say("Type your name to start."); nameField.focus(); return; }
  say("");
  if (data.question) { render(data.question, metric); }
}

function render(question, metric) {
  const work = $("work");
  work.dataset.questionId = question.query_id;
  $("question").textContent = `Question ${question.position}: ${question.text}`;
  $("reference").textContent = question.reference;
  const box = $("answers");
  box.replaceChildren();
  if (!question.answers.length) { say("No system answered this question: skip it (s)."); }
  for (const answer of question.answers) { box.append(card(answer, metric)); }
  focusAnswer(0);
}

function card(answer, metric) {
  const div = document.createElement("div");
  div.className = "answer";
  div.tabIndex = -1;
  div.dataset.slot = answer.slot;
  const title = document.createElement("h3");
  title.textContent = `Answer ${answer.slot}`;
  const text = document.createElement("div");
  text.className = "text";
  text.textContent = answer.text;
  const contexts = document.createElement("details");
  contexts.innerHTML = `<summary>Retrieved contexts (${answer.contexts.length})</summary>`;
  const list = document.createElement("ol");
  for (const context of answer.contexts) {
    const item = document.createElement("li");
    item.textContent = context;
    list.append(item);
  }
  contexts.append(list);
  const row = document.createElement("div");
  row.className = "marks";
  if (answer.labeled !== null) {
    row.textContent = `already labeled: ${answer.labeled}`;
  } else {
    row.append(...markControls(answer.slot, metric));
  }
  div.append(title, text, contexts, row);
  div.addEventListener("click", () => focusAnswer(open().findIndex((a) => a.slot === answer.slot)));
  return div;
}

function markControls(slot, metric) {
  const [low, high] = metric.scale;
  const value = document.createElement("span");
  value.className = "mark-value";
  value.textContent = "–";
  if (metric.buttons) {
    const buttons = [];
    for (let mark = low; mark <= high; mark++) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = mark;
      button.dataset.mark = mark;
      button.tabIndex = -1;
      button.addEventListener("click", () => setMark(slot, mark));
      buttons.push(button);
    }
    return buttons;
  }
  const input = document.createElement("input");
  input.type = metric.integer ? "range" : "number";
  input.min = low; input.max = high; input.step = metric.integer ? 1 : "any";
  input.tabIndex = -1;
  input.addEventListener("input", () => {
    if (input.value !== "") { setMark(slot, Number(input.value)); }
  });
  return [input, value];
}

function setMark(slot, mark) {
  marks[slot] = mark;
  const div = document.querySelector(`.answer[data-slot="${slot}"]`);
  for (const button of div.querySelectorAll("button[data-mark]")) {
    button.classList.toggle("chosen", Number(button.dataset.mark) === mark);
  }
  const value = div.querySelector(".mark-value");
  if (value) { value.textContent = mark; }
  const input = div.querySelector("input");
  if (input) {
    input.classList.add("set");
    if (document.activeElement !== input) { input.value = mark; }
  }
  div.dataset.mark = mark;
  say("");
}

function focusAnswer(index) {
  const answers = open();
  if (!answers.length) { return; }
  focused = (index + answers.length) % answers.length;
  typed = "";
  for (const div of document.querySelectorAll(".answer")) {
    div.classList.toggle("focused", Number(div.dataset.slot) === answers[focused].slot);
  }
  const div = document.querySelector(`.answer[data-slot="${answers[focused].slot}"]`);
  const input = div.querySelector("input[type=number]");
  (input || div).focus();
}

function typeDigit(digit) {
  const answers = open();
  if (!answers.length) { return; }
  const [low, high] = state.metric.scale;
  let mark = Number(typed + digit);
  if (mark > high) { typed = ""; mark = Number(digit); }
  if (mark < low || mark > high) { say(`a mark is from ${low} to ${high}`); typed = ""; return; }
  typed += digit;
  setMark(answers[focused].slot, mark);
}

async function submit() {
  if (!state || !state.question) { return; }
  if (!annotator()) { say("Type your name first."); nameField.focus(); return; }
  const missing = open().filter((a) => !(a.slot in marks)).map((a) => `Answer ${a.slot}`);
  if (missing.length) { say(`Mark every answer first: ${missing.join(", ")} has no mark.`); return; }
  try {
    show(await call("/api/label", {annotator: annotator(), question_id: state.question.query_id, marks}));
  } catch (error) { say(error.message); }
}

async function skip() {
  if (!state || !state.question) { return; }
  if (!annotator()) { say("Type your name first."); nameField.focus(); return; }
  try { show(await call("/api/skip", {annotator: annotator(), question_id: state.question.query_id})); }
  catch (error) { say(error.message); }
}

nameField.addEventListener("change", () => {
  localStorage.setItem(STORE_KEY, annotator());
  load();
});
nameField.addEventListener("keydown", (event) => {
  if (event.key === "Enter") { event.preventDefault(); event.stopPropagation(); nameField.blur(); }
});
$("submit").addEventListener("click", submit);
$("skip").addEventListener("click", skip);

document.addEventListener("keydown", (event) => {
  if (event.target === nameField || event.ctrlKey || event.metaKey || event.altKey) { return; }
  if (!state || !state.question) { return; }
  const inNumber = event.target.matches && event.target.matches("input[type=number]");
  if (event.key === "Tab" || event.key === "ArrowRight" || event.key === "ArrowLeft") {
    event.preventDefault();
    const back = event.key === "ArrowLeft" || (event.key === "Tab" && event.shiftKey);
    focusAnswer(focused + (back ? -1 : 1));
  } else if (event.key === "Enter") {
    event.preventDefault();
    if (inNumber && event.target.value !== "") {
      setMark(open()[focused].slot, Number(event.target.value));
    }
    submit();
  } else if (event.key === "s" || event.key === "S") {
    event.preventDefault();
    skip();
  } else if (/^[0-9]$/.test(event.key) && !inNumber) {
    event.preventDefault();
    typeDigit(event.key);
  }
});

nameField.value = localStorage.getItem(STORE_KEY) || "";
load();
</script>
</body>
</html>
"""
