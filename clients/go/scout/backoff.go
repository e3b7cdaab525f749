package scout

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// Reconnect backoff of the launch convention: 0.2 s doubling up to 5 s, with jitter.
const (
	BackoffInitial = 200 * time.Millisecond
	BackoffMax     = 5 * time.Second
)

// NodeGoneAfter is how long a referee node may be unreachable in a row (no stream there
// welcomed for that long) before the bot drops its tickets for that address and lets the node
// go (PROTOCOL.md §3.8 rule 4): by then the ladder has voided those matches, and a seat's
// reconnect grace is over anyway.
const NodeGoneAfter = 60 * time.Second

// nodeLastTry is the least time a node stream attempt gets to be welcomed, even when the node
// has been unreachable for NodeGoneAfter already (e.g. the deadline passed during a backoff
// sleep): giving up is decided by an attempt that failed, not by the clock alone.
const nodeLastTry = 2 * time.Second

// BackoffDelay returns how long to wait before reconnect attempt (0-based): BackoffInitial
// doubling up to BackoffMax, scaled by a jitter factor between 0.5 and 1 taken from
// rand01 (a number in [0, 1), e.g. rand.Float64), so many bots of one host do not reconnect in
// lockstep.
func BackoffDelay(attempt int, rand01 func() float64) time.Duration {
	step := BackoffMax
	if attempt < 5 { // 0.2 s << 5 already exceeds 5 s
		step = min(BackoffMax, BackoffInitial<<max(attempt, 0))
	}
	return time.Duration(float64(step) * (0.5 + 0.5*rand01()))
}

// GoodbyeDelay returns how long to wait before reconnecting after a Goodbye with reconnect:
// true (PROTOCOL.md §10.1): the referee's retry_after_ms plus a little jitter (up to a tenth of
// it, plus 100 ms, scaled by rand01), so that many bots do not come back at the same instant.
// It is not a failure and does not grow the backoff.
func GoodbyeDelay(retryAfterMs uint32, rand01 func() float64) time.Duration {
	base := time.Duration(retryAfterMs) * time.Millisecond
	return base + time.Duration(float64(base/10+100*time.Millisecond)*rand01())
}

// IsRejection reports whether a Play call that ended with code and details is a refusal that
// reconnecting cannot fix: a bad token, a client that breaks the protocol, or another process
// that took over the token (ABORTED "superseded"; reconnecting would take it back and forth).
func IsRejection(code codes.Code, details string) bool {
	switch code {
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument,
		codes.FailedPrecondition, codes.Unimplemented:
		return true
	case codes.Aborted:
		return strings.Contains(strings.ToLower(details), "superseded")
	}
	return false
}

// RejectedError is returned by Run when the referee refused the bot for a reason that
// reconnecting cannot fix.
type RejectedError struct {
	Code    codes.Code
	Details string
	// ProtocolError is the referee's last ProtocolError on the stream, if any.
	ProtocolError string
}

func (e *RejectedError) Error() string {
	msg := fmt.Sprintf("the referee rejected the connection (%s): %s", e.Code, e.Details)
	if e.ProtocolError != "" && !strings.Contains(msg, e.ProtocolError) {
		msg += " [" + e.ProtocolError + "]"
	}
	return msg
}
