// Scout Arena pages: leaderboard, bot profile, match list, replay viewer, live matches,
// the ladder's referee nodes and its owner's page (owner.js). Plain DOM, no build step.
// Routing by URL hash: #/, #/bot/NAME, #/matches?bot=&table_size=, #/replay/ID, #/live,
// #/live/ID, #/nodes, #/owner, #/owner/bot/NAME. Every number shown comes from the JSON API (docs/web-api.md).
"use strict";

const view = document.getElementById("view");
const siteInfo = fetch("/api/info").then((r) => r.json()).catch(() => ({}));
let timers = [];          // intervals of the current page, cleared on navigation
let pageToken = 0;        // a response for a page we left is dropped

function clearTimers() {
  timers.forEach((t) => clearInterval(t));
  timers = [];
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).error || detail; } catch (e) { /* not JSON */ }
    const error = new Error(`${response.status}: ${detail}`);
    error.status = response.status;
    throw error;
  }
  return response.json();
}

const fmt = (x, digits = 2) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
const botLink = (name) => el("a", { href: `#/bot/${encodeURIComponent(name)}` }, name);
const replayLink = (id, text) => el("a", { href: `#/replay/${encodeURIComponent(id)}` }, text || id);

function setView(...nodes) {
  view.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
}

function showError(error) {
  setView(el("p", { class: "error" }, `Could not load: ${error.message}`));
}

// A rank's colour is its place relative to the table: 1st is green and last red at any size,
// so a 2nd of 2 reads as a last place and a 2nd of 4 as a good one (level 1 best .. 5 worst).
function formLevel(rank, size) {
  if (!size || size < 2) return Math.min(rank, 5);
  return 1 + Math.round((4 * (Math.min(rank, size) - 1)) / (size - 1));
}

function form(ranks, sizes) {
  return el("span", { class: "form" }, ranks.map((r, i) => {
    const size = sizes && sizes[i];
    return el("span", { class: `rank rank-${formLevel(r, size)}`, title: size ? `rank ${r} of ${size}` : `rank ${r}` }, r);
  }));
}

// ----- leaderboard ----------------------------------------------------------------------------

const boardState = { key: "rank", dir: 1, rows: [], columns: [] };
const pct = (x) => (x === null || x === undefined ? "–" : `${(100 * x).toFixed(1)}%`);
const meanScore = (r) => (r.mean_score === null || r.mean_score === undefined ? "–"
  : `${r.mean_score >= 0 ? "+" : ""}${fmt(r.mean_score)}${r.mean_score_ci95 === null || r.mean_score_ci95 === undefined ? "" : ` ± ${fmt(r.mean_score_ci95)}`}`);
const RATING_COLUMNS = [
  ["conservative", "μ − 3σ", (r) => fmt(r.conservative)],
  ["mu", "μ", (r) => fmt(r.mu)],
  ["sigma", "σ", (r) => fmt(r.sigma)],
  ["games", "Games", (r) => r.games],
];
const FORM_COLUMN = ["recent_ranks", "Recent form", (r) => form(r.recent_ranks, r.recent_table_sizes)];
const LADDER_COLUMNS = [
  ["rank", "#", (r) => r.rank],
  ["bot", "Bot", (r) => botLink(r.bot)],
  ["owner", "Owner", (r) => r.owner || "–"],
  ...RATING_COLUMNS,
  FORM_COLUMN,
];
// A tournament's board shows what its terminal shows; its bots have a command, no owner.
const TOURNAMENT_COLUMNS = [
  ["rank", "#", (r) => r.rank],
  ["bot", "Bot", (r) => botLink(r.bot)],
  ...RATING_COLUMNS,
  ["mean_score", "Mean score (95% CI)", meanScore],
  ["win_rate", "Win %", (r) => pct(r.win_rate)],
  ["mean_rank", "Mean rank", (r) => fmt(r.mean_rank)],
  ["timeouts", "Timeouts", (r) => r.timeouts ?? "–"],
  ["illegal_actions", "Illegal", (r) => r.illegal_actions ?? "–"],
  ["forfeits", "Forfeits", (r) => r.forfeits ?? "–"],
  FORM_COLUMN,
  ["command", "Command", (r) => (r.command ? el("code", {}, r.command) : "–")],
];

