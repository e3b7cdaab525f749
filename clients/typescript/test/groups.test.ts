import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  faces,
  groupStrength,
  isGroup,
  isRun,
  isSet,
  rotateHand,
  showFaces,
  showStrength,
} from "../src/lib";
import { cards } from "./helpers";

describe("sets and runs", () => {
  it("a single card is a set, not a run", () => {
    assert.equal(isSet([4]), true);
    assert.equal(isRun([4]), false);
    assert.equal(isGroup([4]), true);
  });
  it("recognises sets", () => {
    assert.equal(isSet([5, 5, 5]), true);
    assert.equal(isSet([5, 5, 6]), false);
    assert.equal(isSet([]), false);
  });
  it("recognises ascending and descending runs of step 1 only", () => {
    assert.equal(isRun([3, 4, 5]), true);
    assert.equal(isRun([8, 7, 6]), true);
    assert.equal(isRun([3, 4, 3]), false);
    assert.equal(isRun([3, 5, 7]), false);
    assert.equal(isRun([9, 2]), false);
    assert.equal(isGroup([2, 9]), false);
  });
});

describe("groupStrength", () => {
  it("follows the engine's formula 32*length + 16*set + lowest", () => {
    assert.equal(groupStrength([5, 5, 5]), 32 * 3 + 16 + 5); // 117, from PROTOCOL.md §5.4
    assert.equal(groupStrength([3, 4, 5, 6]), 131);
    assert.equal(groupStrength([6, 6]), 86);
    assert.equal(groupStrength([7]), 32 + 16 + 7);
  });
  it("orders by length, then set over run, then lowest face", () => {
    assert.ok(groupStrength([1, 2, 3]) > groupStrength([9, 9])); // more cards
    assert.ok(groupStrength([2, 2]) > groupStrength([8, 9])); // set beats run
    assert.ok(groupStrength([5, 6, 7]) > groupStrength([3, 4, 5])); // higher lowest
    assert.ok(groupStrength([8, 8]) > groupStrength([6, 6]));
    assert.equal(groupStrength([4, 3]), groupStrength([3, 4])); // equal does not beat
  });
  it("refuses faces that are not a group", () => {
    assert.throws(() => groupStrength([9, 2]), RangeError);
  });
});

describe("shows", () => {
  const hand = faces(cards(9, 2, 6, 2, 7, 5, 3, 4, 6, 1));
  it("reads the faces at the show's positions", () => {
    assert.deepEqual(showFaces(hand, { start: 6, length: 2 }), [3, 4]);
    assert.equal(showStrength(hand, { start: 6, length: 2 }), 64 + 3);
  });
  it("refuses positions outside the hand", () => {
    assert.throws(() => showFaces(hand, { start: 9, length: 3 }), RangeError);
    assert.throws(() => showFaces(hand, { start: 0, length: 0 }), RangeError);
  });
});

describe("rotateHand", () => {
  it("reverses the order and turns every card (PROTOCOL.md §5.1)", () => {
    const dealt = [
      { face: 3, other: 1 },
      { face: 8, other: 6 },
      { face: 5, other: 9 },
    ];
    assert.deepEqual(rotateHand(dealt), [
      { face: 9, other: 5 },
      { face: 6, other: 8 },
      { face: 1, other: 3 },
    ]);
  });
});
