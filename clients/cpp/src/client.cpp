// The runner behind scout::Client.
//
// Threads:
//   - run() thread: owns the main Play stream (to Options::address, with the bot's token); reads
//     it and routes every message (never blocks on the bot). Reconnects with backoff when the
//     stream ends.
//   - one thread per referee node the bot was assigned matches on (PROTOCOL.md §3.8): owns the
//     Play stream to that node (opened with a ticket), reads and routes it like the main one, and
//     reopens it with the newest ticket of an unfinished match there; with none left it ends,
//     and so it does, dropping the node's tickets, when no stream there has been welcomed for
//     Options::node_unreachable_after (60 s: the node is gone).
//   - one worker thread per running match: calls the Bot for that match's messages, in order.
//   - a watchdog thread: sends the documented fallback for any request the bot has not answered
//     `margin_ms` before deadline + bank, and cancels a call if a graceful close stalls.
// Each stream's endpoint is a Link; a request's answer goes back on the Link that carried it.
// The client asks for a lean stream (Hello.lean, PROTOCOL.md §3.6.1) unless Options::public_events:
// the referee then sends no PublicEvent and no AnswerResult for an accepted answer. Nothing here
// waits for ACCEPTED: an answered request stays open until a verdict closes it (TIMED_OUT) or the
// match moves on (its next request, its RoundEnded, its MatchEnded); a rejection (ILLEGAL,
// MALFORMED) keeps it open.
// Hello also sets accepts_bundles (PROTOCOL.md §3.6.2): a RefereeBundle is unpacked by dispatch(),
// each inner message taking the path it would take alone, with the bundle's arrival time.
// A stream the referee ends on purpose carries a Goodbye last (PROTOCOL.md §10.1); on the main
// stream it overrides the status the call ends with: reconnect: false ends run() with 0,
// reconnect: true reconnects after retry_after_ms plus jitter, without growing the backoff. A node
// stream's end or Goodbye never stops the bot: the node is reopened while a ticket is left (and
// it has not been unreachable for 60 s).
// Writes to a stream are serialised by its Link's stream_mutex. Request/match/ticket bookkeeping
// is guarded by mutex_. mutex_ is never held while taking a stream_mutex or context_mutex (or
// while writing).

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "scout/client.hpp"
#include "scout/helpers.hpp"
#include "scout/v1/arena.grpc.pb.h"

namespace scout {

using Clock = std::chrono::steady_clock;
using Stream = grpc::ClientReaderWriter<v1::BotMessage, v1::RefereeMessage>;

namespace {

constexpr int kKeepaliveMs = 25'000;
constexpr int kKeepaliveTimeoutMs = 10'000;
constexpr int kMaxSendBytes = 64 * 1024;
constexpr int kMaxReceiveBytes = 16 * 1024 * 1024;
constexpr auto kCloseGrace = std::chrono::seconds(1);
constexpr auto kWorkerGrace = std::chrono::seconds(1);
constexpr std::size_t kEndedRemembered = 1024;

using Key = std::pair<std::string, std::uint64_t>;

/// One Play stream's endpoint: the main referee, or a node that hosts assigned matches. The
/// channel is kept; the stream is replaced at each (re)connect.
struct Link {
    std::string address;
    bool main = false;
    Clock::time_point created = Clock::now();
    std::unique_ptr<v1::Arena::Stub> stub;
    std::atomic<std::uint64_t> connection{0};  // id of the current stream (unique over all links)
    std::atomic<bool> welcomed{false};         // a Welcome came on the current stream

    // The live stream, guarded by stream_mutex (timed, so that stop() cannot hang behind a
    // write stuck on flow control), and its call context, guarded by context_mutex.
    std::timed_mutex stream_mutex;
    Stream* stream = nullptr;
    bool writes_done = false;
    std::mutex context_mutex;
    grpc::ClientContext* context = nullptr;

    // Guarded by Client::Impl::mutex_.
    std::optional<Clock::time_point> cancel_at;
    std::optional<v1::ProtocolError> last_error;
    std::optional<v1::Goodbye> goodbye;  // the current stream's Goodbye, once it came

    std::string name() const { return main ? "the referee" : "node " + address; }
};

/// What the runner remembers of one request until its match ends.
struct Pending {
    std::shared_ptr<Link> link;  // the stream that carried the request: the answer goes there
    Clock::time_point received;
    Clock::time_point expires;  // when the kit sends the fallback itself
    v1::BotMessage fallback;
    std::optional<v1::BotMessage> answer;  // what we decided to send (bot's answer or fallback)
    std::uint64_t sent_on = 0;             // connection the answer was written on (0: not yet)
    bool fallback_sent = false;
    bool closed = false;  // TIMED_OUT, ACCEPTED (full streams), or the match moved on
};

/// One running match: its bot and the queue its worker drains.
struct Match {
    std::string id;
    std::shared_ptr<Link> link;  // the stream its messages come on
    std::unique_ptr<Bot> bot;
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<v1::RefereeMessage> inbox;
    bool closed = false;  // no more messages; the worker exits once the inbox is empty

