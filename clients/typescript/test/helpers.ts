// Builders for test requests.

import type { Card, DecisionRequest, Scout, Show } from "../src/lib";

/** Cards with the given faces (the other value is irrelevant here). */
export function cards(...values: number[]): Card[] {
  return values.map((face) => ({ face, other: face === 10 ? 1 : face + 1 }));
}

export function allScouts(
  handSize: number,
  ends: Scout["end"][] = ["END_LEFT", "END_RIGHT"],
): Scout[] {
  const scouts: Scout[] = [];
  for (const end of ends) {
    for (const flip of [false, true]) {
      for (let insertAt = 0; insertAt <= handSize; insertAt++) {
        scouts.push({ end, flip, insertAt });
      }
    }
  }
  return scouts;
}

export function decision(options: {
  hand: number[];
  active?: number[];
  legalShows?: Show[];
  legalScouts?: Scout[];
  scoutAndShowAvailable?: boolean;
}): DecisionRequest {
  const hand = cards(...options.hand);
  const active = cards(...(options.active ?? []));
  return {
    matchId: "m-1",
    requestId: "7",
    observation: {
      matchId: "m-1",
      seat: 0,
      numPlayers: 3,
      roundIndex: 0,
      numRounds: 3,
      startingSeat: 0,
      hand,
      handSizes: [hand.length, 12, 12],
      activeSet: active,
      ...(active.length > 0 && { activeOwner: 2 }),
      capturedCounts: [0, 0, 0],
      scoutChips: [0, 0, 0],
      scoutShowTokens: [true, true, true],
      scores: [0, 0, 0],
      currentSeat: 0,
      history: [],
    },
    legalShows: options.legalShows ?? [],
    legalScouts: options.legalScouts ?? [],
    scoutAndShowAvailable: options.scoutAndShowAvailable ?? false,
    deadlineMs: 1000,
    timeBankMs: 10000,
  };
}
