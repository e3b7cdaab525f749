//! The trait a bot author implements.

use crate::proto::{
    Action, AnswerResult, DecisionRequest, MatchEnded, MatchStart, Probation, PublicEvent,
    RotationRequest, RoundEnded,
};

/// A SCOUT bot: one [`decide`](Bot::decide) method, plus optional hooks.
///
/// One value plays every match of the process, several at once, so methods take `&self`:
/// keep per-match state behind a `Mutex`, keyed by `match_id`.
///
/// `decide` and `choose_rotation` run on a blocking worker thread and may take their time; the
/// client answers with the referee's fallback when they overrun (or panic, or return an action
/// that is not legal), so a slow or buggy bot loses a decision rather than earning a strike.
/// The hooks (`on_*`) run on the client's tasks, in the order the referee sent the messages of
/// each match: keep them quick (bookkeeping only).
pub trait Bot: Send + Sync + 'static {
    /// Choose the action for this turn. Any entry of `request.legal_shows` or
    /// `request.legal_scouts` may be returned as it is (`Action::from(show)`); a Scout & Show
    /// (when `request.scout_and_show_available`) is built by the bot, its Show part indexing
    /// the hand after the scouted card was inserted.
    fn decide(&self, request: &DecisionRequest) -> Action;

    /// Whether to rotate the dealt hand (`request.hand`, before rotation) 180 degrees.
    fn choose_rotation(&self, _request: &RotationRequest) -> bool {
        false
    }

    /// A match begins, or resumes after a reconnect (`start.resumed`): rebuild its state then.
    fn on_match_start(&self, _start: &MatchStart) {}

    /// An action by any seat, this bot's own included. Only called on a full stream: return
    /// `true` from [`wants_public_events`](Bot::wants_public_events) (or set
    /// `Config::public_events`) to get one; on the default lean stream the referee sends no
    /// `PublicEvent`, and each request's `observation.history` tells what happened since.
    fn on_event(&self, _event: &PublicEvent) {}

    /// Whether this bot needs every `PublicEvent` (and an `AnswerResult` for accepted answers
    /// too): `true` makes the client ask for the full stream (`Hello.lean = false`). Default:
    /// `false`, a lean stream (PROTOCOL.md §3.6.1).
    fn wants_public_events(&self) -> bool {
        false
    }

    /// A round ended; every hand is revealed.
    fn on_round_end(&self, _round: &RoundEnded) {}

    /// A match ended: drop its per-match state here. Only `MatchEndStatus::Finished` (or
    /// `Unspecified`, an older referee's) carries a result; an aborted or voided match has none
    /// and `end.reason` says why. See [`crate::end_status`].
    fn on_match_end(&self, _end: &MatchEnded) {}

    /// The ladder put the bot on probation (`probation.active`: no matches are scheduled for
    /// it; `reason` says why) or lifted it. The client logs it either way.
    fn on_probation(&self, _probation: &Probation) {}

    /// The referee judged one of this bot's answers (or timed a request out). The client has
    /// already reacted (after ILLEGAL/MALFORMED it sends the fallback while time remains). On
    /// the default lean stream only rejections and timeouts come: an accepted answer gets no
    /// result, and the next request is the sign it was played.
    fn on_answer_result(&self, _result: &AnswerResult) {}
}