    void push(v1::RefereeMessage message) {
        {
            std::lock_guard lock(mutex);
            inbox.push_back(std::move(message));
        }
        cv.notify_one();
    }
    void close(bool drop) {
        {
            std::lock_guard lock(mutex);
            closed = true;
            if (drop) inbox.clear();
        }
        cv.notify_one();
    }
    std::optional<v1::RefereeMessage> pop() {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return closed || !inbox.empty(); });
        if (inbox.empty()) return std::nullopt;
        v1::RefereeMessage message = std::move(inbox.front());
        inbox.pop_front();
        return message;
    }
};

const std::string& match_id_of(const v1::RefereeMessage& m) {
    switch (m.body_case()) {
        case v1::RefereeMessage::kMatchStart: return m.match_start().match_id();
        case v1::RefereeMessage::kRotationRequest: return m.rotation_request().match_id();
        case v1::RefereeMessage::kDecisionRequest: return m.decision_request().match_id();
        case v1::RefereeMessage::kAnswerResult: return m.answer_result().match_id();
        case v1::RefereeMessage::kPublicEvent: return m.public_event().match_id();
        case v1::RefereeMessage::kRoundEnded: return m.round_ended().match_id();
        case v1::RefereeMessage::kMatchEnded: return m.match_ended().match_id();
        default: break;
    }
    static const std::string empty;
    return empty;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream data;
    data << in.rdbuf();
    return data.str();
}

template <class T>
std::string join(const google::protobuf::RepeatedField<T>& values) {
    std::ostringstream out;
    out << "[";
    for (int i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values.Get(i);
    out << "]";
    return out.str();
}

std::string answer_status_name(v1::AnswerStatus status) {
    const std::string& name = v1::AnswerStatus_Name(status);
    return name.empty() ? std::to_string(static_cast<int>(status))
                        : name.substr(std::string("ANSWER_STATUS_").size());
}

v1::BotMessage action_message(const std::string& match_id, std::uint64_t request_id,
                              v1::Action action) {
    v1::BotMessage message;
    auto* choice = message.mutable_action();
    choice->set_match_id(match_id);
    choice->set_request_id(request_id);
    *choice->mutable_action() = std::move(action);
    return message;
}

v1::BotMessage rotation_message(const std::string& match_id, std::uint64_t request_id,
                                bool rotate) {
    v1::BotMessage message;
    auto* choice = message.mutable_rotation();
    choice->set_match_id(match_id);
    choice->set_request_id(request_id);
    choice->set_rotate(rotate);
    return message;
}

std::string where(const Key& key) {
    return "match " + key.first + ", request " + std::to_string(key.second);
}

void log_match_end(const v1::MatchEnded& ended) {
    const v1::MatchEndStatus status = end_status(ended);
    std::string how = v1::MatchEndStatus_Name(status);
    how.erase(0, std::string("MATCH_END_STATUS_").size());
    if (status != v1::MATCH_END_STATUS_FINISHED) {
        log_warning("match ", ended.match_id(), " ended ", how, " without a result: ",
                    ended.reason());
        return;
    }
    log_info("match ", ended.match_id(), " ended ", how, ": totals ", join(ended.totals()),
             ", ranks ", join(ended.ranks()), ended.forfeited_seats_size() ? ", forfeited " : "",
             ended.forfeited_seats_size() ? join(ended.forfeited_seats()) : "");
}

}  // namespace

v1::MatchEndStatus end_status(const v1::MatchEnded& ended) {
    return ended.status() == v1::MATCH_END_STATUS_UNSPECIFIED ? v1::MATCH_END_STATUS_FINISHED
                                                              : ended.status();
}

class Client::Impl : public std::enable_shared_from_this<Client::Impl> {
public:
    Impl(Options options, BotFactory factory)
        : options_(std::move(options)), factory_(std::move(factory)) {}

    int run();
    void stop();
    bool workers_finished() {
        std::lock_guard lock(mutex_);
        return live_workers_ == 0 && live_nodes_ == 0;
    }

private:
    std::shared_ptr<Link> make_link(const std::string& address, bool tls, bool main) const;
    std::vector<std::shared_ptr<Link>> links_locked() const;
    grpc::Status session(const std::shared_ptr<Link>& link, const std::string& bearer,
                         bool& welcomed);
    std::uint64_t write(Link& link, const v1::BotMessage& message);
    void deliver(Link& link, const Key& key, const v1::BotMessage& message);

    void follow_node(const std::shared_ptr<Link>& node);
    std::optional<std::string> node_ticket(const Link& node);

    void dispatch(const std::shared_ptr<Link>& link, v1::RefereeMessage message,
                  Clock::time_point received);
    void on_welcome(const Link& link, const v1::Welcome& welcome);
    void on_goodbye(Link& link, const v1::Goodbye& goodbye);
    void on_probation(const v1::Probation& probation);
    void on_assignment(const v1::MatchAssignment& assignment);
    void half_close_then_cancel(Link& link);
    void on_answer_result(const std::shared_ptr<Link>& link, const v1::AnswerResult& result);
    void route(const std::shared_ptr<Link>& link, v1::RefereeMessage message,
               Clock::time_point received);
    bool open_request_locked(const std::shared_ptr<Link>& link, const Key& key,
                             std::uint32_t deadline_ms, std::uint32_t bank_ms,
                             v1::BotMessage fallback, Clock::time_point received,
                             std::optional<v1::BotMessage>& resend);
    void end_match_locked(const std::string& match_id, bool drop);
    void close_latest_locked(const std::string& match_id);

