package scout

import (
	"context"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
)

// Bot makes a bot's decisions. The client calls it from several goroutines at once when the
// bot plays several matches; calls for one match overlap only when an earlier call ignored its
// cancelled context and is still running.
//
// Each call gets a context that is cancelled shortly before the referee's limit (deadline +
// time bank, less Config.SafetyMargin), when the match ends, or when the client stops. A bot
// that is still thinking then has lost the decision: the client has already sent the
// documented fallback. Returning an error, panicking, or returning an action that is not legal
// (see CheckAction) also makes the client send the fallback, so a buggy bot loses a decision
// rather than earning a strike.
type Bot interface {
	// ChooseRotation answers a RotationRequest: true rotates the dealt hand req.Hand.
	ChooseRotation(ctx context.Context, req *scoutv1.RotationRequest) (bool, error)
	// Act answers a DecisionRequest with an Action: an entry of req.LegalShows or
	// req.LegalScouts wrapped with ShowAction/ScoutAction, or a Scout & Show it builds.
	Act(ctx context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error)
}

// ActFunc turns a function into a Bot that never rotates its hand.
type ActFunc func(ctx context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error)

// ChooseRotation implements Bot: it keeps the dealt hand as it is.
func (ActFunc) ChooseRotation(context.Context, *scoutv1.RotationRequest) (bool, error) {
	return false, nil
}

// Act implements Bot by calling f.
func (f ActFunc) Act(ctx context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
	return f(ctx, req)
}

// Observer is an optional interface of a Bot that wants to see the rest of a match:
// MatchStart, AnswerResult, PublicEvent, RoundEnded and MatchEnded, in the order the referee
// sent them for that match. Observe runs on the match's own goroutine (it must return soon;
// a slow Observe delays that match's requests) and may overlap Act/ChooseRotation of the same
// match, so guard state shared between them.
//
// By default the client asks for a lean stream (PROTOCOL.md §3.6.1): the referee then sends no
// PublicEvent and no AnswerResult for an accepted answer (rejections and TIMED_OUT still come),
// and each DecisionRequest's Observation.History tells what happened since. Set
// Config.PublicEvents (--public-events, SCOUT_PUBLIC_EVENTS=1) to observe every event.
type Observer interface {
	Observe(ctx context.Context, msg *scoutv1.RefereeMessage)
}

// ProbationObserver is an optional interface of a Bot that wants to know when the ladder puts
// it on probation (no matches are scheduled for it) or lifts it (PROTOCOL.md §3.9). The client
// logs every Probation message either way; OnProbation runs on the stream's reader, so it must
// return soon.
type ProbationObserver interface {
	OnProbation(p *scoutv1.Probation)
}