function sortedRows() {
  const { key, dir } = boardState;
  const value = (r) => (key === "recent_ranks"
    ? (r.recent_ranks.length ? r.recent_ranks.reduce((a, b) => a + b, 0) / r.recent_ranks.length : 99)
    : r[key]);
  return [...boardState.rows].sort((a, b) => {
    const va = value(a), vb = value(b);
    if (va === vb) return a.rank - b.rank;
    if (va === null || va === undefined) return 1;
    if (vb === null || vb === undefined) return -1;
    return (typeof va === "string" ? va.localeCompare(vb) : va - vb) * dir;
  });
}

function drawBoard(table) {
  const head = el("tr", {}, boardState.columns.map(([key, label]) => el("th", {
    class: `sortable${boardState.key === key ? (boardState.dir > 0 ? " asc" : " desc") : ""}`,
    "data-key": key,
    onclick: () => {
      boardState.dir = boardState.key === key ? -boardState.dir : 1;
      boardState.key = key;
      drawBoard(table);
    },
  }, label)));
  const body = sortedRows().map((r) => el("tr", { "data-bot": r.bot, class: r.on_probation ? "probation" : null },
    boardState.columns.map(([key, , cell]) => el("td", { class: `col-${key}` }, cell(r)))));
  table.replaceChildren(el("thead", {}, head), el("tbody", {}, body));
}

function crosstable(data) {
  const names = data.bots;
  return el("table", { id: "crosstable", class: "data" },
    el("thead", {}, el("tr", {}, el("th", {}, ""), names.map((n) => el("th", { "data-bot": n }, n)))),
    el("tbody", {}, names.map((a) => el("tr", { "data-bot": a }, el("th", {}, botLink(a)),
      names.map((b) => {
        const v = a === b ? null : data.shares[a][b];
        return el("td", { class: "col-share", "data-vs": b }, v === null || v === undefined ? "–" : `${(100 * v).toFixed(0)}%`);
      })))));
}

async function leaderboardPage(token) {
  const info = await siteInfo;
  const table = el("table", { id: "leaderboard", class: "data" });
  const stamp = el("span", { class: "muted", id: "updated" });
  const cross = el("div", { id: "head-to-head" });
  boardState.columns = info.kind === "tournament" ? TOURNAMENT_COLUMNS : LADDER_COLUMNS;
  setView(el("h1", {}, info.kind === "tournament" ? "Standings" : "Leaderboard"),
    el("p", { class: "muted" }, "Sorted by μ − 3σ (click a header to sort). Refreshes every 5 s. ", stamp),
    table, cross);
  const refresh = async () => {
    const rows = await api("/api/leaderboard");
    const shares = info.crosstable ? await api("/api/crosstable") : null;
    if (token !== pageToken) return;
    boardState.rows = rows;
    drawBoard(table);
    stamp.textContent = `Updated ${new Date().toLocaleTimeString()}.`;
    if (!rows.length) table.replaceChildren(el("caption", {}, "No rated bots yet."));
    if (shares && shares.bots.length > 1) {
      cross.replaceChildren(el("h2", {}, "Head to head"),
        el("p", { class: "muted" }, "Share of encounters the row bot finished ahead of the column bot (ties count half)."),
        crosstable(shares));
    }
  };
  await refresh();
  timers.push(setInterval(() => refresh().catch(() => {}), 5000));
}

// ----- bot profile ----------------------------------------------------------------------------

function ratingChart(history) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = (tag, attrs) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    return node;
  };
  const W = 640, H = 260, L = 44, R = 12, T = 12, B = 30;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", id: "rating-chart", role: "img" });
  if (!history.length) {
    const text = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "axis" });
    text.textContent = "no rated games yet";
    root.append(text);
    return root;
  }
  const points = [{ mu: 25, sigma: 25 / 3 }, ...history];  // game 0: the starting rating
  const lo = Math.min(...points.map((p) => p.mu - 3 * p.sigma));
  const hi = Math.max(...points.map((p) => p.mu + 3 * p.sigma));
  const x = (i) => L + (i / Math.max(points.length - 1, 1)) * (W - L - R);
  const y = (v) => T + (1 - (v - lo) / (hi - lo || 1)) * (H - T - B);
  for (let k = 0; k <= 4; k++) {
    const v = lo + (k / 4) * (hi - lo);
    root.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    const label = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" });
    label.textContent = v.toFixed(0);
    root.append(label);
  }
  const upper = points.map((p, i) => `${x(i)},${y(p.mu + 3 * p.sigma)}`);
  const lower = points.map((p, i) => `${x(i)},${y(p.mu - 3 * p.sigma)}`).reverse();
  root.append(svg("polygon", { points: [...upper, ...lower].join(" "), class: "band" }));
  root.append(svg("polyline", { points: points.map((p, i) => `${x(i)},${y(p.mu)}`).join(" "), class: "mu" }));
  root.append(svg("polyline", { points: points.map((p, i) => `${x(i)},${y(p.mu - 3 * p.sigma)}`).join(" "), class: "cons" }));
  const xl = svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", class: "axis" });
  xl.textContent = `games (0–${history.length}); line μ, band μ ± 3σ, dashed μ − 3σ`;
  root.append(xl);
  return root;
}

