import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  actionMessage,
  checkAction,
  describeAction,
  fallbackAction,
  normalizeEnd,
  rotationMessage,
} from "../src/lib";
import { allScouts, decision } from "./helpers";

describe("fallbackAction", () => {
  it("is the first legal Show when there is one", () => {
    const turn = decision({
      hand: [1, 2, 3],
      legalShows: [
        { start: 0, length: 1 },
        { start: 0, length: 2 },
      ],
    });
    assert.deepEqual(fallbackAction(turn), { show: { start: 0, length: 1 } });
  });
  it("is the first legal Scout otherwise", () => {
    const turn = decision({ hand: [1, 2], active: [5, 5, 5], legalScouts: allScouts(2) });
    assert.deepEqual(fallbackAction(turn), {
      scout: { end: "END_LEFT", flip: false, insertAt: 0 },
    });
  });
  it("is the documented Scout when both lists are empty", () => {
    assert.deepEqual(fallbackAction({ legalShows: [], legalScouts: [] }), {
      scout: { end: "END_LEFT", flip: false, insertAt: 0 },
    });
  });
});

describe("checkAction", () => {
  const turn = decision({
    hand: [9, 2, 6, 2, 7, 5, 3, 4, 6, 1],
    active: [5, 5],
    legalShows: [{ start: 6, length: 2 }],
    legalScouts: allScouts(10),
    scoutAndShowAvailable: true,
  });

  it("accepts listed Shows and Scouts and returns a clean copy", () => {
    assert.deepEqual(checkAction(turn, { show: { start: 6, length: 2, extra: 1 } }), {
      ok: true,
      value: { show: { start: 6, length: 2 } },
    });
    assert.deepEqual(checkAction(turn, { scout: { end: "END_RIGHT", flip: true, insertAt: 10 } }), {
      ok: true,
      value: { scout: { end: "END_RIGHT", flip: true, insertAt: 10 } },
    });
  });
  it("accepts enum numbers and omitted defaults", () => {
    assert.deepEqual(checkAction(turn, { scout: { end: 2 } }), {
      ok: true,
      value: { scout: { end: "END_RIGHT", flip: false, insertAt: 0 } },
    });
  });
  it("refuses unlisted moves", () => {
    assert.equal(checkAction(turn, { show: { start: 0, length: 1 } }).ok, false);
    assert.equal(
      checkAction(turn, { scout: { end: "END_LEFT", flip: false, insertAt: 11 } }).ok,
      false,
    );
    assert.equal(checkAction(turn, { scout: { end: "END_UNSPECIFIED" } }).ok, false);
  });
  it("refuses anything that is not exactly one action", () => {
    assert.equal(checkAction(turn, undefined).ok, false);
    assert.equal(checkAction(turn, {}).ok, false);
    assert.equal(
      checkAction(turn, { show: { start: 6, length: 2 }, scout: allScouts(10)[0] }).ok,
      false,
    );
    assert.equal(checkAction(turn, { show: { start: 6 } }).ok, false);
  });
  it("treats END_RIGHT of a one-card active set as the listed END_LEFT", () => {
    const single = decision({ hand: [1, 2], active: [7], legalScouts: allScouts(2, ["END_LEFT"]) });
    assert.equal(
      checkAction(single, { scout: { end: "END_RIGHT", flip: false, insertAt: 1 } }).ok,
      true,
    );
  });
  it("checks a Scout & Show's parts, indexing the hand after the insertion", () => {
    const scout = { end: "END_LEFT" as const, flip: false, insertAt: 8 };
    assert.equal(
      checkAction(turn, { scoutAndShow: { scout, show: { start: 6, length: 4 } } }).ok,
      true,
    );
    // 11 cards after the insertion: positions 0-10
    assert.equal(
      checkAction(turn, { scoutAndShow: { scout, show: { start: 9, length: 2 } } }).ok,
      true,
    );
    assert.equal(
      checkAction(turn, { scoutAndShow: { scout, show: { start: 9, length: 3 } } }).ok,
      false,
    );
    const unavailable = { ...turn, scoutAndShowAvailable: false };
    assert.equal(
      checkAction(unavailable, { scoutAndShow: { scout, show: { start: 6, length: 4 } } }).ok,
      false,
    );
  });
});

describe("envelopes and descriptions", () => {
  it("echoes match and request ids", () => {
    assert.deepEqual(
      actionMessage("m-9", "18446744073709551615", { show: { start: 1, length: 2 } }),
      {
        action: {
          matchId: "m-9",
          requestId: "18446744073709551615",
          action: { show: { start: 1, length: 2 } },
        },
      },
    );
    assert.deepEqual(rotationMessage("m-9", "3", true), {
      rotation: { matchId: "m-9", requestId: "3", rotate: true },
    });
  });
  it("normalises ends", () => {
    assert.equal(normalizeEnd(1), "END_LEFT");
    assert.equal(normalizeEnd("END_RIGHT"), "END_RIGHT");
    assert.equal(normalizeEnd(7), undefined);
    assert.equal(normalizeEnd("left"), undefined);
  });
  it("describes actions for logs", () => {
    assert.equal(describeAction({ show: { start: 3, length: 2 } }), "show 3+2");
    assert.equal(
      describeAction({
        scoutAndShow: {
          scout: { end: "END_RIGHT", flip: true, insertAt: 4 },
          show: { start: 2, length: 3 },
        },
      }),
      "scout&show right flipped at 4, 2+3",
    );
  });
});
