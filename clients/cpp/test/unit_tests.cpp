// Unit tests of the pure helpers and of the example strategy. No framework: each TEST is a
// function; CHECK records a failure and goes on. Exit status 0 iff every check passed.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "scout/client.hpp"
#include "scout/helpers.hpp"
#include "scout/v1/arena.grpc.pb.h"
#include "strategy.hpp"

namespace {

int g_failures = 0;
int g_checks = 0;
std::vector<std::pair<const char*, void (*)()>>& registry() {
    static std::vector<std::pair<const char*, void (*)()>> tests;
    return tests;
}
struct Register {
    Register(const char* name, void (*fn)()) { registry().emplace_back(name, fn); }
};

#define TEST(name)                                  \
    void name();                                    \
    const Register register_##name(#name, &name);   \
    void name()

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        ++g_checks;                                                                       \
        if (!(cond)) {                                                                    \
            ++g_failures;                                                                 \
            std::cerr << __FILE__ << ":" << __LINE__ << ": CHECK failed: " #cond "\n"; \
        }                                                                                 \
    } while (0)

#define CHECK_EQ(a, b)                                                                       \
    do {                                                                                     \
        ++g_checks;                                                                          \
        const auto& va = (a);                                                                \
        const auto& vb = (b);                                                                \
        if (!(va == vb)) {                                                                   \
            ++g_failures;                                                                    \
            std::cerr << __FILE__ << ":" << __LINE__ << ": CHECK_EQ failed: " #a " == " #b \
                      << " (" << va << " vs " << vb << ")\n";                                \
        }                                                                                    \
    } while (0)

namespace v1 = scout::v1;
using namespace std::chrono_literals;

v1::Show show(int start, int length) {
    v1::Show s;
    s.set_start(start);
    s.set_length(length);
    return s;
}

v1::Scout scout_move(v1::End end, bool flip, int insert_at) {
    v1::Scout s;
    s.set_end(end);
    s.set_flip(flip);
    s.set_insert_at(insert_at);
    return s;
}

/// A DecisionRequest with the given hand faces (others = face%10+1), legal shows and scouts.
v1::DecisionRequest request(const std::vector<int>& faces, const std::vector<v1::Show>& shows,
                            const std::vector<v1::Scout>& scouts = {}) {
    v1::DecisionRequest r;
    r.set_match_id("m-1");
    r.set_request_id(7);
    for (int f : faces) {
        auto* card = r.mutable_observation()->add_hand();
        card->set_face(f);
        card->set_other(f % 10 + 1);
    }
    for (const auto& s : shows) *r.add_legal_shows() = s;
    for (const auto& s : scouts) *r.add_legal_scouts() = s;
    return r;
}

/// Every (start, length) of the hand that is a group: the legal shows of a clear table.
std::vector<v1::Show> all_groups(const std::vector<int>& faces) {
    std::vector<v1::Show> shows;
    const int n = static_cast<int>(faces.size());
    for (int start = 0; start < n; ++start) {
        for (int length = 1; start + length <= n; ++length) {
            std::vector<int> g(faces.begin() + start, faces.begin() + start + length);
            if (scout::is_group(g)) shows.push_back(show(start, length));
        }
    }
    return shows;
}

std::function<const char*(const char*)> env(std::map<std::string, std::string> vars) {
    auto store = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
    return [store](const char* name) -> const char* {
        auto it = store->find(name);
        return it == store->end() ? nullptr : it->second.c_str();
    };
}

// --- groups and strength ---------------------------------------------------------------------

TEST(groups) {
    CHECK(scout::is_group({5}));
    CHECK(scout::is_group({5, 5, 5}));
    CHECK(scout::is_group({3, 4, 5}));
    CHECK(scout::is_group({8, 7, 6}));
    CHECK(!scout::is_group({}));
    CHECK(!scout::is_group({3, 5}));
    CHECK(!scout::is_group({3, 4, 4}));
    CHECK(!scout::is_group({4, 5, 4}));
    CHECK(scout::is_set({2}));
    CHECK(!scout::is_set({2, 3}));
}

TEST(strength_formula) {
    CHECK_EQ(scout::group_strength({5, 5, 5}), 32 * 3 + 16 + 5);  // 117, from PROTOCOL.md §5.4
    CHECK_EQ(scout::group_strength({3, 4, 5, 6}), 131);
    CHECK_EQ(scout::group_strength({6, 6}), 86);
    CHECK_EQ(scout::group_strength({}), 0);
    // More cards beat fewer; set beats run at equal size; then the higher lowest face.
    CHECK(scout::group_strength({1, 2, 3}) > scout::group_strength({10, 10}));
    CHECK(scout::group_strength({2, 2}) > scout::group_strength({9, 10}));
    CHECK(scout::group_strength({4, 5}) > scout::group_strength({4, 3}));
    CHECK(scout::group_strength({7}) > scout::group_strength({6}));
}

