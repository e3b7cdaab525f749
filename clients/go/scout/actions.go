package scout

import (
	"errors"
	"fmt"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
)

// ShowAction wraps a Show (for example an entry of DecisionRequest.LegalShows) in an Action.
func ShowAction(show *scoutv1.Show) *scoutv1.Action {
	return &scoutv1.Action{Kind: &scoutv1.Action_Show{Show: show}}
}

// ScoutAction wraps a Scout (for example an entry of DecisionRequest.LegalScouts) in an Action.
func ScoutAction(scout *scoutv1.Scout) *scoutv1.Action {
	return &scoutv1.Action{Kind: &scoutv1.Action_Scout{Scout: scout}}
}

// ScoutAndShowAction builds a Scout & Show; show's positions index the hand after the Scout.
func ScoutAndShowAction(scout *scoutv1.Scout, show *scoutv1.Show) *scoutv1.Action {
	return &scoutv1.Action{Kind: &scoutv1.Action_ScoutAndShow{
		ScoutAndShow: &scoutv1.ScoutAndShow{Scout: scout, Show: show},
	}}
}

// FallbackAction is the referee's documented timeout fallback for req, which is always legal:
// the first legal Show if there is one, otherwise Scout{END_LEFT, flip: false, insert_at: 0}.
func FallbackAction(req *scoutv1.DecisionRequest) *scoutv1.Action {
	if shows := req.GetLegalShows(); len(shows) > 0 {
		return ShowAction(&scoutv1.Show{Start: shows[0].GetStart(), Length: shows[0].GetLength()})
	}
	return ScoutAction(&scoutv1.Scout{End: scoutv1.End_END_LEFT, Flip: false, InsertAt: 0})
}

// IsLegalShow reports whether show is listed in req.LegalShows.
func IsLegalShow(req *scoutv1.DecisionRequest, show *scoutv1.Show) bool {
	for _, s := range req.GetLegalShows() {
		if s.GetStart() == show.GetStart() && s.GetLength() == show.GetLength() {
			return true
		}
	}
	return false
}

// IsLegalScout reports whether scout is listed in req.LegalScouts.
func IsLegalScout(req *scoutv1.DecisionRequest, scout *scoutv1.Scout) bool {
	for _, s := range req.GetLegalScouts() {
		if s.GetEnd() == scout.GetEnd() && s.GetFlip() == scout.GetFlip() &&
			s.GetInsertAt() == scout.GetInsertAt() {
			return true
		}
	}
	return false
}

// CheckAction returns nil when action is a legal answer to req, judged from the request alone:
// a Show or Scout must be listed in the legal lists; a Scout & Show must be available, its
// Scout part listed, and its Show part a group of the hand after the Scout that beats what
// remains of the active set. The client sends the fallback instead of an action that fails
// this check, so a buggy bot loses a decision rather than earning a strike.
func CheckAction(req *scoutv1.DecisionRequest, action *scoutv1.Action) error {
	switch kind := action.GetKind().(type) {
	case *scoutv1.Action_Show:
		if kind.Show == nil || !IsLegalShow(req, kind.Show) {
			return fmt.Errorf("show %d+%d is not among the legal shows",
				kind.Show.GetStart(), kind.Show.GetLength())
		}
		return nil
	case *scoutv1.Action_Scout:
		if kind.Scout == nil || !IsLegalScout(req, kind.Scout) {
			return fmt.Errorf("scout %v/flip=%t/insert_at=%d is not among the legal scouts",
				kind.Scout.GetEnd(), kind.Scout.GetFlip(), kind.Scout.GetInsertAt())
		}
		return nil
	case *scoutv1.Action_ScoutAndShow:
		return checkScoutAndShow(req, kind.ScoutAndShow)
	case nil:
		return errors.New("the action is empty (no Show, Scout or ScoutAndShow)")
	default:
		return fmt.Errorf("unknown action kind %T", kind)
	}
}

func checkScoutAndShow(req *scoutv1.DecisionRequest, ss *scoutv1.ScoutAndShow) error {
	if !req.GetScoutAndShowAvailable() {
		return errors.New("scout & show is not available now")
	}
	if ss.GetScout() == nil || ss.GetShow() == nil {
		return errors.New("a Scout & Show needs both its Scout and its Show part")
	}
	if !IsLegalScout(req, ss.GetScout()) {
		return errors.New("the Scout part of the Scout & Show is not among the legal scouts")
	}
	obs := req.GetObservation()
	hand, rest, err := HandAfterScout(obs.GetHand(), obs.GetActiveSet(), ss.GetScout())
	if err != nil {
		return fmt.Errorf("scout & show: %w", err)
	}
	faces, err := ShowFaces(hand, ss.GetShow())
	if err != nil {
		return fmt.Errorf("scout & show (positions index the hand after the Scout): %w", err)
	}
	if !Beats(faces, Faces(rest)) {
		return fmt.Errorf("scout & show: faces %v are not a group that beats the remaining %v",
			faces, Faces(rest))
	}
	return nil
}
