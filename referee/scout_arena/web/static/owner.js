// The owner's page (ladder only): #/owner lists the owner's bots, #/owner/bot/NAME shows one
// bot's versions and validation results, its hosted runs' output, the data download and the
// form to submit a new version. The owner token is kept in sessionStorage (this tab only) and
// sent in the Authorization header of the JSON calls: never in a URL. Loaded before app.js,
// whose helpers (el, setView, botLink, replayLink, pageToken) these functions use when called.
"use strict";

const TOKEN_KEY = "scout-owner-token";
const ownerToken = () => sessionStorage.getItem(TOKEN_KEY) || "";

async function ownerFetch(path, options) {
  const response = await fetch(path, {
    ...(options || {}),
    headers: { Accept: "application/json", Authorization: `Bearer ${ownerToken()}`, ...((options || {}).headers || {}) },
  });
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).error || detail; } catch (e) { /* not JSON */ }
    const error = new Error(`${response.status}: ${detail}`);
    error.status = response.status;
    throw error;
  }
  return response;
}

const ownerApi = async (path, options) => (await ownerFetch(path, options)).json();
const botPath = (bot) => `/api/owner/bots/${encodeURIComponent(bot)}`;
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "–");

function tokenForm(onChange) {
  const input = el("input", { type: "password", id: "owner-token", autocomplete: "off", placeholder: "owner token", size: 40 });
  return el("form", {
    class: "filters", id: "token-form",
    onsubmit: (event) => {
      event.preventDefault();
      if (!input.value.trim()) return;
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      input.value = "";
      onChange();
    },
  }, input, el("button", { type: "submit", id: "token-save" }, "Use this token"));
}

function forgetButton(onChange) {
  return el("button", { id: "token-forget", onclick: () => { sessionStorage.removeItem(TOKEN_KEY); onChange(); } }, "Forget token");
}

function botState(b) {
  if (b.retired) return "retired";
  if (b.suspended_reason) return `owner suspended: ${b.suspended_reason}`;
  if (b.paused_reason) return `paused: ${b.paused_reason}`;
  if (b.kind === "hosted" && !b.version) return "no version passed yet";
  return "playing";
}

// ----- submit, versions, runs, data: one bot's panels (also shown on its public profile) ----

function submitForm(bot, maxBytes, onDone) {
  const file = el("input", { type: "file", id: "upload-file", accept: ".zip,.tar.gz,.tgz,application/zip,application/gzip" });
  const status = el("span", { id: "upload-status", class: "muted" });
  const button = el("button", { type: "submit", id: "upload-submit" }, "Submit version");
  return el("form", {
    class: "filters", id: "upload-form",
    onsubmit: async (event) => {
      event.preventDefault();
      const chosen = file.files[0];
      if (!chosen) { status.textContent = "Choose a .zip or .tar.gz first."; return; }
      if (maxBytes && chosen.size > maxBytes) {
        status.className = "error";
        status.textContent = `The file has ${chosen.size} bytes; this ladder takes at most ${maxBytes}.`;
        return;
      }
      button.disabled = true;
      status.className = "muted";
      status.textContent = "Uploading…";
      try {
        const version = await ownerApi(`${botPath(bot)}/versions`, {
          method: "POST", body: chosen, headers: { "Content-Type": "application/octet-stream" },
        });
        status.textContent = `Version ${version.version} stored; validating (its result shows below).`;
        file.value = "";
        onDone();
      } catch (error) {
        status.className = "error";
        status.textContent = `Refused: ${error.message}`;
      } finally {
        button.disabled = false;
      }
    },
  }, file, button, status);
}

function versionsTable(versions) {
  if (!versions.length) return el("p", { class: "muted", id: "versions" }, "No version yet.");
  return el("table", { class: "data", id: "versions" },
    el("thead", {}, el("tr", {}, ["Version", "Status", "Reason", "Runtime", "Submitted", "Decided", "Validation output"].map((h) => el("th", {}, h)))),
    el("tbody", {}, versions.map((v) => el("tr", { "data-version": v.version, "data-status": v.status },
      el("td", {}, `v${v.version}`),
      el("td", { class: `status status-${v.status}` }, v.status),
      el("td", { class: "reason" }, v.reason || ""),
      el("td", {}, v.runtime ? el("code", {}, `${v.runtime}: ${v.command.join(" ")}`) : "–"),
      el("td", {}, when(v.created_at)),
      el("td", {}, when(v.decided_at)),
      el("td", {}, v.validation_output
        ? el("details", {}, el("summary", {}, "output"), el("pre", { class: "output" }, v.validation_output))
        : "")))));
}

function runsList(runs) {
  if (!runs.length) return el("p", { class: "muted", id: "runs" }, "No hosted run yet.");
  return el("table", { class: "data", id: "runs" },
    el("thead", {}, el("tr", {}, ["Match", "Version", "Ended", "Outcome", "Output (last part)"].map((h) => el("th", {}, h)))),
    el("tbody", {}, runs.map((r) => el("tr", { "data-match": r.match_id },
      el("td", {}, replayLink(r.match_id)),
      el("td", {}, `v${r.version}`),
      el("td", {}, when(r.created_at)),
      el("td", {}, r.outcome_reason),
      el("td", {}, el("details", {}, el("summary", {}, `${r.output_tail.length} characters`),
        el("pre", { class: "output run-output" }, r.output_tail || "(no output)")))))));
}

