// Small pure helpers about groups of cards. They judge nothing: the referee's legal lists say
// what may be played; these only help a bot compare the options it was given.

import type { Card, Show } from "./proto";

/** The faces (values in play) of some cards. */
export function faces(cards: readonly Card[]): number[] {
  return cards.map((card) => card.face);
}

/** A set: one or more equal faces (a single card is a set). */
export function isSet(values: readonly number[]): boolean {
  return values.length >= 1 && values.every((value) => value === values[0]);
}

/** A run: two or more faces stepping by exactly +1, or exactly -1. */
export function isRun(values: readonly number[]): boolean {
  if (values.length < 2) {
    return false;
  }
  const step = values[1]! - values[0]!;
  if (step !== 1 && step !== -1) {
    return false;
  }
  return values.every((value, i) => i === 0 || value - values[i - 1]! === step);
}

/** A set or a run. */
export function isGroup(values: readonly number[]): boolean {
  return isSet(values) || isRun(values);
}

/**
 * The engine's strength of a group: `32*length + (16 if set) + lowest face`. More cards beat
 * fewer; at equal length a set beats a run; then the higher lowest face wins. Group `a` beats
 * group `b` iff `groupStrength(a) > groupStrength(b)`. Throws when the faces are not a group.
 */
export function groupStrength(values: readonly number[]): number {
  if (!isGroup(values)) {
    throw new RangeError(`faces ${values.join(",")} are neither a set nor a run`);
  }
  return 32 * values.length + (isSet(values) ? 16 : 0) + Math.min(...values);
}

/** The faces a Show would play from a hand: `handFaces[start .. start+length-1]`. */
export function showFaces(handFaces: readonly number[], show: Show): number[] {
  if (show.length < 1 || show.start < 0 || show.start + show.length > handFaces.length) {
    throw new RangeError(
      `show ${show.start}+${show.length} is outside a hand of ${handFaces.length} cards`,
    );
  }
  return handFaces.slice(show.start, show.start + show.length);
}

/** The strength of a Show of the given hand (see `groupStrength`). */
export function showStrength(handFaces: readonly number[], show: Show): number {
  return groupStrength(showFaces(handFaces, show));
}

/** The hand after a 180° rotation: order reversed and every card turned. */
export function rotateHand(hand: readonly Card[]): Card[] {
  return hand
    .slice()
    .reverse()
    .map((card) => ({ face: card.other, other: card.face }));
}
