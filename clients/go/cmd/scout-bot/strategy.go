package main

import (
	"context"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
	"github.com/scout-arena/scout-arena/clients/go/scout"
)

// chooseAction is the bot's brain: REPLACE IT with your own strategy.
//
// It gets every DecisionRequest of every match (possibly for several matches at once, from
// different goroutines) and returns the action to play. req.Observation holds the bot's hand
// and the public state; req.LegalShows and req.LegalScouts list every legal Show and Scout, and
// any entry can be returned as it is (wrapped with scout.ShowAction / scout.ScoutAction). A
// Scout & Show (req.ScoutAndShowAvailable) is built with scout.ScoutAndShowAction; its Show
// positions index the hand after the Scout.
//
// Answer before ctx is done: the client sends the referee's fallback (the first legal Show,
// else the first Scout) shortly before the time runs out, and also when this function returns
// an error or an action that is not legal.
//
// This example needs no rules engine: it plays the strongest legal Show (most cards; at equal
// length a set beats a run; then the higher lowest value), else the first legal Scout.
func chooseAction(ctx context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
	hand := req.GetObservation().GetHand()
	var best *scoutv1.Show
	var bestStrength scout.Strength
	for _, show := range req.GetLegalShows() {
		s, ok := scout.ShowStrength(hand, show)
		if ok && (best == nil || s > bestStrength) {
			best, bestStrength = show, s
		}
	}
	if best != nil {
		return scout.ShowAction(best), nil
	}
	if scouts := req.GetLegalScouts(); len(scouts) > 0 {
		return scout.ScoutAction(scouts[0]), nil
	}
	return scout.FallbackAction(req), nil
}