    void work(const std::shared_ptr<Match>& match);
    void answer_request(Match& match, const v1::RefereeMessage& message);
    void watchdog();

    Options options_;
    BotFactory factory_;
    std::atomic<bool> stopping_{false};
    std::atomic<std::uint64_t> connections_{0};  // streams opened so far, over all links

    // Bookkeeping, guarded by mutex_; cv_ wakes the watchdog, backoff waits and slow bots.
    std::mutex mutex_;
    std::condition_variable cv_;
    std::shared_ptr<Link> main_;
    std::map<std::string, std::shared_ptr<Link>> nodes_;  // by address, while its thread runs
    NodeTickets tickets_;
    std::map<std::string, std::shared_ptr<Match>> matches_;
    std::map<Key, Pending> pending_;
    std::map<std::string, std::uint64_t> latest_;  // each match's newest request id
    std::set<std::string> ended_;
    std::deque<std::string> ended_order_;
    int finished_ = 0;
    int live_workers_ = 0;
    int live_nodes_ = 0;
    bool watchdog_exit_ = false;
};

// --- connection ---------------------------------------------------------------------------------

std::shared_ptr<Link> Client::Impl::make_link(const std::string& address, bool tls,
                                              bool main) const {
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (tls) {
        grpc::SslCredentialsOptions ssl;
        if (!options_.ca_cert.empty()) ssl.pem_root_certs = read_file(options_.ca_cert);
        if (!options_.client_cert.empty()) {
            ssl.pem_cert_chain = read_file(options_.client_cert);
            ssl.pem_private_key = read_file(options_.client_key);
        }
        credentials = grpc::SslCredentials(ssl);
    } else {
        credentials = grpc::InsecureChannelCredentials();
    }
    grpc::ChannelArguments args;
    // Keepalive the referee permits (>= 10 s), also while no match runs.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    args.SetMaxSendMessageSize(kMaxSendBytes);
    args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
    args.SetUserAgentPrefix(std::string("scout-arena-cpp/") + kKitVersion);
    auto link = std::make_shared<Link>();
    link->address = address;
    link->main = main;
    link->stub = v1::Arena::NewStub(grpc::CreateCustomChannel(address, credentials, args));
    return link;
}

std::vector<std::shared_ptr<Link>> Client::Impl::links_locked() const {
    std::vector<std::shared_ptr<Link>> links;
    if (main_ != nullptr) links.push_back(main_);
    for (const auto& entry : nodes_) links.push_back(entry.second);
    return links;
}

int Client::Impl::run() {
    set_log_level(options_.log_level);
    std::shared_ptr<Link> main;
    try {
        main = make_link(options_.address, options_.tls, /*main=*/true);
    } catch (const std::exception& error) {
        log_error("cannot set up the connection: ", error.what());
        return 1;
    }
    {
        std::lock_guard lock(mutex_);
        main_ = main;
    }
    std::thread watchdog_thread([this] { watchdog(); });

    std::mt19937_64 rng(std::random_device{}());
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    int exit_code = 0;
    int attempt = 0;
    // Since a Goodbye with reconnect: true that no Welcome has followed yet: the bot gives up
    // options_.shutdown_give_up after it.
    bool shut_down = false;
    Clock::time_point shutdown_since;
    while (!stopping_) {
        bool welcomed = false;
        const grpc::Status status = session(main, options_.token, welcomed);
        if (stopping_) break;
        if (welcomed) shut_down = false;
        std::optional<v1::Goodbye> goodbye;
        {
            std::lock_guard lock(mutex_);
            goodbye.swap(main->goodbye);
        }
        if (goodbye) {
            // A planned end of the stream: it overrides whatever status the call ended with.
            if (!goodbye->reconnect()) {
                log_info("the referee does not want the bot back; stopping");
                break;
            }
            attempt = 0;  // not a failure: the backoff starts afresh
            if (!shut_down) {
                shut_down = true;
                shutdown_since = Clock::now();
            }
            const auto delay = goodbye_delay(goodbye->retry_after_ms(), unit(rng));
            log_info("reconnecting in ", delay.count() / 1000.0, " s, as the referee asked");
            std::unique_lock lock(mutex_);
            cv_.wait_for(lock, delay, [&] { return stopping_.load(); });
            continue;
        }
        const std::string code = status_code_name(status.error_code());
        const std::string& details = status.error_message();
        if (is_permanent_rejection(status.error_code(), details)) {
            std::string line = "the referee rejected the connection (" + code + "): " +
                               (details.empty() ? "no details" : details);
            std::lock_guard lock(mutex_);
            if (main->last_error && line.find(main->last_error->message()) == std::string::npos) {
                line += " [" + v1::ErrorCode_Name(main->last_error->code()) + ": " +
                        main->last_error->message() + "]";
            }
            log_error(line);
            exit_code = 1;
            break;
        }
        if (welcomed) attempt = 0;
        if (shut_down && Clock::now() - shutdown_since >= options_.shutdown_give_up) {
            log_error("the referee did not come back within ",
                      options_.shutdown_give_up.count() / 1000.0,
                      " s of its shutdown goodbye; giving up (", code,
                      details.empty() ? "" : ": ", details, ")");
            exit_code = 1;
            break;
        }
        const auto delay = backoff_delay(attempt++, unit(rng));
        log_warning("connection lost (", code, details.empty() ? "" : ": ", details,
                    "); reconnecting in ", delay.count() / 1000.0, " s");
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, delay, [&] { return stopping_.load(); });
    }

    // Shut down: the node streams (closed gracefully, like the main one on stop()), the
    // watchdog, then the match workers (a bot call that does not return within the grace is left
    // behind; workers_finished() then says so).
    stop();
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, kCloseGrace + kWorkerGrace, [&] { return live_nodes_ == 0; });
    if (live_nodes_ > 0) log_warning(live_nodes_, " node stream(s) still open at exit");
    watchdog_exit_ = true;
    for (auto& [id, match] : matches_) match->close(/*drop=*/true);
    matches_.clear();
    cv_.notify_all();
    lock.unlock();
    watchdog_thread.join();
    lock.lock();
    cv_.wait_for(lock, kWorkerGrace, [&] { return live_workers_ == 0; });
    if (live_workers_ > 0) log_warning(live_workers_, " bot call(s) still running at exit");
    // On a rejection the error above is the one line a launcher shows.
    log(exit_code == 0 ? LogLevel::Info : LogLevel::Debug, "stopped after ", finished_,
        " match(es)");
    return exit_code;
}

