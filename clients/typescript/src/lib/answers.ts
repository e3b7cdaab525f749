// Pure helpers for answers: the fallback, a check of a bot's answer against the request's legal
// lists, and the BotMessage envelopes.

import type { Action, BotMessage, DecisionRequest, End, Scout, Show } from "./proto";

/** Rotation fallback (the referee's too): keep the hand as dealt. */
export const FALLBACK_ROTATION = false;

/** The Scout the referee plays when a seat has no legal Show; always `legalScouts[0]`. */
export const FALLBACK_SCOUT: Scout = { end: "END_LEFT", flip: false, insertAt: 0 };

/**
 * The documented fallback, taken from the legal lists: the first legal Show (lowest start, then
 * shortest), else the first legal Scout. It is what the referee plays on a timeout.
 */
export function fallbackAction(
  request: Pick<DecisionRequest, "legalShows" | "legalScouts">,
): Action {
  const show = request.legalShows[0];
  if (show !== undefined) {
    return { show: { start: show.start, length: show.length } };
  }
  const scout = request.legalScouts[0] ?? FALLBACK_SCOUT;
  return { scout: { end: scout.end, flip: scout.flip, insertAt: scout.insertAt } };
}

const END_BY_NUMBER: Readonly<Record<number, End>> = {
  0: "END_UNSPECIFIED",
  1: "END_LEFT",
  2: "END_RIGHT",
};

/** An End given by name or number, or undefined for anything else. */
export function normalizeEnd(end: unknown): End | undefined {
  if (end === "END_LEFT" || end === "END_RIGHT" || end === "END_UNSPECIFIED") {
    return end;
  }
  return typeof end === "number" ? END_BY_NUMBER[end] : undefined;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; problem: string };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isPresent(value: unknown): boolean {
  return value !== undefined && value !== null;
}

function readShow(raw: unknown, what: string): Parsed<Show> {
  if (!isRecord(raw)) {
    return { ok: false, problem: `${what} is not an object` };
  }
  const start = raw["start"] ?? 0;
  const length = raw["length"];
  if (!Number.isInteger(start) || !Number.isInteger(length)) {
    return { ok: false, problem: `${what} needs integer start and length` };
  }
  return { ok: true, value: { start: start as number, length: length as number } };
}

function readScout(raw: unknown, what: string): Parsed<Scout> {
  if (!isRecord(raw)) {
    return { ok: false, problem: `${what} is not an object` };
  }
  const end = normalizeEnd(raw["end"]);
  const flip = raw["flip"] ?? false;
  const insertAt = raw["insertAt"] ?? 0;
  if (end === undefined || end === "END_UNSPECIFIED") {
    return { ok: false, problem: `${what} needs end END_LEFT or END_RIGHT` };
  }
  if (typeof flip !== "boolean" || !Number.isInteger(insertAt)) {
    return { ok: false, problem: `${what} needs a boolean flip and an integer insertAt` };
  }
  return { ok: true, value: { end, flip, insertAt: insertAt as number } };
}

function sameShow(a: Show, b: Show): boolean {
  return a.start === b.start && a.length === b.length;
}

/** Whether a Scout is listed. A one-card active set is listed as END_LEFT only; END_RIGHT names
 * the same card and the referee accepts it too. */
function scoutIsListed(request: DecisionRequest, scout: Scout): boolean {
  const oneCard = request.observation.activeSet.length === 1;
  const end = oneCard ? "END_LEFT" : scout.end;
  return request.legalScouts.some(
    (legal) => legal.end === end && legal.flip === scout.flip && legal.insertAt === scout.insertAt,
  );
}

/**
 * Checks a bot's answer against the request. Shows and Scouts must be in the legal lists; a
 * Scout & Show must be available, with a listed Scout part and a Show part inside the hand after
 * the insertion (whether it beats the table is left to the referee). Returns a clean copy of the
 * action, or the reason it would surely be rejected.
 */
export function checkAction(request: DecisionRequest, raw: unknown): Parsed<Action> {
  if (!isRecord(raw)) {
    return { ok: false, problem: "the answer is not an Action object" };
  }
  const members = (["show", "scout", "scoutAndShow"] as const).filter((key) => isPresent(raw[key]));
  if (members.length !== 1) {
    return { ok: false, problem: "an Action sets exactly one of show, scout, scoutAndShow" };
  }
  switch (members[0]) {
    case "show": {
      const show = readShow(raw["show"], "show");
      if (!show.ok) {
        return show;
      }
      if (!request.legalShows.some((legal) => sameShow(legal, show.value))) {
        return { ok: false, problem: `show ${describeShow(show.value)} is not a legal show` };
      }
      return { ok: true, value: { show: show.value } };
    }
    case "scout": {
      const scout = readScout(raw["scout"], "scout");
      if (!scout.ok) {
        return scout;
      }
      if (!scoutIsListed(request, scout.value)) {
        return { ok: false, problem: `scout ${describeScout(scout.value)} is not a legal scout` };
      }
      return { ok: true, value: { scout: scout.value } };
    }
    default: {
      const both = raw["scoutAndShow"];
      if (!request.scoutAndShowAvailable) {
        return { ok: false, problem: "Scout & Show is not available now" };
      }
      if (!isRecord(both)) {
        return { ok: false, problem: "scoutAndShow is not an object" };
      }
      const scout = readScout(both["scout"], "scoutAndShow.scout");
      if (!scout.ok) {
        return scout;
      }
      const show = readShow(both["show"], "scoutAndShow.show");
      if (!show.ok) {
        return show;
      }
      if (!scoutIsListed(request, scout.value)) {
        return {
          ok: false,
          problem: `the Scout part ${describeScout(scout.value)} is not a legal scout`,
        };
      }
      const size = request.observation.hand.length + 1;
      const { start, length } = show.value;
      if (length < 1 || start < 0 || start + length > size) {
        return {
          ok: false,
          problem: `the Show part ${describeShow(show.value)} is outside the new hand of ${size} cards`,
        };
      }
      return { ok: true, value: { scoutAndShow: { scout: scout.value, show: show.value } } };
    }
  }
}

export function describeShow(show: Show): string {
  return `${show.start}+${show.length}`;
}

export function describeScout(scout: Scout): string {
  const end = scout.end === "END_RIGHT" ? "right" : "left";
  return `${end}${scout.flip ? " flipped" : ""} at ${scout.insertAt}`;
}

/** A short text for logs: "show 3+2", "scout left at 0", "scout&show right flipped at 4, 2+3". */
export function describeAction(action: Action): string {
  if (action.show !== undefined) {
    return `show ${describeShow(action.show)}`;
  }
  if (action.scout !== undefined) {
    return `scout ${describeScout(action.scout)}`;
  }
  const { scout, show } = action.scoutAndShow;
  return `scout&show ${describeScout(scout)}, ${describeShow(show)}`;
}

/** The ActionChoice envelope for an answer (request ids are opaque strings: echoed as given). */
export function actionMessage(matchId: string, requestId: string, action: Action): BotMessage {
  return { action: { matchId, requestId, action } };
}

/** The RotationChoice envelope. */
export function rotationMessage(matchId: string, requestId: string, rotate: boolean): BotMessage {
  return { rotation: { matchId, requestId, rotate } };
}
