// Pure helpers (no I/O, no threads): card groups, the documented fallback, answer checks,
// reconnect backoff, status classification and the tickets of assigned matches. Unit-tested in
// test/unit_tests.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "scout/v1/arena.pb.h"
#include "scout/v1/game.pb.h"

namespace scout {

using Hand = google::protobuf::RepeatedPtrField<v1::Card>;

/// True if `faces` is a set (all equal, a single card included) or a run (2+ faces stepping by
/// exactly +1 or exactly -1).
bool is_group(const std::vector<int>& faces);

/// True if every face is equal (a single card is a set).
bool is_set(const std::vector<int>& faces);

/// The engine's strength formula: 32*length + (16 if set) + lowest face. A group beats another
/// iff its strength is higher. 0 for an empty group.
int group_strength(const std::vector<int>& faces);

/// Faces of hand[start : start+length]; empty if the range is outside the hand.
std::vector<int> faces_at(const Hand& hand, int start, int length);

/// Strength of a Show against `hand` (computed from the faces at its positions), or -1 if the
/// positions are outside the hand.
int show_strength(const Hand& hand, const v1::Show& show);

/// The referee's documented fallback: the first legal Show, else Scout{END_LEFT, false, 0}.
v1::Action fallback_action(const v1::DecisionRequest& request);

bool same_show(const v1::Show& a, const v1::Show& b);
bool same_scout(const v1::Scout& a, const v1::Scout& b);

/// Why `action` would surely be rejected for `request` (not among the legal lists, Scout & Show
/// not available, Show part out of range), or nullopt if it may be sent. The Show part of a
/// Scout & Show is only range-checked: the referee has the last word on it.
std::optional<std::string> check_action(const v1::Action& action,
                                        const v1::DecisionRequest& request);

/// Short text form of an action for logs, e.g. "show(3,2)" or "scout(L,flip,4)".
std::string describe(const v1::Action& action);

/// Reconnect delay before attempt `attempt` (0-based): 200 ms doubling up to 5 s, scaled by a
/// jitter factor 0.5 + 0.5*unit_random (unit_random in [0, 1)).
std::chrono::milliseconds backoff_delay(int attempt, double unit_random);

/// The wait before reconnecting after a Goodbye with reconnect: true (PROTOCOL.md §10.1): the
/// referee's retry_after_ms plus a little jitter, (retry_after_ms/10 + 100 ms) * unit_random, so
/// that many bots do not come back at the same instant. Not a failure: no backoff step.
std::chrono::milliseconds goodbye_delay(std::uint32_t retry_after_ms, double unit_random);

/// How long the bot may take for a request before the kit sends the fallback itself:
/// deadline + bank - margin (never negative). With use_bank=false the bank is not drawn on.
std::chrono::milliseconds answer_budget(std::uint32_t deadline_ms, std::uint32_t time_bank_ms,
                                        int margin_ms, bool use_bank = true);

/// Statuses that reconnecting cannot fix: UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT,
/// FAILED_PRECONDITION, UNIMPLEMENTED and ABORTED "superseded ...". Everything else
/// (UNAVAILABLE, CANCELLED, INTERNAL, DEADLINE_EXCEEDED, OK, ...) is worth a reconnect.
bool is_permanent_rejection(grpc::StatusCode code, const std::string& details);

/// "UNAUTHENTICATED", "UNAVAILABLE", ...
std::string status_code_name(grpc::StatusCode code);

/// The tickets of the assigned matches that have not ended, per node address (PROTOCOL.md
/// §3.8): what a node stream is (re)opened with. Not thread-safe (the client guards it).
class NodeTickets {
public:
    /// A MatchAssignment: `ticket` opens a stream to `address` until `match_id` ends. A fresh
    /// ticket for a match already held replaces the old one and becomes the newest.
    void add(const std::string& address, const std::string& match_id, const std::string& ticket);
    /// The match ended (or was given up): its ticket opens nothing any more.
    void end_match(const std::string& match_id);
    /// The node refused `ticket` (UNAUTHENTICATED): drop it, so that the next one is tried.
    void refuse(const std::string& address, const std::string& ticket);
    /// The ticket to (re)open a stream to `address` with: the newest one held, if any.
    std::optional<std::string> newest(const std::string& address) const;
    /// The node at `address` is gone (unreachable for too long): drop all its tickets. Returns
    /// how many were dropped.
    std::size_t drop_address(const std::string& address);

private:
    struct Held {
        std::string match_id;
        std::string ticket;
    };
    std::map<std::string, std::vector<Held>> by_address_;  // oldest first
};

}  // namespace scout
