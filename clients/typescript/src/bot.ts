// =================================================================================================
//  YOUR BOT'S LOGIC LIVES HERE: replace the body of `chooseAction`.
// =================================================================================================
//
// `chooseAction` is called on every turn of every match the bot plays. Everything the seat may
// know is in `turn.observation` (your hand, leftmost first; the active set; hand sizes; scores;
// this round's history); `turn.legalShows` and `turn.legalScouts` list every legal move.
//
// Return one of:
//   { show: turn.legalShows[i] }                    play hand[start .. start+length-1]
//   { scout: turn.legalScouts[j] }                  take an end card of the active set
//   { scoutAndShow: { scout, show } }               3-5 players, once a round, when
//                                                   turn.scoutAndShowAvailable; the show's
//                                                   positions index the hand AFTER the insertion
//
// You may also return a Promise (an `async` function). Answer within turn.deadlineMs: if you are
// still thinking shortly before deadline + time bank, the kit sends the fallback (the first legal
// Show, else the first legal Scout) for you, and an answer that is not legal is replaced by it.
//
// Rotating the dealt hand and watching public events are optional hooks: see `Bot` in
// src/lib/client.ts and the object built in src/main.ts.

import {
  faces,
  fallbackAction,
  showStrength,
  type Action,
  type DecisionRequest,
  type Show,
} from "./lib";

/**
 * The example strategy, no rules engine needed: the strongest legal Show — most cards; at equal
 * length a set beats a run; then the higher lowest value — else the first legal Scout.
 */
export function chooseAction(turn: DecisionRequest): Action {
  const hand = faces(turn.observation.hand);

  let best: Show | undefined;
  let bestStrength = -1;
  for (const show of turn.legalShows) {
    // 32*length + 16 if it is a set + its lowest face, computed from hand[start .. start+length-1].
    const strength = showStrength(hand, show);
    if (strength > bestStrength) {
      best = show;
      bestStrength = strength;
    }
  }
  if (best !== undefined) {
    return { show: best };
  }

  const scout = turn.legalScouts[0];
  if (scout !== undefined) {
    return { scout };
  }
  return fallbackAction(turn); // not reached: the referee always lists at least one legal move
}