TEST(faces_and_show_strength) {
    const auto r = request({9, 2, 6, 2, 7}, {});
    const auto& hand = r.observation().hand();
    CHECK(scout::faces_at(hand, 1, 3) == (std::vector<int>{2, 6, 2}));
    CHECK(scout::faces_at(hand, 4, 2).empty());
    CHECK(scout::faces_at(hand, -1, 1).empty());
    CHECK(scout::faces_at(hand, 0, 0).empty());
    CHECK_EQ(scout::show_strength(hand, show(0, 1)), 32 + 16 + 9);
    CHECK_EQ(scout::show_strength(hand, show(3, 3)), -1);
}

// --- fallback and answer checks ----------------------------------------------------------------

TEST(fallback_is_first_show_else_left_scout) {
    auto with_shows = request({1, 2, 3}, {show(0, 1), show(0, 2)});
    auto a = scout::fallback_action(with_shows);
    CHECK(a.has_show());
    CHECK(scout::same_show(a.show(), show(0, 1)));

    auto no_shows = request({1, 2, 3}, {}, {scout_move(v1::END_LEFT, false, 0)});
    a = scout::fallback_action(no_shows);
    CHECK(a.has_scout());
    CHECK(scout::same_scout(a.scout(), scout_move(v1::END_LEFT, false, 0)));
}

TEST(check_action) {
    auto r = request({1, 2, 3}, {show(0, 1), show(1, 2)},
                     {scout_move(v1::END_LEFT, false, 0), scout_move(v1::END_LEFT, true, 3)});
    v1::Action a;
    CHECK(scout::check_action(a, r).has_value());  // empty
    *a.mutable_show() = show(1, 2);
    CHECK(!scout::check_action(a, r).has_value());
    *a.mutable_show() = show(0, 3);
    CHECK(scout::check_action(a, r).has_value());
    *a.mutable_scout() = scout_move(v1::END_LEFT, true, 3);
    CHECK(!scout::check_action(a, r).has_value());
    *a.mutable_scout() = scout_move(v1::END_RIGHT, true, 3);
    CHECK(scout::check_action(a, r).has_value());

    auto* both = a.mutable_scout_and_show();
    *both->mutable_scout() = scout_move(v1::END_LEFT, false, 0);
    *both->mutable_show() = show(2, 2);  // the hand has 4 cards after the Scout
    CHECK(scout::check_action(a, r).has_value());  // not available
    r.set_scout_and_show_available(true);
    CHECK(!scout::check_action(a, r).has_value());
    *both->mutable_show() = show(3, 2);  // positions 3-4 of a 4-card hand
    CHECK(scout::check_action(a, r).has_value());
    *both->mutable_show() = show(0, 1);
    *both->mutable_scout() = scout_move(v1::END_RIGHT, false, 0);
    CHECK(scout::check_action(a, r).has_value());  // scout part not listed
}

TEST(describe) {
    v1::Action a;
    *a.mutable_show() = show(3, 2);
    CHECK_EQ(scout::describe(a), std::string("show(3,2)"));
    *a.mutable_scout() = scout_move(v1::END_RIGHT, true, 4);
    CHECK_EQ(scout::describe(a), std::string("scout(R,flip,4)"));
}

// --- timing and reconnects ---------------------------------------------------------------------

TEST(backoff) {
    CHECK_EQ(scout::backoff_delay(0, 0.999999).count(), 199);
    CHECK_EQ(scout::backoff_delay(0, 0.0).count(), 100);
    CHECK_EQ(scout::backoff_delay(1, 0.999999).count(), 399);
    CHECK_EQ(scout::backoff_delay(4, 0.999999).count(), 3199);
    CHECK_EQ(scout::backoff_delay(5, 0.999999).count(), 4999);  // capped at 5 s
    CHECK_EQ(scout::backoff_delay(100, 0.0).count(), 2500);
    for (int attempt = 0; attempt < 40; ++attempt) {
        CHECK(scout::backoff_delay(attempt, 0.5) <= 5000ms);
        CHECK(scout::backoff_delay(attempt + 1, 0.5) >= scout::backoff_delay(attempt, 0.5));
    }
}

TEST(goodbye_delay) {
    CHECK_EQ(scout::goodbye_delay(800, 0.0).count(), 800);
    CHECK_EQ(scout::goodbye_delay(800, 0.5).count(), 890);
    CHECK_EQ(scout::goodbye_delay(0, 0.5).count(), 50);
    CHECK_EQ(scout::goodbye_delay(4294967295u, 0.0).count(), 4294967295LL);  // unsigned
}