void Client::Impl::stop() {
    if (stopping_.exchange(true)) return;
    std::vector<std::shared_ptr<Link>> links;
    {
        std::lock_guard lock(mutex_);
        links = links_locked();
    }
    for (const auto& link : links) half_close_then_cancel(*link);
}

void Client::Impl::half_close_then_cancel(Link& link) {
    {
        // Half-close: the referee then ends the call; the watchdog cancels it if it does not.
        std::unique_lock lock(link.stream_mutex, std::chrono::milliseconds(200));
        if (lock.owns_lock() && link.stream != nullptr && !link.writes_done) {
            link.writes_done = true;
            link.stream->WritesDone();
        }
    }
    std::lock_guard lock(mutex_);
    link.cancel_at = Clock::now() + kCloseGrace;
    cv_.notify_all();
}

grpc::Status Client::Impl::session(const std::shared_ptr<Link>& link, const std::string& bearer,
                                   bool& welcomed) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + bearer);
    {
        std::lock_guard lock(mutex_);
        link->last_error.reset();
        link->goodbye.reset();
    }
    std::unique_ptr<Stream> stream = link->stub->Play(&context);
    {
        std::lock_guard lock(link->context_mutex);
        link->context = &context;
    }
    {
        std::lock_guard lock(link->stream_mutex);
        link->stream = stream.get();
        link->writes_done = false;
        link->connection = ++connections_;
    }
    if (stopping_) context.TryCancel();
    log_debug("connecting to ", link->address, " (connection ", link->connection.load(), ")");

    write(*link, hello_message(options_));

    link->welcomed = false;
    v1::RefereeMessage message;
    while (stream->Read(&message)) {
        dispatch(link, std::move(message), Clock::now());
        message.Clear();
    }
    welcomed = link->welcomed;
    {
        std::lock_guard lock(link->stream_mutex);  // no Write is in progress after this
        link->stream = nullptr;
    }
    grpc::Status status = stream->Finish();
    {
        std::lock_guard lock(link->context_mutex);
        link->context = nullptr;
    }
    if (!stopping_) {
        // A cancel armed by a Goodbye's half-close belongs to this call, not to the next one.
        std::lock_guard lock(mutex_);
        link->cancel_at.reset();
    }
    return status;
}

std::uint64_t Client::Impl::write(Link& link, const v1::BotMessage& message) {
    std::lock_guard lock(link.stream_mutex);
    if (link.stream == nullptr || link.writes_done) return 0;
    if (!link.stream->Write(message)) return 0;  // the stream is broken; the reader will see it end
    return link.connection.load();
}

void Client::Impl::deliver(Link& link, const Key& key, const v1::BotMessage& message) {
    const std::uint64_t connection = write(link, message);
    std::lock_guard lock(mutex_);
    auto it = pending_.find(key);
    if (it == pending_.end()) return;
    it->second.sent_on = connection;
    if (connection == 0) {
        log_info(where(key), ": not connected to ", link.name(),
                 "; the answer goes out when it asks again");
    }
}

// --- node streams (PROTOCOL.md §3.8) ------------------------------------------------------------

void Client::Impl::on_assignment(const v1::MatchAssignment& assignment) {
    const std::string& address = assignment.address();
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (ended_.count(assignment.match_id()) != 0) {
        log_debug("match ", assignment.match_id(), ": ignoring an assignment to a match that ended");
        return;
    }
    if (address == main_->address) {
        log_info("match ", assignment.match_id(), " is assigned to ", address,
                 ", the main stream's address: it is played there");
        return;
    }
    std::shared_ptr<Link> node;
    if (nodes_.count(address) == 0) {
        try {
            node = make_link(address, assignment.tls(), /*main=*/false);
        } catch (const std::exception& error) {
            log_error("match ", assignment.match_id(), ": cannot set up a connection to node ",
                      address, ": ", error.what());
            return;
        }
    }
    // Re-sent after every Welcome of the main stream for a match still running (PROTOCOL.md
    // §3.8): its ticket is the one the node's stream reopens with; the stream carries on.
    log_info("match ", assignment.match_id(), " is assigned to node ", address,
             matches_.count(assignment.match_id()) != 0
                 ? " (again, for a match the bot follows)"
                 : "");
    tickets_.add(address, assignment.match_id(), assignment.ticket());
    if (node == nullptr) return;  // a stream is open (or opening) there: the match comes on it
    nodes_.emplace(address, node);
    ++live_nodes_;
    std::thread([self = shared_from_this(), node] { self->follow_node(node); }).detach();
}

