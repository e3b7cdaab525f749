// Package scout is a small client library for Scout Arena bots written in Go.
//
// A bot implements Bot (or just an ActFunc) and calls Run, which connects to the referee with
// the token in the `authorization: Bearer <token>` metadata, says Hello, and then answers every
// RotationRequest and DecisionRequest of every match the referee seats the bot in, several
// matches at once over the one stream:
//
//	cfg, err := scout.ConfigFromEnv(os.Getenv) // SCOUT_ADDRESS, SCOUT_TOKEN, ...
//	...
//	err = scout.Run(ctx, cfg, scout.ActFunc(func(ctx context.Context, req *scoutv1.DecisionRequest) (*scoutv1.Action, error) {
//		return scout.ShowAction(req.GetLegalShows()[0]), nil // (when there is one)
//	}))
//
// Run keeps time for the bot: when the bot has not answered SafetyMargin before the referee's
// limit (deadline_ms + time_bank_ms), or returns an error or an action that CheckAction
// refuses, it sends the referee's documented fallback, which is always legal. It reconnects
// with exponential backoff when the stream is lost (the referee resumes running matches and
// resends open requests, which Run answers without asking the bot twice), and returns a
// *RejectedError when the referee refuses the bot for good. A MatchAssignment (a ladder with
// referee nodes) makes it play that match on a stream to the node, opened with the
// assignment's ticket, without the bot noticing.
//
// The helpers (GroupStrength, Beats, ShowStrength, HandAfterScout, CheckAction, ...) are the
// few rules a bot needs beyond the referee's legal lists; no rules engine is needed.
//
// The message types are generated from the repository's proto/scout/v1 into package
// github.com/scout-arena/scout-arena/clients/go/gen/scoutv1 at build time (make generate).
package scout