async function downloadData(bot, status) {
  status.textContent = "Packing…";
  try {
    const blob = await (await ownerFetch(`${botPath(bot)}/data`)).blob();
    const url = URL.createObjectURL(blob);
    const link = el("a", { href: url, download: `${bot}-data.tar.gz` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    status.textContent = `Downloaded ${blob.size} bytes.`;
    status.setAttribute("data-bytes", blob.size);
  } catch (error) {
    status.textContent = `Could not download: ${error.message}`;
  }
}

// The panels of one bot; refreshes itself while a version is validating. Resolves to false
// when the token may not see this bot (the public profile then shows nothing more).
async function ownerBotPanels(token, bot, box, withSubmit, maxBytes) {
  const versionsBox = el("div", {});
  const runsBox = el("div", {});
  const dataStatus = el("span", { id: "data-status", class: "muted" });
  const refresh = async () => {
    let versions = [], runs = [];
    try {
      [versions, runs] = await Promise.all([
        ownerApi(`${botPath(bot)}/versions`), ownerApi(`${botPath(bot)}/runs?limit=20`)]);
    } catch (error) {
      // a name not taken yet: its first version makes it a hosted bot of the owner's
      if (!(withSubmit && error.status === 404)) throw error;
    }
    if (token !== pageToken) return;
    versionsBox.replaceChildren(versionsTable(versions));
    runsBox.replaceChildren(runsList(runs));
  };
  await refresh();
  box.replaceChildren(
    withSubmit ? el("h2", {}, "Submit a new version") : null,
    withSubmit ? el("p", { class: "muted" }, "A .zip or .tar.gz holding scout-bot.toml; it plays rated once it passes validation.") : null,
    withSubmit ? submitForm(bot, maxBytes, () => refresh().catch(() => {})) : null,
    el("h2", {}, "Versions"), versionsBox,
    el("h2", {}, "Hosted runs"), runsBox,
    el("h2", {}, "Data folder"),
    el("p", {}, el("button", { id: "data-download", onclick: () => downloadData(bot, dataStatus) }, "Download data (.tar.gz)"), " ", dataStatus));
  timers.push(setInterval(() => refresh().catch(() => {}), 2000));
  return true;
}

// ----- the pages ------------------------------------------------------------------------------

async function ownerPage(token, bot) {
  const rerender = () => route();
  if (!ownerToken()) {
    setView(el("h1", {}, "Owner"),
      el("p", {}, "Enter your owner token (from ", el("code", {}, "scout-arena ladder signup"), "). It stays in this tab only."),
      tokenForm(rerender));
    return;
  }
  let account;
  try {
    account = await ownerApi("/api/owner");
  } catch (error) {
    if (token !== pageToken) return;
    setView(el("h1", {}, "Owner"), el("p", { class: "error", id: "owner-error" }, error.message),
      tokenForm(rerender), forgetButton(rerender));
    return;
  }
  if (token !== pageToken) return;
  const who = account.admin ? "the admin" : account.owner;
  const head = el("p", { class: "muted", id: "owner-who" }, `Signed in as ${who}. `, forgetButton(rerender));
  if (bot) {
    const box = el("div", { id: "owner-bot" });
    setView(el("h1", {}, el("a", { href: "#/owner" }, "Owner"), " · ", bot, " ",
      el("a", { class: "small", href: `#/bot/${encodeURIComponent(bot)}` }, "public profile →")), head, box);
    try {
      await ownerBotPanels(token, bot, box, account.hosting, account.max_upload_bytes);
    } catch (error) {
      if (token === pageToken) box.replaceChildren(el("p", { class: "error", id: "owner-error" }, error.message));
    }
    return;
  }
  const newName = el("input", { id: "new-bot", placeholder: "new hosted bot name" });
  setView(el("h1", {}, "Owner ", who),
    head,
    account.suspended_reason ? el("p", { class: "error" }, `Account suspended: ${account.suspended_reason}`) : null,
    account.bots.length
      ? el("table", { class: "data", id: "owner-bots" },
        el("thead", {}, el("tr", {}, ["Bot", "Kind", "Active version", "State", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, account.bots.map((b) => el("tr", { "data-bot": b.bot },
          el("td", {}, botLink(b.bot)), el("td", {}, b.kind), el("td", {}, b.version ? `v${b.version}` : "–"),
          el("td", { class: "state" }, botState(b)),
          el("td", {}, el("a", { href: `#/owner/bot/${encodeURIComponent(b.bot)}` }, "versions, logs, data ▸"))))))
      : el("p", { class: "muted" }, account.admin ? "The admin opens any bot by name below." : "No bot yet."),
    account.hosting || account.admin ? el("form", {
      class: "filters", id: "open-bot",
      onsubmit: (event) => {
        event.preventDefault();
        if (newName.value.trim()) location.hash = `#/owner/bot/${encodeURIComponent(newName.value.trim())}`;
      },
    }, newName, el("button", { type: "submit" }, account.admin ? "Open" : "New hosted bot")) : null);
}

// On the public profile: the owner-only parts when this tab holds a token that may see them.
async function profileOwnerParts(token, bot, box) {
  if (!ownerToken()) {
    box.replaceChildren(el("p", { class: "muted" }, "Yours? ", el("a", { href: `#/owner/bot/${encodeURIComponent(bot)}` }, "Enter your owner token"), " to see its versions, logs and data."));
    return;
  }
  try {
    await ownerBotPanels(token, bot, box, false, 0);
    box.prepend(el("p", { class: "muted" }, "Shown to you as its owner. ",
      el("a", { href: `#/owner/bot/${encodeURIComponent(bot)}` }, "Submit a version →")));
  } catch (error) {
    box.replaceChildren();  // not this token's bot: nothing more to show
  }
}