void Client::Impl::follow_node(const std::shared_ptr<Link>& node) {
    std::mt19937_64 rng(std::random_device{}());
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    int attempt = 0;
    // When the node was last known reachable: the end of the last welcomed stream there (it was
    // reachable while that stream lived), or, before any, when its link was created.
    Clock::time_point reached_at = node->created;
    while (const std::optional<std::string> ticket = node_ticket(*node)) {
        log_info("opening a stream to ", node->name());
        bool welcomed = false;
        const grpc::Status status = session(node, *ticket, welcomed);
        std::optional<v1::Goodbye> goodbye;
        {
            std::lock_guard lock(mutex_);
            goodbye.swap(node->goodbye);
        }
        const std::string& details = status.error_message();
        const std::string why = goodbye ? std::string("goodbye")
                                        : status_code_name(status.error_code()) +
                                              (details.empty() ? "" : ": " + details);
        log_info("the stream to ", node->name(), " ended (", why, ")");
        if (stopping_) continue;
        if (!goodbye && status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
            log_warning(node->name(), " refused a ticket; dropping it");
            std::lock_guard lock(mutex_);
            tickets_.refuse(node->address, *ticket);
            continue;  // the next ticket, if any, right away
        }
        if (welcomed) {
            attempt = 0;
            reached_at = Clock::now();
        }
        const auto delay = backoff_delay(attempt++, unit(rng));
        std::unique_lock lock(mutex_);
        if (!tickets_.newest(node->address)) continue;
        const auto unreachable = Clock::now() - reached_at;
        if (unreachable >= options_.node_unreachable_after) {
            // Gone (PROTOCOL.md §3.8, rule 4): the ladder has voided its matches. Let it go as
            // when no ticket is left, in the same critical section, so that a later assignment
            // there opens a new link afresh.
            const std::size_t dropped = tickets_.drop_address(node->address);
            log_warning(node->name(), " unreachable for ",
                        std::chrono::duration_cast<std::chrono::milliseconds>(unreachable)
                                .count() / 1000.0,
                        " s (", why, "); dropping its ", dropped,
                        " ticket(s) and letting it go");
            std::vector<std::string> lost;
            for (const auto& entry : matches_) {
                if (entry.second->link == node) lost.push_back(entry.first);
            }
            for (const auto& id : lost) {
                log_warning("match ", id, " was on ", node->name(), ", which is gone; dropping it");
                end_match_locked(id, /*drop=*/true);
            }
            const auto it = nodes_.find(node->address);
            if (it != nodes_.end() && it->second == node) nodes_.erase(it);
            break;
        }
        log_info("reopening the stream to ", node->name(), " in ", delay.count() / 1000.0, " s");
        cv_.wait_for(lock, delay, [&] { return stopping_.load(); });
    }
    std::lock_guard lock(mutex_);
    --live_nodes_;
    cv_.notify_all();
}

std::optional<std::string> Client::Impl::node_ticket(const Link& node) {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
        if (auto ticket = tickets_.newest(node.address)) return ticket;
        log_info("no unfinished match is left on ", node.name(), "; letting its stream go");
    }
    // An assignment from now on opens a new stream there.
    nodes_.erase(node.address);
    return std::nullopt;
}

// --- incoming messages --------------------------------------------------------------------------

void Client::Impl::dispatch(const std::shared_ptr<Link>& link, v1::RefereeMessage message,
                            Clock::time_point received) {
    switch (message.body_case()) {
        case v1::RefereeMessage::kWelcome:
            link->welcomed = true;
            on_welcome(*link, message.welcome());
            break;
        case v1::RefereeMessage::kError: {
            const auto& error = message.error();
            log_warning("protocol error from ", link->name(), ": ",
                        v1::ErrorCode_Name(error.code()), ": ", error.message());
            std::lock_guard lock(mutex_);
            link->last_error = error;
            break;
        }
        case v1::RefereeMessage::kAnswerResult:
            on_answer_result(link, message.answer_result());
            break;
        case v1::RefereeMessage::kGoodbye:
            on_goodbye(*link, message.goodbye());
            break;
        case v1::RefereeMessage::kAssignment:
            on_assignment(message.assignment());
            break;
        case v1::RefereeMessage::kProbation:
            on_probation(message.probation());
            break;
        case v1::RefereeMessage::kMatchStart:
        case v1::RefereeMessage::kRotationRequest:
        case v1::RefereeMessage::kDecisionRequest:
        case v1::RefereeMessage::kPublicEvent:
        case v1::RefereeMessage::kRoundEnded:
        case v1::RefereeMessage::kMatchEnded:
            route(link, std::move(message), received);
            break;
        case v1::RefereeMessage::kBundle:
            // Several queued messages in one (Hello.accepts_bundles, PROTOCOL.md §3.6.2): each
            // is handled, in order, exactly as if it had come alone, at the bundle's arrival.
            for (auto& inner : *message.mutable_bundle()->mutable_messages()) {
                if (inner.has_bundle()) {
                    log_warning("ignoring a bundle nested in a bundle from ", link->name(), " (",
                                inner.bundle().messages_size(), " message(s))");
                    continue;
                }
                dispatch(link, std::move(inner), received);
            }
            break;
        default:
            // A newer referee may send message kinds this kit does not know: ignore them.
            log_debug("ignoring a referee message with no body this kit knows");
            break;
    }
}