TEST(answer_budget) {
    CHECK_EQ(scout::answer_budget(1000, 10000, 100).count(), 10900);
    CHECK_EQ(scout::answer_budget(1000, 10000, 100, false).count(), 900);
    CHECK_EQ(scout::answer_budget(0, 0, 100).count(), 0);  // resent request, time spent
    CHECK_EQ(scout::answer_budget(50, 0, 100).count(), 0);
}

TEST(rejections) {
    using grpc::StatusCode;
    CHECK(scout::is_permanent_rejection(StatusCode::UNAUTHENTICATED, "unknown bot token"));
    CHECK(scout::is_permanent_rejection(StatusCode::INVALID_ARGUMENT, ""));
    CHECK(scout::is_permanent_rejection(StatusCode::FAILED_PRECONDITION, ""));
    CHECK(scout::is_permanent_rejection(
        StatusCode::ABORTED, "superseded by a newer connection with the same token"));
    CHECK(!scout::is_permanent_rejection(StatusCode::ABORTED, "something else"));
    CHECK(!scout::is_permanent_rejection(StatusCode::UNAVAILABLE, ""));
    CHECK(!scout::is_permanent_rejection(StatusCode::CANCELLED, ""));
    CHECK(!scout::is_permanent_rejection(StatusCode::OK, ""));
    CHECK_EQ(scout::status_code_name(StatusCode::UNAUTHENTICATED), std::string("UNAUTHENTICATED"));
}

TEST(node_tickets) {
    scout::NodeTickets tickets;
    const auto none = std::optional<std::string>();
    CHECK(tickets.newest("node:1") == none);
    tickets.add("node:1", "m-a", "t-a");
    tickets.add("node:2", "m-x", "t-x");
    tickets.add("node:1", "m-b", "t-b");
    CHECK(tickets.newest("node:1") == std::optional<std::string>("t-b"));  // the newest first
    CHECK(tickets.newest("node:2") == std::optional<std::string>("t-x"));  // per address
    // A fresh ticket for a match replaces its old one and becomes the newest.
    tickets.add("node:1", "m-a", "t-a2");
    CHECK(tickets.newest("node:1") == std::optional<std::string>("t-a2"));
    // A refused ticket is dropped: the next one is tried.
    tickets.refuse("node:1", "t-a2");
    CHECK(tickets.newest("node:1") == std::optional<std::string>("t-b"));
    tickets.refuse("node:1", "t-unknown");
    tickets.refuse("node:9", "t-b");
    CHECK(tickets.newest("node:1") == std::optional<std::string>("t-b"));
    // A match that ends takes its ticket along; with none left the node is let go.
    tickets.end_match("m-b");
    CHECK(tickets.newest("node:1") == none);
    CHECK(tickets.newest("node:2") == std::optional<std::string>("t-x"));
    tickets.end_match("m-x");
    CHECK(tickets.newest("node:2") == none);
    tickets.end_match("m-x");  // twice: no harm
    CHECK(tickets.newest("node:2") == none);
    // A node that is gone loses all its tickets at once; other nodes keep theirs.
    tickets.add("node:1", "m-c", "t-c");
    tickets.add("node:1", "m-d", "t-d");
    tickets.add("node:2", "m-y", "t-y");
    CHECK_EQ(tickets.drop_address("node:1"), std::size_t{2});
    CHECK(tickets.newest("node:1") == none);
    CHECK(tickets.newest("node:2") == std::optional<std::string>("t-y"));
    CHECK_EQ(tickets.drop_address("node:1"), std::size_t{0});
    tickets.add("node:1", "m-e", "t-e");  // a later assignment there starts afresh
    CHECK(tickets.newest("node:1") == std::optional<std::string>("t-e"));
}

// --- launch convention -------------------------------------------------------------------------

TEST(options_from_environment) {
    const auto parsed = scout::parse_options(
        {}, env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"}, {"SCOUT_TLS", "1"},
                 {"SCOUT_CA_CERT", "ca.pem"}, {"SCOUT_BOT_NAME", "me"},
                 {"SCOUT_CONCURRENCY", "3"}}));
    CHECK(parsed.error.empty());
    CHECK_EQ(parsed.options.address, std::string("h:1"));
    CHECK_EQ(parsed.options.token, std::string("t"));
    CHECK(parsed.options.tls);
    CHECK_EQ(parsed.options.ca_cert, std::string("ca.pem"));
    CHECK_EQ(parsed.options.bot_name, std::string("me"));
    CHECK_EQ(parsed.options.concurrency, 3);
}