const liveLink = (id, text) => el("a", { href: `#/live/${encodeURIComponent(id)}` }, text || id);

// A match keeps one id from the moment it is planned: in flight it links to its live view,
// finished to its replay; a void one has neither.
function matchIdCell(m) {
  const code = el("code", {}, m.match_id);
  if (m.status === "finished") return replayLink(m.match_id, code);
  if (m.status === "in_flight") return liveLink(m.match_id, code);
  return code;
}

function matchState(m) {
  if (m.status === "finished") return replayLink(m.match_id, "replay ▸");
  if (m.status === "in_flight") return liveLink(m.match_id, "watch live ▸");
  return el("span", { class: "void", title: "void: not rated" }, `void: ${m.void_reason || "no reason given"}`);
}

function matchRows(matches, highlight) {
  return el("table", { class: "data matches" },
    el("thead", {}, el("tr", {}, ["Match", "Finished", "Players", "Seats (score / rank)", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, matches.map((m) => el("tr", { "data-match": m.match_id, "data-status": m.status },
      el("td", { class: "col-id" }, matchIdCell(m)),
      el("td", { class: "col-when" }, m.finished_at ? new Date(m.finished_at).toLocaleString()
        : m.status === "in_flight" ? "playing now" : "–"),
      el("td", {}, m.table_size),
      el("td", {}, m.seats.map((s) => el("span", { class: `seat-result${s.bot === highlight ? " me" : ""}${s.rank === 1 ? " winner" : ""}` },
        botLink(s.bot), ` ${s.score ?? "–"} / ${s.rank ?? "–"}`, s.forfeited ? " (forfeit)" : "", s.timeouts ? ` (${s.timeouts} timeout${s.timeouts > 1 ? "s" : ""})` : ""))),
      el("td", { class: "col-state" }, matchState(m))))));
}

function botNotFound(name, info) {
  setView(el("div", { id: "not-found" },
    el("h1", {}, "No such bot"),
    el("p", {}, `There is no bot named “${name}” in this ${info.kind || "site"}.`),
    el("p", {}, "Bot names are matched exactly, capitals included. ",
      el("a", { href: "#/" }, "See every bot on the leaderboard"), " or ",
      el("a", { href: `#/matches?bot=${encodeURIComponent(name)}` }, "search the matches"), ".")));
}

async function botPage(token, name) {
  let p;
  try {
    p = await api(`/api/bots/${encodeURIComponent(name)}`);
  } catch (error) {
    if (error.status !== 404) throw error;
    const info = await siteInfo;
    if (token === pageToken) botNotFound(name, info);
    return;
  }
  if (token !== pageToken) return;
  const r = p.rating;
  const ownerParts = el("div", { id: "owner-parts" });
  setView(
    el("h1", {}, p.bot, el("span", { class: "muted small" }, p.owner ? `  ${p.owner}` : "", p.version ? `  v${p.version}` : "")),
    p.command ? el("p", { id: "command" }, "Command: ", el("code", {}, p.command)) : null,
    p.probation_reason ? el("p", { class: "error" }, `On probation: ${p.probation_reason}`) : null,
    p.paused_reason ? el("p", { class: "error", id: "paused" }, `Paused: ${p.paused_reason}`) : null,
    p.suspended_reason ? el("p", { class: "error", id: "suspended" }, `Owner suspended: ${p.suspended_reason}`) : null,
    el("div", { class: "stats" },
      el("div", {}, el("b", {}, p.leaderboard_rank ?? "–"), "rank"),
      el("div", {}, el("b", {}, r ? fmt(r.conservative) : "–"), "μ − 3σ"),
      el("div", {}, el("b", {}, r ? fmt(r.mu) : "–"), "μ"),
      el("div", {}, el("b", {}, r ? fmt(r.sigma) : "–"), "σ"),
      el("div", {}, el("b", {}, p.matches_finished), "matches"),
      el("div", {}, el("b", { id: "timeouts" }, p.timeouts), "timeouts"),
      el("div", {}, el("b", { id: "forfeits" }, p.forfeits), "forfeits"),
      el("div", {}, el("b", {}, p.illegal_actions), "illegal actions")),
    el("h2", {}, "Rating history"),
    ratingChart(p.history),
    el("h2", {}, "Results by table size"),
    el("table", { class: "data", id: "by-size" },
      el("thead", {}, el("tr", {}, ["Players", "Matches", "Wins", "Mean rank", "Mean score"].map((h) => el("th", {}, h)))),
      el("tbody", {}, p.by_table_size.map((s) => el("tr", {},
        el("td", {}, s.table_size), el("td", {}, s.matches), el("td", {}, s.wins),
        el("td", {}, fmt(s.mean_rank)), el("td", {}, fmt(s.mean_score)))))),
    el("h2", {}, "Last matches ", el("a", { class: "small", href: `#/matches?bot=${encodeURIComponent(p.bot)}` }, "all →")),
    matchRows(p.recent_matches, p.bot),
    ownerParts);
  if ((await siteInfo).owners && p.kind === "hosted") await profileOwnerParts(token, p.bot, ownerParts);
}

// ----- match list -----------------------------------------------------------------------------

async function matchesPage(token, params) {
  const bot = params.get("bot") || "";
  const size = params.get("table_size") || "";
  const botInput = el("input", { name: "bot", id: "filter-bot", placeholder: "bot name", value: bot });
  const sizeInput = el("select", { name: "table_size", id: "filter-size" },
    el("option", { value: "" }, "any size"),
    [2, 3, 4, 5].map((n) => el("option", { value: n, selected: String(n) === size ? "selected" : null }, `${n} players`)));
  const filters = el("form", {
    class: "filters",
    onsubmit: (event) => {
      event.preventDefault();
      const q = new URLSearchParams();
      if (botInput.value.trim()) q.set("bot", botInput.value.trim());
      if (sizeInput.value) q.set("table_size", sizeInput.value);
      location.hash = `#/matches?${q}`;
    },
  }, botInput, sizeInput, el("button", { type: "submit" }, "Filter"));
  sizeInput.addEventListener("change", () => filters.requestSubmit());
  const q = new URLSearchParams({ limit: "100" });
  if (bot) q.set("bot", bot);
  if (size) q.set("table_size", size);
  const matches = await api(`/api/matches?${q}`);
  if (token !== pageToken) return;
  setView(el("h1", {}, "Matches"), filters,
    matches.length ? matchRows(matches, bot) : el("p", { class: "muted" }, "No matches."));
}

// ----- replay viewer --------------------------------------------------------------------------

function card(pair, extra) {
  const [face, other] = pair;
  return el("div", { class: `card v${face}${extra ? ` ${extra}` : ""}`, "data-face": face, "data-other": other, title: `${face} (other side ${other})` },
    el("span", { class: "face" }, face), el("span", { class: "other" }, other));
}

async function replayPage(token, matchId) {
  const data = await api(`/api/matches/${encodeURIComponent(matchId)}/replay`);
  if (token !== pageToken) return;
  const frames = data.frames;
  let at = 0;
  let playing = null;
  const table = el("div", { id: "table", class: "table" });
  const caption = el("div", { id: "caption", class: "caption" });
  const counter = el("span", { id: "counter" });
  const slider = el("input", { type: "range", min: 0, max: frames.length - 1, value: 0, id: "slider",
    oninput: () => go(Number(slider.value)) });
  const playButton = el("button", { id: "play", onclick: () => toggle() }, "▶ play");
  const moves = el("ol", { id: "moves", class: "moves", start: 0 }, frames.map((f, i) =>
    el("li", { "data-frame": i, class: `move kind-${f.kind}`, onclick: () => go(i) }, f.description)));

  function seatRow(f, s) {
    const ins = f.inserted && f.inserted.seat === s ? f.inserted.position : -1;
    const rotated = f.rotations && f.rotations[s];
    const badges = [
      el("span", { class: "badge", title: "captured cards" }, "captured ", el("b", { class: "captured" }, f.captured[s])),
      data.num_players === 2
        ? el("span", { class: "badge", title: "Scout chips" }, "chips ", el("b", { class: "chips" }, f.chips[s]))
        : el("span", { class: "badge", title: "Scout chips earned" }, "chips ", el("b", { class: "chips" }, f.chips[s])),
      data.num_players > 2
        ? el("span", { class: `badge token ${f.tokens[s] ? "has" : "used"}`, title: "Scout & Show token" }, f.tokens[s] ? "S&S ●" : "S&S ○")
        : null,
      el("span", { class: "badge" }, "score ", el("b", { class: "score" }, f.scores[s])),
      f.round_end ? el("span", { class: "badge roundscore" }, `round ${f.round_end.scores[s] >= 0 ? "+" : ""}${f.round_end.scores[s]}`) : null,
      f.rotations ? el("span", { class: `badge rot ${rotated ? "yes" : "no"}` }, rotated ? "↻ rotated" : "kept") : null,
    ];
    const pile = el("div", { class: "pile", title: `${f.captured[s]} captured` },
      Array.from({ length: Math.min(f.captured[s], 12) }, () => el("div", { class: "pile-card" })));
    return el("div", { class: `seat${f.current_seat === s ? " to-act" : ""}${f.seat === s ? " acted" : ""}`, id: `seat-${s}`, "data-seat": s },
      el("div", { class: "seat-head" }, el("span", { class: "seat-name" }, `Seat ${s} · `, botLink(data.players[s])),
        f.current_seat === s ? el("span", { class: "turn" }, "to act") : null,
        f.round_end && f.round_end.exempt_seat === s ? el("span", { class: "turn" }, "exempt") : null),
      el("div", { class: "seat-body" },
        el("div", { class: "hand", id: `hand-${s}`, "data-seat": s }, f.hands[s].map((c, i) => card(c, i === ins ? "inserted" : null))),
        pile,
        el("div", { class: "badges" }, badges)));
  }

  function draw() {
    const f = frames[at];
    const owner = f.active_owner;
    const center = el("div", { class: "center" },
      el("div", { class: "label" }, f.active.length ? `Active set (${data.players[owner]})` : "No active set"),
      el("div", { class: "hand active", id: "active" }, f.active.map((c) => card(c))));
    table.replaceChildren(center, ...data.players.map((_, s) => seatRow(f, s)));
    let text = `Round ${f.round + 1} — ${f.description}`;
    if (f.round_end) {
      text += ` — round over (${f.round_end.reason.replace(/_/g, " ")})`;
    }
    caption.textContent = text;
    counter.textContent = `step ${at} / ${frames.length - 1}`;
    slider.value = at;
    moves.querySelectorAll(".current").forEach((n) => n.classList.remove("current"));
    const item = moves.children[at];
    item.classList.add("current");
    item.scrollIntoView({ block: "nearest" });
  }
  function go(i) {
    at = Math.max(0, Math.min(frames.length - 1, i));
    draw();
    if (at === frames.length - 1) stop();
  }
  function stop() {
    if (playing !== null) clearInterval(playing);
    playing = null;
    playButton.textContent = "▶ play";
  }
  function toggle() {
    if (playing !== null) return stop();
    if (at === frames.length - 1) at = 0;
    playButton.textContent = "❚❚ pause";
    playing = setInterval(() => go(at + 1), 700);
    timers.push(playing);
  }
  const result = data.finished
    ? el("p", { class: "muted" }, "Final: ", data.players.map((name, s) =>
      el("span", { class: "seat-result" }, `${name} ${data.totals[s]} (rank ${data.ranks[s]}${data.forfeits.includes(s) ? ", forfeit" : ""})`)))
    : null;
  setView(
    el("h1", {}, "Replay ", el("code", {}, data.match_id)),
    result,
    el("div", { class: "controls" },
      el("button", { id: "first", onclick: () => go(0) }, "|◀ first"),
      el("button", { id: "prev", onclick: () => go(at - 1) }, "◀ back"),
      playButton,
      el("button", { id: "next", onclick: () => go(at + 1) }, "step ▶"),
      el("button", { id: "last", onclick: () => go(frames.length - 1) }, "last ▶|"),
      slider, counter),
    caption,
    el("div", { class: "replay" }, table, el("div", { class: "movebox" }, el("h3", {}, "Moves"), moves)));
  document.onkeydown = (event) => {
    if (!document.getElementById("table")) return;
    if (event.key === "ArrowRight") go(at + 1);
    else if (event.key === "ArrowLeft") go(at - 1);
    else if (event.key === " ") { event.preventDefault(); toggle(); }
  };
  draw();
}

// ----- live spectating (public information only: hands are shown as card backs) -----------

async function livePage(token, matchId) {
  const box = el("div", {});
  setView(el("h1", {}, matchId ? "Live " : "Live matches", matchId ? el("code", {}, matchId) : null),
    el("p", { class: "muted" }, "Refreshes every second. Hands stay hidden until their round ends."), box);
  const refresh = async () => {
    if (!matchId) {
      const list = await api("/api/live");
      if (token !== pageToken) return;
      box.replaceChildren(list.length
        ? el("ul", { id: "live-list" }, list.map((m) => el("li", {},
          el("a", { href: `#/live/${encodeURIComponent(m.match_id)}` }, m.match_id),
          ` — ${m.players.join(", ")} (round ${m.round + 1})`)))
        : el("p", { class: "muted" }, "No match is being played right now."));
      return;
    }
    let v;
    try {
      v = await api(`/api/live/${encodeURIComponent(matchId)}`);
    } catch (error) {
      if (token !== pageToken) return;
      const over = await fetch(`/api/matches/${encodeURIComponent(matchId)}/replay`).then((r) => r.ok).catch(() => false);
      if (token !== pageToken) return;
      if (over) {
        box.replaceChildren(el("p", { id: "live-over" }, "This match is over: ", replayLink(matchId, "watch the replay")));
        clearTimers();
      } else {
        box.replaceChildren(el("p", { id: "live-elsewhere", class: "muted" },
          "This match is not being played on this server's own referee (a match on a referee node cannot be watched here), ",
          "or has not started yet. This page shows its replay link once it ends."));
      }
      return;
    }
    if (token !== pageToken) return;
    const seats = v.players.map((name, s) => el("div", { class: `seat${v.current_seat === s ? " to-act" : ""}`, "data-seat": s },
      el("div", { class: "seat-head" }, el("span", { class: "seat-name" }, `Seat ${s} · `, botLink(name)),
        v.current_seat === s ? el("span", { class: "turn" }, "to act") : null),
      el("div", { class: "seat-body" },
        el("div", { class: "hand hidden-hand", id: `hand-${s}` },
          Array.from({ length: v.hand_sizes[s] }, () => el("div", { class: "card back" }))),
        el("div", { class: "badges" },
          el("span", { class: "badge" }, "captured ", el("b", {}, v.captured[s])),
          el("span", { class: "badge" }, "chips ", el("b", {}, v.chips[s])),
          v.num_players > 2 ? el("span", { class: `badge token ${v.tokens[s] ? "has" : "used"}` }, v.tokens[s] ? "S&S ●" : "S&S ○") : null,
          el("span", { class: "badge" }, "score ", el("b", {}, v.scores[s]))))));
    const owner = v.active_owner;
    box.replaceChildren(
      el("div", { class: "caption" }, `Round ${v.round + 1} · ${v.phase}`),
      el("div", { class: "replay" },
        el("div", { class: "table" },
          el("div", { class: "center" },
            el("div", { class: "label" }, v.active.length ? `Active set (${v.players[owner]})` : "No active set"),
            el("div", { class: "hand active" }, v.active.map((c) => card(c)))),
          ...seats),
        el("div", { class: "movebox" }, el("h3", {}, "This round"),
          el("ol", { class: "moves" }, v.moves.map((m) => el("li", { class: "move" }, m))))));
  };
  await refresh();
  timers.push(setInterval(() => refresh().catch(() => {}), 1000));
}

// ----- referee nodes (ladder only: where its matches are played, and their load) -----------

function loadBar(used, capacity) {
  const share = capacity > 0 ? Math.min(used / capacity, 1) : 0;
  const level = share >= 1 ? "full" : share >= 0.75 ? "high" : "ok";
  return el("span", { class: "load", title: `${used} of ${capacity} match slots in use` },
    el("span", { class: `load-bar ${level}` },
      el("span", { class: "load-fill", style: `width: ${(share * 100).toFixed(0)}%` })),
    el("span", { class: "load-text" }, `${used} / ${capacity}`));
}

const NODE_COLUMNS = [
  ["name", "Node", (n) => el("span", { title: n.node_id }, n.name)],
  ["state", "State", (n) => (n.state === "lost"
    ? el("span", { class: "lost", title: n.lost_reason || "" },
      `lost ${n.lost_at_iso ? new Date(n.lost_at_iso).toLocaleString() : ""}: ${n.lost_reason || "?"}`)
    : n.state || "attached")],
  ["address", "Address", (n) => el("code", {}, n.address)],
  ["version", "Version", (n) => n.version || "–"],
  ["load", "Matches / capacity", (n) => (n.state === "lost" ? "–" : loadBar(n.matches, n.capacity))],
  ["running_matches", "Running", (n) => n.running_matches ?? "–"],
  ["connected_bots", "Bots", (n) => n.connected_bots ?? "–"],
  ["decisions_per_s", "Decisions/s", (n) => (n.state === "lost" ? "–" : fmt(n.decisions_per_s, 1))],
  ["rss_mb", "RSS MB", (n) => (n.state === "lost" ? "–" : fmt(n.rss_mb, 1))],
  ["cpu_s", "CPU s", (n) => (n.state === "lost" ? "–" : fmt(n.cpu_s, 1))],
  ["heartbeat_age_s", "Last heartbeat", (n) => (n.state === "lost" ? "–" : `${fmt(n.heartbeat_age_s, 1)} s ago`)],
  ["attached_at", "Attached", (n) => (n.attached_at_iso ? new Date(n.attached_at_iso).toLocaleString() : "–")],
];

async function nodesPage(token) {
  const table = el("table", { id: "nodes", class: "data" });
  const summary = el("p", { id: "nodes-summary" });
  const stamp = el("span", { class: "muted", id: "updated" });
  setView(el("h1", {}, "Referee nodes"),
    el("p", { class: "muted" }, "The referee nodes attached to the ladder and their load. Refreshes every 2 s. ", stamp),
    summary, table);
  const refresh = async () => {
    const { nodes } = await api("/api/nodes");
    if (token !== pageToken) return;
    stamp.textContent = `Updated ${new Date().toLocaleTimeString()}.`;
    if (!nodes.length) {
      summary.textContent = "";
      table.replaceChildren(el("caption", {}, "No referee node is attached."));
      return;
    }
    const attached = nodes.filter((n) => n.state !== "lost");
    const used = attached.reduce((a, n) => a + n.matches, 0);
    const capacity = attached.reduce((a, n) => a + n.capacity, 0);
    const lost = nodes.length - attached.length;
    summary.replaceChildren(`${attached.length} node${attached.length === 1 ? "" : "s"} attached, `, loadBar(used, capacity),
      ` matches in all${lost ? `; ${lost} lost lately (below)` : ""}.`);
    table.replaceChildren(
      el("thead", {}, el("tr", {}, NODE_COLUMNS.map(([key, label]) => el("th", { "data-key": key }, label)))),
      el("tbody", {}, nodes.map((n) => el("tr", { "data-node": n.node_id },
        NODE_COLUMNS.map(([key, , cell]) => el("td", { class: `col-${key}` }, cell(n)))))));
  };
  await refresh();
  timers.push(setInterval(() => refresh().catch(() => {}), 2000));
}

// ----- routing --------------------------------------------------------------------------------

async function route() {
  clearTimers();
  document.onkeydown = null;
  const token = ++pageToken;
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  view.setAttribute("data-page", parts[0] || "leaderboard");
  try {
    if (parts[0] === "bot" && parts[1]) await botPage(token, parts[1]);
    else if (parts[0] === "matches") await matchesPage(token, params);
    else if (parts[0] === "replay" && parts[1]) await replayPage(token, parts[1]);
    else if (parts[0] === "live") await livePage(token, parts[1]);
    else if (parts[0] === "nodes") await nodesPage(token);
    else if (parts[0] === "owner") await ownerPage(token, parts[1] === "bot" ? parts[2] : null);
    else await leaderboardPage(token);
    if (token === pageToken) view.setAttribute("data-ready", "1");
  } catch (error) {
    if (token === pageToken) showError(error);
  }
}

window.addEventListener("hashchange", () => { view.removeAttribute("data-ready"); route(); });
siteInfo.then((info) => {
  document.getElementById("source-kind").textContent = info.title;
  document.getElementById("nav-live").hidden = !info.live;
  document.getElementById("nav-nodes").hidden = !info.nodes;
  document.getElementById("nav-owner").hidden = !info.owners;
  document.title = info.title;
}).catch(() => {});
route();