void Client::Impl::on_welcome(const Link& link, const v1::Welcome& welcome) {
    log_info("connected to ", link.name(), " as '", welcome.bot_name(), "' (session ",
             welcome.session_id(), welcome.resumed() ? ", resumed" : "", ")");
    if (welcome.protocol_version() != kProtocolVersion) {
        log_warning(link.name(), " speaks protocol ", welcome.protocol_version(), ", this kit ",
                    kProtocolVersion);
    }
    if (welcome.resumed()) return;
    std::lock_guard lock(mutex_);
    // Reconnected after the grace: the referee forfeited the seats it held on this stream and
    // will say no more of them. Matches of other streams are not its business.
    std::vector<std::string> lost;
    for (const auto& entry : matches_) {
        if (entry.second->link.get() == &link) lost.push_back(entry.first);
    }
    for (const auto& id : lost) {
        log_warning("match ", id, " was not resumed by ", link.name(), " (its reconnect grace "
                    "ran out, or it restarted); dropping it");
        end_match_locked(id, /*drop=*/true);
    }
}

void Client::Impl::on_probation(const v1::Probation& probation) {
    if (probation.active()) {
        log_warning("on probation: no matches are scheduled for the bot (", probation.reason(),
                    "); ",
                    probation.lifted_by_reconnect()
                        ? "a new connection lifts it (restart the bot once it is fixed)"
                        : "only the bot's owner or the operator can lift it");
    } else {
        log_info("probation lifted: matches will be scheduled again");
    }
    if (!options_.on_probation) return;
    try {
        options_.on_probation(probation);
    } catch (const std::exception& error) {
        log_error("the on_probation hook threw: ", error.what());
    }
}

void Client::Impl::on_goodbye(Link& link, const v1::Goodbye& goodbye) {
    const std::string& reason = v1::GoodbyeReason_Name(goodbye.reason());
    log_info("goodbye from ", link.name(), " (", reason.empty() ? "unknown reason" : reason, ", ",
             goodbye.reconnect()
                 ? "reconnect in " + std::to_string(goodbye.retry_after_ms()) + " ms"
                 : std::string("do not reconnect"),
             "): ", goodbye.message().empty() ? "no message" : goodbye.message());
    {
        std::lock_guard lock(mutex_);
        link.goodbye = goodbye;
    }
    // run() (or, for a node, follow_node()) decides what follows once the call has ended; the
    // referee ends it next.
    half_close_then_cancel(link);
}

void Client::Impl::on_answer_result(const std::shared_ptr<Link>& link,
                                    const v1::AnswerResult& result) {
    const Key key{result.match_id(), result.request_id()};
    std::optional<v1::BotMessage> retry;
    {
        std::lock_guard lock(mutex_);
        auto it = pending_.find(key);
        Pending* pending = it == pending_.end() ? nullptr : &it->second;
        const std::string status = answer_status_name(result.status());
        switch (result.status()) {
            case v1::ANSWER_STATUS_ACCEPTED:  // full streams only: nothing waits for it
                if (pending != nullptr) {
                    pending->closed = true;
                    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                        Clock::now() - pending->received);
                    log_debug(where(key), ": accepted after ", took.count(), " ms");
                }
                break;
            case v1::ANSWER_STATUS_ILLEGAL:
            case v1::ANSWER_STATUS_MALFORMED:
                log_warning(where(key), ": ", status, ": ", result.reason(),
                            " (strikes: ", result.strikes(), ")");
                // The request stays open; the fallback is always legal.
                if (pending != nullptr && !pending->closed && !pending->fallback_sent &&
                    Clock::now() < pending->expires) {
                    pending->fallback_sent = true;
                    pending->answer = pending->fallback;
                    retry = pending->fallback;
                    log_warning(where(key), ": sending the fallback instead");
                }
                break;
            case v1::ANSWER_STATUS_TIMED_OUT:
                if (pending != nullptr) pending->closed = true;
                log_warning(where(key), ": TIMED_OUT: the referee played the fallback (strikes: ",
                            result.strikes(), ", bank: ", result.time_bank_ms(), " ms)");
                break;
            case v1::ANSWER_STATUS_STALE:
            case v1::ANSWER_STATUS_UNKNOWN_MATCH:
            default:
                log_info(where(key), ": ", status,
                         result.reason().empty() ? "" : ": ", result.reason());
                break;
        }
    }
    if (retry) deliver(*link, key, *retry);
}

