// The Scout Arena C++ client: connects to the referee, plays every match the bot is seated in,
// keeps the clocks, and reconnects when the connection drops.
//
//   scout::Options options = ...;                    // e.g. from scout::parse_options
//   scout::Client client(options, [] { return std::make_unique<MyBot>(); });
//   int exit_code = client.run();                     // blocks; client.stop() from another thread
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scout/log.hpp"
#include "scout/v1/arena.pb.h"
#include "scout/v1/game.pb.h"

namespace scout {

inline constexpr std::uint32_t kProtocolVersion = 1;
inline constexpr const char* kKitVersion = "0.1.0";

/// A referee node that cannot be reached for this long in a row (no stream there welcomed for
/// that long) is gone: the kit drops its tickets and lets it go (PROTOCOL.md §3.8, rule 4).
inline constexpr std::chrono::milliseconds kNodeUnreachableAfter = std::chrono::seconds(60);

/// After a Goodbye with reconnect: true (the referee is shutting down), how long the kit keeps
/// reconnecting before it gives up: a referee not back by then was stopped for good (§10.1).
inline constexpr std::chrono::milliseconds kShutdownGiveUp = std::chrono::minutes(15);

/// Connection and runner settings. See parse_options for the environment/flag names.
struct Options {
    std::string address;      // SCOUT_ADDRESS / --address (required)
    std::string token;        // SCOUT_TOKEN / --token (required)
    bool tls = false;         // SCOUT_TLS=1 / --tls (implied by any certificate)
    std::string ca_cert;      // SCOUT_CA_CERT / --ca-cert: PEM file of a CA to trust
    std::string client_cert;  // --client-cert: PEM client certificate (mutual TLS)
    std::string client_key;   // --client-key: PEM client key (mutual TLS)
    std::string bot_name = "cpp-example";  // SCOUT_BOT_NAME / --name (informational)
    std::string bot_version = kKitVersion;
    int concurrency = 8;      // SCOUT_CONCURRENCY / --concurrency: max_concurrent_matches
    int margin_ms = 200;      // --margin-ms: send the fallback this long before deadline + bank
    bool safety_fallback = true;  // --no-fallback: never answer for the bot (testing TIMED_OUT)
    int slow_ms = 0;          // --slow-ms: delay every decision by this much (testing deadlines)
    int max_matches = 0;      // --max-matches: stop after this many matches (0: never)
    // SCOUT_PUBLIC_EVENTS=1 / --public-events: ask for the full stream (every PublicEvent, and an
    // AnswerResult for accepted answers too). Default: a lean stream (PROTOCOL.md §3.6.1).
    bool public_events = false;
    LogLevel log_level = LogLevel::Info;  // -v / -q
    // Not a flag (parse_options never sets it): the kit's tests shorten it. How long a node may
    // stay unreachable before its tickets are dropped.
    std::chrono::milliseconds node_unreachable_after = kNodeUnreachableAfter;
    // --shutdown-give-up-ms: after a Goodbye with reconnect: true, give up reconnecting (run()
    // returns 1) when the referee has not welcomed the bot back within this long.
    std::chrono::milliseconds shutdown_give_up = kShutdownGiveUp;
    // Not a flag: called (from the stream's reader, so keep it quick) when the ladder puts the
    // bot on probation or lifts it (PROTOCOL.md §3.9); the kit logs it either way.
    std::function<void(const v1::Probation&)> on_probation;
};

struct ParsedOptions {
    Options options;
    bool help = false;   // --help was given: print usage() and exit 0
    std::string error;   // non-empty: a one-line start-up error
};

/// Reads SCOUT_ADDRESS, SCOUT_TOKEN, SCOUT_TLS, SCOUT_CA_CERT, SCOUT_BOT_NAME, SCOUT_CONCURRENCY
/// and SCOUT_PUBLIC_EVENTS through `getenv`, then applies the flags in `args` (argv without the
/// program name), which override them. Flags take "--flag value" or "--flag=value".
ParsedOptions parse_options(const std::vector<std::string>& args,
                            const std::function<const char*(const char*)>& getenv);

std::string usage(const std::string& program);

/// The Hello the client opens every stream with: lean (no PublicEvent, no AnswerResult for an
/// accepted answer) unless options.public_events; it always sets accepts_bundles (the client
/// unpacks a RefereeBundle and handles its messages one by one, in order).
v1::BotMessage hello_message(const Options& options);

/// The bot's logic. The kit creates one Bot per match (so per-match state needs no locking)
/// and calls it from that match's worker thread, in the order the referee sent the messages;
/// different matches run in parallel. act/rotate should return well inside deadline_ms: if they
/// have not returned shortly before deadline + bank, the kit sends the documented fallback.
/// Answers that are surely illegal (not in the legal lists) are replaced by the fallback too, and
/// an exception counts as no answer.
class Bot {
public:
    virtual ~Bot() = default;
    /// Your turn: return an Action. Any entry of legal_shows / legal_scouts may be returned as is.
    virtual v1::Action act(const v1::DecisionRequest& request) = 0;
    /// Start of a round: return true to rotate the dealt hand. Default: do not rotate.
    virtual bool rotate(const v1::RotationRequest& /*request*/) { return false; }
    // Optional hooks.
    virtual void on_match_start(const v1::MatchStart& /*start*/) {}
    /// Only on a full stream (Options::public_events): a lean stream carries no PublicEvent, and
    /// each request's observation history tells what happened since the last one.
    virtual void on_event(const v1::PublicEvent& /*event*/) {}
    virtual void on_round_end(const v1::RoundEnded& /*ended*/) {}
    /// Every ending, for every match the bot was seated in: only status FINISHED (or
    /// UNSPECIFIED, an older referee's) carries a result; ABORTED and VOIDED say why in reason.
    virtual void on_match_end(const v1::MatchEnded& /*ended*/) {}
};

/// How a match ended: UNSPECIFIED (an older referee) reads as FINISHED.
v1::MatchEndStatus end_status(const v1::MatchEnded& ended);

using BotFactory = std::function<std::unique_ptr<Bot>()>;
using ActFunction = std::function<v1::Action(const v1::DecisionRequest&)>;

/// A Bot made of a single decision function (rotation: never rotate).
class FunctionBot : public Bot {
public:
    explicit FunctionBot(ActFunction act) : act_(std::move(act)) {}
    v1::Action act(const v1::DecisionRequest& request) override { return act_(request); }

private:
    ActFunction act_;
};

class Client {
public:
    Client(Options options, BotFactory factory);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    /// Connects and plays until stop() is called (returns 0), max_matches matches have ended
    /// (returns 0), the referee says Goodbye with reconnect: false (returns 0), a referee that
    /// said Goodbye with reconnect: true is not back within shutdown_give_up (returns 1), or the referee
    /// rejects the bot for a reason a reconnect cannot fix (UNAUTHENTICATED, INVALID_ARGUMENT,
    /// FAILED_PRECONDITION, ABORTED "superseded", ...): logs one line and returns 1. Connection
    /// losses are retried with backoff; a Goodbye with reconnect: true is followed by a reconnect
    /// after its retry_after_ms (plus a little jitter), which does not count as a failure.
    /// Matches assigned to another referee node (MatchAssignment, PROTOCOL.md §3.8) are played
    /// on a stream to that node, which never stops run().
    int run();

    /// Thread-safe; may be called from any thread (e.g. a signal-waiting thread).
    void stop();

    /// False if some bot call (or the close of a node stream) was still running when run()
    /// returned (the process should then exit without waiting for it).
    bool workers_finished() const;

    class Impl;

private:
    std::shared_ptr<Impl> impl_;
};

}  // namespace scout