TEST(options_flags_override) {
    const auto parsed = scout::parse_options(
        {"--address", "x:2", "--token=tok", "--concurrency", "5", "--slow-ms=1500",
         "--no-fallback", "--max-matches", "2", "-v"},
        env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"}}));
    CHECK(parsed.error.empty());
    CHECK_EQ(parsed.options.address, std::string("x:2"));
    CHECK_EQ(parsed.options.token, std::string("tok"));
    CHECK_EQ(parsed.options.concurrency, 5);
    CHECK_EQ(parsed.options.slow_ms, 1500);
    CHECK(!parsed.options.safety_fallback);
    CHECK_EQ(parsed.options.max_matches, 2);
    CHECK(parsed.options.log_level == scout::LogLevel::Debug);
    CHECK(!parsed.options.tls);
    CHECK_EQ(parsed.options.concurrency, 5);
}

TEST(options_take_a_unix_socket_address_as_it_is) {
    for (const std::string address : {"unix:/run/scout/referee.sock",
                                      "unix:///run/scout/referee.sock"}) {
        const auto parsed =
            scout::parse_options({}, env({{"SCOUT_ADDRESS", address}, {"SCOUT_TOKEN", "hosted"}}));
        CHECK(parsed.error.empty());
        CHECK_EQ(parsed.options.address, address);
    }
}

TEST(options_defaults_and_errors) {
    auto parsed = scout::parse_options({}, env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"}}));
    CHECK(parsed.error.empty());
    CHECK_EQ(parsed.options.concurrency, 8);
    CHECK(!parsed.options.tls);
    CHECK(parsed.options.safety_fallback);

    CHECK(!scout::parse_options({}, env({{"SCOUT_TOKEN", "t"}})).error.empty());
    CHECK(!scout::parse_options({}, env({{"SCOUT_ADDRESS", "h:1"}})).error.empty());
    CHECK(!scout::parse_options({"--bogus"}, env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"}}))
               .error.empty());
    CHECK(!scout::parse_options({"--concurrency", "0"},
                                env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"}}))
               .error.empty());
    CHECK(!scout::parse_options({}, env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"},
                                         {"SCOUT_CONCURRENCY", "many"}}))
               .error.empty());
    CHECK(!scout::parse_options({"--token"}, env({{"SCOUT_ADDRESS", "h:1"}})).error.empty());
    CHECK(!scout::parse_options({"--client-cert", "c.pem"},
                                env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"}}))
               .error.empty());
    parsed = scout::parse_options({"--ca-cert", "ca.pem"},
                                  env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"}}));
    CHECK(parsed.error.empty());
    CHECK(parsed.options.tls);  // a CA implies TLS
    parsed = scout::parse_options({}, env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"},
                                           {"SCOUT_TLS", "0"}}));
    CHECK(!parsed.options.tls);
    CHECK(scout::parse_options({"--help"}, env({})).help);
}

TEST(hello_is_lean_unless_public_events) {
    scout::Options options;
    options.bot_name = "me";
    options.concurrency = 3;
    auto hello = scout::hello_message(options);
    CHECK(hello.has_hello());
    CHECK(hello.hello().lean());
    CHECK_EQ(hello.hello().protocol_version(), 1u);
    CHECK_EQ(hello.hello().max_concurrent_matches(), 3u);
    CHECK_EQ(hello.hello().bot_name(), std::string("me"));
    CHECK(hello.hello().accepts_bundles());
    options.public_events = true;
    CHECK(!scout::hello_message(options).hello().lean());
    CHECK(scout::hello_message(options).hello().accepts_bundles());  // always

    const auto base = std::map<std::string, std::string>{{"SCOUT_ADDRESS", "h:1"},
                                                         {"SCOUT_TOKEN", "t"}};
    auto with = base;
    CHECK(!scout::parse_options({}, env(base)).options.public_events);
    with["SCOUT_PUBLIC_EVENTS"] = "1";
    CHECK(scout::parse_options({}, env(with)).options.public_events);
    with["SCOUT_PUBLIC_EVENTS"] = "0";
    CHECK(!scout::parse_options({}, env(with)).options.public_events);
    with["SCOUT_PUBLIC_EVENTS"] = "maybe";
    CHECK(!scout::parse_options({}, env(with)).error.empty());
    CHECK(scout::parse_options({"--public-events"}, env(base)).options.public_events);
}

// --- node streams (PROTOCOL.md §3.8) -------------------------------------------------------------

/// A main referee for one bot stream: welcomes it, then sends the messages it is told to (e.g.
/// MatchAssignments), and records the Hello and what the bot sends after it.
class FakeMain final : public v1::Arena::Service {
public:
    FakeMain() {
        grpc::ServerBuilder builder;
        builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
        builder.RegisterService(this);
        server_ = builder.BuildAndStart();
    }
    ~FakeMain() override { server_->Shutdown(std::chrono::system_clock::now() + 2s); }

    std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

    void assign(const std::string& match_id, const std::string& address,
                const std::string& ticket) {
        v1::RefereeMessage message;
        auto* a = message.mutable_assignment();
        a->set_match_id(match_id);
        a->set_address(address);
        a->set_ticket(ticket);
        send(std::move(message));
    }

    void send(v1::RefereeMessage message) {
        std::lock_guard lock(mutex_);
        outbox_.push_back(std::move(message));
        cv_.notify_all();
    }

    /// The Hello of the last stream.
    v1::Hello hello() {
        std::lock_guard lock(mutex_);
        return hello_;
    }

    /// Everything the bot sent after its Hello, over all streams, in arrival order.
    std::vector<v1::BotMessage> received() {
        std::lock_guard lock(mutex_);
        return received_;
    }

    bool wait_received(std::size_t count, std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        return cv_.wait_for(lock, timeout, [&] { return received_.size() >= count; });
    }

    bool wait_welcomed(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        return cv_.wait_for(lock, timeout, [&] { return streams_ > 0; });
    }
    int streams() {
        std::lock_guard lock(mutex_);
        return streams_;
    }
    int open_streams() {
        std::lock_guard lock(mutex_);
        return open_;
    }

    grpc::Status Play(grpc::ServerContext* /*context*/,
                      grpc::ServerReaderWriter<v1::RefereeMessage, v1::BotMessage>* stream)
        override {
        v1::BotMessage hello;
        if (!stream->Read(&hello) || !hello.has_hello()) {
            return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no Hello");
        }
        v1::RefereeMessage welcome;
        welcome.mutable_welcome()->set_protocol_version(1);
        welcome.mutable_welcome()->set_bot_name(hello.hello().bot_name());
        welcome.mutable_welcome()->set_session_id("s-1");
        stream->Write(welcome);
        bool done = false;
        {
            std::lock_guard lock(mutex_);
            hello_ = hello.hello();
            ++streams_;
            ++open_;
        }
        cv_.notify_all();
        std::thread reader([&] {
            v1::BotMessage message;
            while (stream->Read(&message)) {
                std::lock_guard lock(mutex_);
                received_.push_back(message);
                cv_.notify_all();
            }
            std::lock_guard lock(mutex_);
            done = true;
            cv_.notify_all();
        });
        std::unique_lock lock(mutex_);
        while (!done) {
            cv_.wait(lock, [&] { return done || !outbox_.empty(); });
            while (!done && !outbox_.empty()) {
                v1::RefereeMessage message = std::move(outbox_.front());
                outbox_.pop_front();
                lock.unlock();
                stream->Write(message);
                lock.lock();
            }
        }
        --open_;
        lock.unlock();
        reader.join();
        return grpc::Status::OK;
    }

private:
    int port_ = 0;
    std::unique_ptr<grpc::Server> server_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<v1::RefereeMessage> outbox_;
    v1::Hello hello_;
    std::vector<v1::BotMessage> received_;
    int streams_ = 0;
    int open_ = 0;
};

/// 127.0.0.1 on a port nothing listens on (bound once, then released).
std::string dead_address() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t length = sizeof addr;
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
    ::close(fd);
    return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

template <class Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!predicate()) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(10ms);
    }
    return true;
}