void Client::Impl::route(const std::shared_ptr<Link>& link, v1::RefereeMessage message,
                         Clock::time_point received) {
    const std::string match_id = match_id_of(message);
    std::optional<v1::BotMessage> resend;
    Key key;
    {
        std::lock_guard lock(mutex_);
        if (ended_.count(match_id) != 0) {
            log_debug("match ", match_id, ": ignoring a message after the match ended");
            return;
        }
        if (message.has_match_ended() && matches_.count(match_id) == 0) {
            // No state here (voided before it began, or begun before a restart): only its
            // ticket, if any, goes.
            log_match_end(message.match_ended());
            end_match_locked(match_id, /*drop=*/true);
            return;
        }
        bool forward = true;
        if (message.has_rotation_request()) {
            const auto& r = message.rotation_request();
            key = {match_id, r.request_id()};
            forward = open_request_locked(link, key, r.deadline_ms(), r.time_bank_ms(),
                                          rotation_message(match_id, r.request_id(), false),
                                          received, resend);
        } else if (message.has_decision_request()) {
            const auto& r = message.decision_request();
            key = {match_id, r.request_id()};
            forward = open_request_locked(
                link, key, r.deadline_ms(), r.time_bank_ms(),
                action_message(match_id, r.request_id(), fallback_action(r)), received, resend);
        }

        auto it = matches_.find(match_id);
        if (it == matches_.end()) {
            auto match = std::make_shared<Match>();
            match->id = match_id;
            match->link = link;
            try {
                match->bot = factory_();
            } catch (const std::exception& error) {
                log_error("match ", match_id, ": the bot factory threw: ", error.what());
            }
            it = matches_.emplace(match_id, match).first;
            ++live_workers_;
            std::thread([self = shared_from_this(), match] { self->work(match); }).detach();
        }
        const std::shared_ptr<Match> match = it->second;

        if (message.has_match_start()) {
            const auto& start = message.match_start();
            if (start.resumed()) {
                log_info("match ", match_id, " resumed (seat ", start.seat(), ", bank ",
                         start.time_bank_ms(), " ms, ", start.strikes(), " strikes)");
            } else {
                std::ostringstream names;
                for (int i = 0; i < start.player_names_size(); ++i) {
                    names << (i ? ", " : "") << start.player_names(i);
                }
                log_info("match ", match_id, " started: seat ", start.seat(), " of ",
                         start.num_players(), " [", names.str(), "], ", start.num_rounds(),
                         " rounds, ", start.time_control().decision_ms(), " ms + ",
                         start.time_control().time_bank_ms(), " ms bank");
            }
        } else if (message.has_round_ended()) {
            close_latest_locked(match_id);  // the round is over: so is its last request
        } else if (message.has_match_ended()) {
            log_match_end(message.match_ended());
            match->push(std::move(message));
            end_match_locked(match_id, /*drop=*/false);
            ++finished_;
            if (options_.max_matches > 0 && finished_ >= options_.max_matches) {
                log_info("played ", finished_, " match(es); stopping");
                std::thread([self = shared_from_this()] { self->stop(); }).detach();
            }
            return;
        }
        if (forward) match->push(std::move(message));
    }
    if (resend) deliver(*link, key, *resend);
}

bool Client::Impl::open_request_locked(const std::shared_ptr<Link>& link, const Key& key,
                                       std::uint32_t deadline_ms, std::uint32_t bank_ms,
                                       v1::BotMessage fallback, Clock::time_point received,
                                       std::optional<v1::BotMessage>& resend) {
    const auto expires = received + answer_budget(deadline_ms, bank_ms, options_.margin_ms);
    auto it = pending_.find(key);
    if (it != pending_.end()) {
        // The referee asks again after a reconnect (same request_id).
        Pending& pending = it->second;
        if (!pending.answer) {
            pending.expires = std::min(pending.expires, expires);  // the bot is still on it
            cv_.notify_all();
        } else if (!pending.closed && pending.sent_on != link->connection.load()) {
            log_info(where(key), ": resending the answer lost with the old connection");
            resend = pending.answer;
        } else {
            log_debug(where(key), ": ignoring a repeated request");
        }
        return false;
    }
    // A new request means the match moved on: the previous one was accepted (a lean stream does
    // not say so), timed out or superseded.
    close_latest_locked(key.first);
    latest_[key.first] = key.second;
    Pending pending;
    pending.link = link;
    pending.received = received;
    pending.expires = expires;
    pending.fallback = std::move(fallback);
    pending_.emplace(key, std::move(pending));
    cv_.notify_all();
    return true;
}

void Client::Impl::close_latest_locked(const std::string& match_id) {
    const auto latest = latest_.find(match_id);
    if (latest == latest_.end()) return;
    const auto it = pending_.find(Key{match_id, latest->second});
    if (it != pending_.end()) it->second.closed = true;
}

void Client::Impl::end_match_locked(const std::string& match_id, bool drop) {
    auto it = matches_.find(match_id);
    if (it != matches_.end()) {
        it->second->close(drop);
        matches_.erase(it);
    }
    for (auto p = pending_.lower_bound(Key{match_id, 0});
         p != pending_.end() && p->first.first == match_id;) {
        p = pending_.erase(p);
    }
    latest_.erase(match_id);
    tickets_.end_match(match_id);
    if (ended_.insert(match_id).second) ended_order_.push_back(match_id);
    while (ended_order_.size() > kEndedRemembered) {
        ended_.erase(ended_order_.front());
        ended_order_.pop_front();
    }
}

// --- per-match workers --------------------------------------------------------------------------

