import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { chooseAction } from "../src/bot";
import { allScouts, decision } from "./helpers";

describe("the example bot", () => {
  it("prefers the longest Show", () => {
    const turn = decision({
      hand: [9, 2, 3, 4, 7, 7],
      legalShows: [
        { start: 0, length: 1 },
        { start: 1, length: 2 },
        { start: 1, length: 3 },
        { start: 4, length: 2 },
      ],
    });
    assert.deepEqual(chooseAction(turn), { show: { start: 1, length: 3 } });
  });
  it("prefers a set to a run of the same length, whatever the values", () => {
    const turn = decision({
      hand: [8, 9, 2, 2],
      legalShows: [
        { start: 0, length: 2 },
        { start: 2, length: 2 },
      ],
    });
    assert.deepEqual(chooseAction(turn), { show: { start: 2, length: 2 } });
  });
  it("then prefers the higher lowest value, reading faces at the show's positions", () => {
    const turn = decision({
      hand: [3, 4, 1, 6, 5],
      legalShows: [
        { start: 0, length: 2 },
        { start: 3, length: 2 },
      ],
    });
    assert.deepEqual(chooseAction(turn), { show: { start: 3, length: 2 } });
  });
  it("keeps the first of equally strong Shows", () => {
    const turn = decision({
      hand: [5, 6, 6, 5],
      legalShows: [
        { start: 0, length: 2 },
        { start: 2, length: 2 },
      ],
    });
    assert.deepEqual(chooseAction(turn), { show: { start: 0, length: 2 } });
  });
  it("scouts with the first legal Scout when no Show is legal", () => {
    const turn = decision({ hand: [1, 9], active: [5, 5, 5], legalScouts: allScouts(2) });
    assert.deepEqual(chooseAction(turn), { scout: { end: "END_LEFT", flip: false, insertAt: 0 } });
  });
});