/// Sends stderr (the kit's log) to a file while it lives; text() is what was written.
class CapturedStderr {
public:
    CapturedStderr() : path_("/tmp/scout-unit-tests-stderr-" + std::to_string(::getpid())) {
        std::fflush(stderr);
        saved_ = ::dup(2);
        std::FILE* file = std::fopen(path_.c_str(), "w");
        ::dup2(::fileno(file), 2);
        std::fclose(file);
    }
    ~CapturedStderr() {
        restore();
        std::remove(path_.c_str());
    }
    std::string text() {
        std::fflush(stderr);
        std::ifstream in(path_);
        std::ostringstream out;
        out << in.rdbuf();
        return out.str();
    }
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        ::dup2(saved_, 2);
        ::close(saved_);
        saved_ = -1;
    }

private:
    std::string path_;
    int saved_ = -1;
};

std::size_t count_of(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

TEST(node_unreachable_default_is_60_s) {
    CHECK(scout::kNodeUnreachableAfter == std::chrono::seconds(60));
    CHECK(scout::Options{}.node_unreachable_after == std::chrono::seconds(60));
    // Not a flag: the launch convention never changes it.
    const auto parsed = scout::parse_options({"--node-unreachable-ms", "5"},
                                             env({{"SCOUT_ADDRESS", "h:1"}, {"SCOUT_TOKEN", "t"}}));
    CHECK(!parsed.error.empty());
}

TEST(an_unreachable_node_is_given_up_after_the_timeout) {
    // A main referee assigns a match to a node nothing listens on. The node loop keeps retrying
    // until no stream there has been welcomed for node_unreachable_after, then drops the node's
    // ticket and ends (workers_finished() counts live node loops); the main stream stays up, and
    // a later assignment to that address starts afresh.
    constexpr auto timeout = 1000ms;
    constexpr auto slack = 5000ms + 2000ms;  // one backoff step at most, plus scheduling
    FakeMain fake;
    const std::string node = dead_address();
    scout::Options options;
    options.address = fake.address();
    options.token = "t";
    options.log_level = scout::LogLevel::Info;
    options.node_unreachable_after = timeout;
    scout::Client client(options, [] {
        return std::make_unique<scout::FunctionBot>(
            [](const v1::DecisionRequest& r) { return scout::fallback_action(r); });
    });
    CapturedStderr captured;
    int exit_code = -1;
    std::thread runner([&] { exit_code = client.run(); });
    CHECK(fake.wait_welcomed(5s));

    for (int round = 1; round <= 2; ++round) {
        const std::string match_id = "m-gone-" + std::to_string(round);
        const auto assigned = std::chrono::steady_clock::now();
        fake.assign(match_id, node, "ticket-" + std::to_string(round));
        // The node loop starts, and keeps trying well inside the timeout.
        CHECK(eventually([&] { return !client.workers_finished(); }, 2s));
        std::this_thread::sleep_for(timeout / 2);
        CHECK(!client.workers_finished());
        // Then it gives up.
        CHECK(eventually([&] { return client.workers_finished(); }, timeout + slack));
        CHECK(std::chrono::steady_clock::now() - assigned >= timeout);
        CHECK_EQ(count_of(captured.text(), "node " + node + " unreachable for "),
                 std::size_t(round));
        // The main stream is untouched (the same one stream, still open).
        CHECK_EQ(fake.streams(), 1);
        CHECK_EQ(fake.open_streams(), 1);
    }
    CHECK_EQ(count_of(captured.text(), "dropping its 1 ticket(s) and letting it go"),
             std::size_t{2});

    client.stop();
    runner.join();
    CHECK_EQ(exit_code, 0);
    const std::string log = captured.text();
    captured.restore();
    std::cerr << log;
}

// --- bundles (Hello.accepts_bundles, PROTOCOL.md §3.6.2) -----------------------------------------

/// What the bots of one client were called with, per match, in order.
class CallLog {
public:
    void add(const std::string& match_id, const std::string& call) {
        std::lock_guard lock(mutex_);
        calls_[match_id].push_back(call);
    }
    std::map<std::string, std::vector<std::string>> calls() {
        std::lock_guard lock(mutex_);
        return calls_;
    }

private:
    std::mutex mutex_;
    std::map<std::string, std::vector<std::string>> calls_;
};

/// Records every call; rotates, and plays the first legal Show.
class RecordingBot final : public scout::Bot {
public:
    explicit RecordingBot(std::shared_ptr<CallLog> log) : log_(std::move(log)) {}
    v1::Action act(const v1::DecisionRequest& request) override {
        log_->add(request.match_id(), "act " + std::to_string(request.request_id()));
        return scout::fallback_action(request);
    }
    bool rotate(const v1::RotationRequest& request) override {
        log_->add(request.match_id(), "rotate " + std::to_string(request.request_id()));
        return true;
    }
    void on_match_start(const v1::MatchStart& start) override {
        log_->add(start.match_id(), "start seat " + std::to_string(start.seat()));
    }
    void on_round_end(const v1::RoundEnded& ended) override {
        log_->add(ended.match_id(), "round end");
    }
    void on_match_end(const v1::MatchEnded& ended) override {
        log_->add(ended.match_id(), "match end");
    }

private:
    std::shared_ptr<CallLog> log_;
};

v1::RefereeMessage match_start_message(const std::string& match_id, int seat) {
    v1::RefereeMessage m;
    auto* start = m.mutable_match_start();
    start->set_match_id(match_id);
    start->set_seat(static_cast<std::uint32_t>(seat));
    start->set_num_players(3);
    start->set_num_rounds(3);
    return m;
}

v1::RefereeMessage rotation_request_message(const std::string& match_id, std::uint64_t id) {
    v1::RefereeMessage m;
    auto* r = m.mutable_rotation_request();
    r->set_match_id(match_id);
    r->set_request_id(id);
    r->set_deadline_ms(10'000);
    return m;
}

v1::RefereeMessage decision_request_message(const std::string& match_id, std::uint64_t id) {
    v1::RefereeMessage m;
    *m.mutable_decision_request() = request({4, 5, 6}, {show(1, 1), show(0, 2)});
    m.mutable_decision_request()->set_match_id(match_id);
    m.mutable_decision_request()->set_request_id(id);
    m.mutable_decision_request()->set_deadline_ms(10'000);
    return m;
}

v1::RefereeMessage round_ended_message(const std::string& match_id) {
    v1::RefereeMessage m;
    m.mutable_round_ended()->set_match_id(match_id);
    return m;
}

v1::RefereeMessage match_ended_message(const std::string& match_id) {
    v1::RefereeMessage m;
    m.mutable_match_ended()->set_match_id(match_id);
    return m;
}

v1::RefereeMessage bundle_of(std::vector<v1::RefereeMessage> messages) {
    v1::RefereeMessage m;
    for (auto& message : messages) *m.mutable_bundle()->add_messages() = std::move(message);
    return m;
}

/// One bot's answer, as "<match> rotation <id> <rotate>" or "<match> action <id> <action>".
std::string describe_answer(const v1::BotMessage& m) {
    if (m.has_rotation()) {
        return m.rotation().match_id() + " rotation " + std::to_string(m.rotation().request_id()) +
               (m.rotation().rotate() ? " rotate" : " keep");
    }
    if (m.has_action()) {
        return m.action().match_id() + " action " + std::to_string(m.action().request_id()) +
               " " + scout::describe(m.action().action());
    }
    return "other";
}

struct BundleRun {
    v1::Hello hello;
    std::map<std::string, std::vector<std::string>> calls;    // per match: the bot's calls
    std::map<std::string, std::vector<std::string>> answers;  // per match: what reached the referee
    std::size_t answer_count = 0;
    std::string log;
    int exit_code = -1;
};

/// Plays two matches against a FakeMain, in three steps (each waits for the bot's answers to the
/// previous one, as a referee would): the starts and first requests of both matches, the next
/// request of each, then a RoundEnded and both ends. With `bundled` each step goes as one RefereeBundle (the
/// second one also carries a nested bundle, which must be ignored); else message by message.
BundleRun play_two_matches(bool bundled) {
    FakeMain fake;
    scout::Options options;
    options.address = fake.address();
    options.token = "t";
    options.log_level = scout::LogLevel::Info;
    auto calls = std::make_shared<CallLog>();
    scout::Client client(options, [calls] { return std::make_unique<RecordingBot>(calls); });
    CapturedStderr captured;
    BundleRun run;
    std::thread runner([&] { run.exit_code = client.run(); });
    CHECK(fake.wait_welcomed(5s));

    const auto step = [&](std::vector<v1::RefereeMessage> messages, bool nest) {
        if (!bundled) {
            for (auto& message : messages) fake.send(std::move(message));
            return;
        }
        if (nest) {  // a request that must not be seen: the whole nested bundle is dropped
            messages.insert(messages.begin() + 1,
                            bundle_of({decision_request_message("m-b", 99),
                                       round_ended_message("m-a")}));
        }
        fake.send(bundle_of(std::move(messages)));
    };
    step({match_start_message("m-a", 0), rotation_request_message("m-a", 1),
          match_start_message("m-b", 2), decision_request_message("m-b", 1)},
         false);
    CHECK(fake.wait_received(2, 5s));
    step({decision_request_message("m-a", 2), decision_request_message("m-b", 2)}, true);
    CHECK(fake.wait_received(4, 5s));
    step({round_ended_message("m-b"), match_ended_message("m-a"), match_ended_message("m-b")},
         false);
    CHECK(eventually(
        [&] {
            auto c = calls->calls();
            return !c["m-a"].empty() && c["m-a"].back() == "match end" && !c["m-b"].empty() &&
                   c["m-b"].back() == "match end";
        },
        5s));
    std::this_thread::sleep_for(200ms);  // nothing else may come: e.g. an answer to request 99

    client.stop();
    runner.join();
    run.hello = fake.hello();
    run.calls = calls->calls();
    const auto received = fake.received();
    run.answer_count = received.size();
    for (const auto& m : received) {
        const std::string& match_id = m.has_rotation() ? m.rotation().match_id()
                                                       : m.action().match_id();
        run.answers[match_id].push_back(describe_answer(m));
    }
    run.log = captured.text();
    return run;
}

TEST(bundles_are_handled_like_messages_sent_alone) {
    const BundleRun alone = play_two_matches(/*bundled=*/false);
    const BundleRun bundled = play_two_matches(/*bundled=*/true);

    // Hello always says the kit reads bundles.
    CHECK(alone.hello.accepts_bundles());
    CHECK(bundled.hello.accepts_bundles());

    // Alone: each match's messages reach its bot in order, and each request is answered.
    const std::map<std::string, std::vector<std::string>> calls{
        {"m-a", {"start seat 0", "rotate 1", "act 2", "match end"}},
        {"m-b", {"start seat 2", "act 1", "act 2", "round end", "match end"}}};
    const std::map<std::string, std::vector<std::string>> answers{
        {"m-a", {"m-a rotation 1 rotate", "m-a action 2 show(1,1)"}},
        {"m-b", {"m-b action 1 show(1,1)", "m-b action 2 show(1,1)"}}};
    CHECK(alone.calls == calls);
    CHECK(alone.answers == answers);
    CHECK_EQ(alone.answer_count, std::size_t{4});
    CHECK_EQ(alone.exit_code, 0);

    // Bundled: exactly the same, and the nested bundle (request 99, a RoundEnded) is ignored.
    CHECK(bundled.calls == alone.calls);
    CHECK(bundled.answers == alone.answers);
    CHECK_EQ(bundled.answer_count, std::size_t{4});
    CHECK_EQ(bundled.exit_code, 0);
    CHECK_EQ(count_of(bundled.log, "ignoring a bundle nested in a bundle"), std::size_t{1});
    CHECK_EQ(count_of(alone.log, "ignoring a bundle nested in a bundle"), std::size_t{0});
    if (bundled.calls != alone.calls || bundled.answers != alone.answers) {
        std::cerr << "alone log:\n" << alone.log << "bundled log:\n" << bundled.log;
    }
}

// --- the example strategy ------------------------------------------------------------------------

TEST(strategy_prefers_longest_show) {
    // PROTOCOL.md §15 step 7: faces 9 2 6 2 7 5 2 1 3 4 6 1, clear table. The 2-card runs are
    // 2-1 (positions 6-7, strength 65) and 3-4 (positions 8-9, strength 67): take 3-4.
    const std::vector<int> faces{9, 2, 6, 2, 7, 5, 2, 1, 3, 4, 6, 1};
    const auto a = choose_action(request(faces, all_groups(faces)));
    CHECK(a.has_show());
    CHECK_EQ(a.show().start(), 8);
    CHECK_EQ(a.show().length(), 2);
}

TEST(strategy_set_beats_run_then_higher_lowest) {
    // faces 3 4 . 4 4 . 8 9 : run 3-4 (67), set 4-4 (84), run 8-9 (72) -> the set.
    std::vector<int> faces{3, 4, 1, 4, 4, 1, 8, 9};
    auto a = choose_action(request(faces, {show(0, 2), show(3, 2), show(6, 2)}));
    CHECK(a.has_show());
    CHECK_EQ(a.show().start(), 3);
    // Only runs: 8-9 beats 3-4 (higher lowest face).
    a = choose_action(request(faces, {show(0, 2), show(6, 2)}));
    CHECK_EQ(a.show().start(), 6);
    // Singles: the highest face.
    a = choose_action(request(faces, {show(0, 1), show(7, 1), show(6, 1)}));
    CHECK_EQ(a.show().start(), 7);
}

TEST(strategy_scouts_when_no_show) {
    const auto a = choose_action(request(
        {1, 2, 3}, {}, {scout_move(v1::END_LEFT, true, 2), scout_move(v1::END_RIGHT, false, 0)}));
    CHECK(a.has_scout());
    CHECK(scout::same_scout(a.scout(), scout_move(v1::END_LEFT, true, 2)));
}

TEST(strategy_answers_are_always_listed) {
    // A pseudo-random sweep: whatever the hand, the example answer passes check_action.
    unsigned seed = 12345;
    const auto next = [&] { return (seed = seed * 1103515245u + 12345u) >> 16; };
    for (int round = 0; round < 200; ++round) {
        std::vector<int> faces;
        const int n = 1 + static_cast<int>(next() % 12);
        for (int i = 0; i < n; ++i) faces.push_back(1 + static_cast<int>(next() % 10));
        auto shows = all_groups(faces);
        std::vector<v1::Scout> scouts;
        if (next() % 2) {
            shows.erase(shows.begin(), shows.begin() + static_cast<long>(next() % shows.size()));
            for (int at = 0; at <= n; ++at) scouts.push_back(scout_move(v1::END_LEFT, false, at));
        }
        const auto r = request(faces, shows, scouts);
        const auto a = choose_action(r);
        CHECK(!scout::check_action(a, r).has_value());
    }
}

}  // namespace

int main() {
    for (const auto& [name, fn] : registry()) {
        const int before = g_failures;
        fn();
        std::cout << (g_failures == before ? "ok   " : "FAIL ") << name << "\n";
    }
    std::cout << g_checks << " checks, " << g_failures << " failures\n";
    return g_failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