void Client::Impl::work(const std::shared_ptr<Match>& match) {
    while (auto message = match->pop()) {
        Bot* bot = match->bot.get();
        try {
            switch (message->body_case()) {
                case v1::RefereeMessage::kMatchStart:
                    if (bot) bot->on_match_start(message->match_start());
                    break;
                case v1::RefereeMessage::kRotationRequest:
                case v1::RefereeMessage::kDecisionRequest:
                    answer_request(*match, *message);
                    break;
                case v1::RefereeMessage::kPublicEvent:
                    if (bot) bot->on_event(message->public_event());
                    break;
                case v1::RefereeMessage::kRoundEnded:
                    if (bot) bot->on_round_end(message->round_ended());
                    break;
                case v1::RefereeMessage::kMatchEnded:
                    if (bot) bot->on_match_end(message->match_ended());
                    break;
                default:
                    break;
            }
        } catch (const std::exception& error) {
            log_error("match ", match->id, ": the bot threw: ", error.what());
        } catch (...) {
            log_error("match ", match->id, ": the bot threw");
        }
    }
    std::lock_guard lock(mutex_);
    --live_workers_;
    cv_.notify_all();
}

void Client::Impl::answer_request(Match& match, const v1::RefereeMessage& message) {
    const bool rotation = message.has_rotation_request();
    const std::uint64_t request_id = rotation ? message.rotation_request().request_id()
                                              : message.decision_request().request_id();
    const Key key{match.id, request_id};
    Clock::time_point received;
    {
        std::unique_lock lock(mutex_);
        auto it = pending_.find(key);
        if (it == pending_.end() || it->second.answer || it->second.closed) return;
        received = it->second.received;
        if (!rotation && options_.slow_ms > 0) {  // testing aid: think slowly
            cv_.wait_for(lock, std::chrono::milliseconds(options_.slow_ms),
                         [&] { return stopping_.load(); });
        }
    }

    std::optional<v1::BotMessage> answer;
    try {
        if (match.bot == nullptr) throw std::runtime_error("no bot for this match");
        if (rotation) {
            const auto& request = message.rotation_request();
            answer = rotation_message(match.id, request_id, match.bot->rotate(request));
        } else {
            const auto& request = message.decision_request();
            v1::Action action = match.bot->act(request);
            if (const auto problem = check_action(action, request)) {
                log_warning(where(key), ": the bot returned ", describe(action), ", but ",
                            *problem, "; sending the fallback");
            } else {
                answer = action_message(match.id, request_id, std::move(action));
            }
        }
    } catch (const std::exception& error) {
        log_error(where(key), ": the bot threw (", error.what(), "); sending the fallback");
    } catch (...) {
        log_error(where(key), ": the bot threw; sending the fallback");
    }
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - received).count();

    v1::BotMessage to_send;
    std::shared_ptr<Link> link;
    {
        std::lock_guard lock(mutex_);
        auto it = pending_.find(key);
        if (it == pending_.end()) return;  // the match ended meanwhile
        Pending& pending = it->second;
        if (pending.closed || pending.answer) {
            log_warning(where(key), ": the bot answered ", took, " ms after the request, too late (",
                        pending.answer ? "the kit had sent the fallback"
                                       : "the request was closed: timed out, or the match moved on",
                        "); answer dropped");
            return;
        }
        if (!answer) pending.fallback_sent = true;
        pending.answer = answer ? *answer : pending.fallback;
        to_send = *pending.answer;
        link = pending.link;
    }
    log_debug(where(key), ": answering ", took, " ms after the request");
    deliver(*link, key, to_send);
}

// --- deadlines ----------------------------------------------------------------------------------

void Client::Impl::watchdog() {
    std::unique_lock lock(mutex_);
    while (!watchdog_exit_) {
        const auto now = Clock::now();
        std::optional<Clock::time_point> next;
        std::vector<std::shared_ptr<Link>> to_cancel;
        for (const auto& link : links_locked()) {
            if (!link->cancel_at) continue;
            if (now >= *link->cancel_at) {
                link->cancel_at.reset();
                to_cancel.push_back(link);
            } else if (!next || *link->cancel_at < *next) {
                next = link->cancel_at;
            }
        }
        if (!to_cancel.empty()) {
            lock.unlock();
            for (const auto& link : to_cancel) {
                std::lock_guard context_lock(link->context_mutex);
                if (link->context != nullptr) link->context->TryCancel();
            }
            lock.lock();
            continue;
        }
        std::vector<std::tuple<std::shared_ptr<Link>, Key, v1::BotMessage>> due;
        if (options_.safety_fallback) {
            for (auto& [key, pending] : pending_) {
                if (pending.answer || pending.closed) continue;
                if (pending.expires <= now) {
                    pending.answer = pending.fallback;
                    pending.fallback_sent = true;
                    due.emplace_back(pending.link, key, pending.fallback);
                } else if (!next || pending.expires < *next) {
                    next = pending.expires;
                }
            }
        }
        if (!due.empty()) {
            lock.unlock();
            for (const auto& [link, key, message] : due) {
                log_warning(where(key), ": the bot has not answered in time; sending the fallback");
                deliver(*link, key, message);
            }
            lock.lock();
            continue;
        }
        if (next) {
            cv_.wait_until(lock, *next);
        } else {
            cv_.wait(lock);
        }
    }
}

// --- public API ---------------------------------------------------------------------------------

Client::Client(Options options, BotFactory factory)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(factory))) {}

Client::~Client() = default;

int Client::run() { return impl_->run(); }

void Client::stop() { impl_->stop(); }

bool Client::workers_finished() const { return impl_->workers_finished(); }

}  // namespace scout
