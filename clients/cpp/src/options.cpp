#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <sstream>

#include "scout/client.hpp"

namespace scout {
namespace {

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

std::optional<bool> parse_bool(const std::string& text) {
    const std::string value = lower(text);
    if (value.empty() || value == "0" || value == "false" || value == "no" || value == "off") {
        return false;
    }
    if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
    return std::nullopt;
}

std::optional<int> parse_int(const std::string& text) {
    int value = 0;
    const char* first = text.data();
    const char* last = text.data() + text.size();
    const auto [end, error] = std::from_chars(first, last, value);
    if (error != std::errc() || end != last || text.empty()) return std::nullopt;
    return value;
}

}  // namespace

std::string usage(const std::string& program) {
    std::ostringstream out;
    out << "usage: " << program << " [options]\n"
        << "\n"
        << "Plays Scout Arena matches on a referee. Settings come from the environment; flags\n"
        << "override them.\n"
        << "\n"
        << "  --address HOST:PORT   referee, or unix:/PATH   (SCOUT_ADDRESS, required)\n"
        << "  --token TOKEN         bot token                  (SCOUT_TOKEN, required)\n"
        << "  --tls                 connect with TLS           (SCOUT_TLS=1)\n"
        << "  --ca-cert FILE        PEM CA to trust (TLS)      (SCOUT_CA_CERT)\n"
        << "  --client-cert FILE    PEM client certificate for mutual TLS\n"
        << "  --client-key FILE     PEM client key for mutual TLS\n"
        << "  --name NAME           name sent in Hello         (SCOUT_BOT_NAME)\n"
        << "  --concurrency N       matches at once            (SCOUT_CONCURRENCY, default 8)\n"
        << "  --margin-ms N         send the fallback N ms before deadline+bank (default 200)\n"
        << "  --no-fallback         never answer for a late bot (to test TIMED_OUT)\n"
        << "  --slow-ms N           delay every decision by N ms (to test deadlines)\n"
        << "  --max-matches N       exit 0 after N matches have ended\n"
        << "  --shutdown-give-up-ms N  after a shutdown goodbye, give up reconnecting after N ms\n"
        << "                        (exit 1; default 900000: 15 minutes)\n"
        << "  --public-events       ask for every public event and accepted result, not a lean\n"
        << "                        stream                     (SCOUT_PUBLIC_EVENTS=1)\n"
        << "  -v, --verbose         debug logging;  -q, --quiet: warnings and errors only\n"
        << "  -h, --help            this help\n"
        << "\n"
        << "Exit status: 0 when stopped (SIGINT/SIGTERM, --max-matches), 1 when the referee\n"
        << "rejects the bot (bad token, protocol error, superseded) or is not back within\n"
        << "--shutdown-give-up-ms of a shutdown goodbye, 2 on a usage error.\n";
    return out.str();
}

ParsedOptions parse_options(const std::vector<std::string>& args,
                            const std::function<const char*(const char*)>& getenv) {
    ParsedOptions parsed;
    Options& o = parsed.options;
    const auto env = [&](const char* name) -> std::optional<std::string> {
        const char* value = getenv(name);
        if (value == nullptr || *value == '\0') return std::nullopt;
        return std::string(value);
    };
    const auto fail = [&](std::string message) {
        parsed.error = std::move(message);
        return parsed;
    };

    if (auto v = env("SCOUT_ADDRESS")) o.address = *v;
    if (auto v = env("SCOUT_TOKEN")) o.token = *v;
    if (auto v = env("SCOUT_TLS")) {
        const auto tls = parse_bool(*v);
        if (!tls) return fail("SCOUT_TLS must be 1 or 0, not '" + *v + "'");
        o.tls = *tls;
    }
    if (auto v = env("SCOUT_CA_CERT")) o.ca_cert = *v;
    if (auto v = env("SCOUT_BOT_NAME")) o.bot_name = *v;
    if (auto v = env("SCOUT_CONCURRENCY")) {
        const auto n = parse_int(*v);
        if (!n || *n < 1) return fail("SCOUT_CONCURRENCY must be a positive integer, not '" + *v + "'");
        o.concurrency = *n;
    }
    if (auto v = env("SCOUT_PUBLIC_EVENTS")) {
        const auto full = parse_bool(*v);
        if (!full) return fail("SCOUT_PUBLIC_EVENTS must be 1 or 0, not '" + *v + "'");
        o.public_events = *full;
    }

    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string flag = args[i];
        std::optional<std::string> inline_value;
        if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
            inline_value = flag.substr(eq + 1);
            flag = flag.substr(0, eq);
        }
        const auto value = [&]() -> std::optional<std::string> {
            if (inline_value) return inline_value;
            if (i + 1 < args.size()) return args[++i];
            return std::nullopt;
        };
        const auto int_value = [&](int minimum) -> std::optional<int> {
            const auto text = value();
            if (!text) return std::nullopt;
            const auto n = parse_int(*text);
            if (!n || *n < minimum) return std::nullopt;
            return n;
        };
        const auto no_value = [&] { return !inline_value.has_value(); };

        if (flag == "-h" || flag == "--help") {
            parsed.help = true;
            return parsed;
        } else if (flag == "-v" || flag == "--verbose") {
            o.log_level = LogLevel::Debug;
        } else if (flag == "-q" || flag == "--quiet") {
            o.log_level = LogLevel::Warning;
        } else if (flag == "--tls" && no_value()) {
            o.tls = true;
        } else if (flag == "--no-fallback" && no_value()) {
            o.safety_fallback = false;
        } else if (flag == "--public-events" && no_value()) {
            o.public_events = true;
        } else if (flag == "--address" || flag == "--token" || flag == "--ca-cert" ||
                   flag == "--client-cert" || flag == "--client-key" || flag == "--name") {
            const auto text = value();
            if (!text || text->empty()) return fail(flag + " needs a value");
            if (flag == "--address") o.address = *text;
            else if (flag == "--token") o.token = *text;
            else if (flag == "--ca-cert") o.ca_cert = *text;
            else if (flag == "--client-cert") o.client_cert = *text;
            else if (flag == "--client-key") o.client_key = *text;
            else o.bot_name = *text;
        } else if (flag == "--concurrency") {
            const auto n = int_value(1);
            if (!n) return fail("--concurrency needs a positive integer");
            o.concurrency = *n;
        } else if (flag == "--margin-ms") {
            const auto n = int_value(0);
            if (!n) return fail("--margin-ms needs a non-negative integer");
            o.margin_ms = *n;
        } else if (flag == "--slow-ms") {
            const auto n = int_value(0);
            if (!n) return fail("--slow-ms needs a non-negative integer");
            o.slow_ms = *n;
        } else if (flag == "--max-matches") {
            const auto n = int_value(0);
            if (!n) return fail("--max-matches needs a non-negative integer");
            o.max_matches = *n;
        } else if (flag == "--shutdown-give-up-ms") {
            const auto n = int_value(1);
            if (!n) return fail("--shutdown-give-up-ms needs a positive integer");
            o.shutdown_give_up = std::chrono::milliseconds(*n);
        } else {
            return fail("unknown argument '" + args[i] + "' (see --help)");
        }
    }

    if (!o.ca_cert.empty() || !o.client_cert.empty()) o.tls = true;
    if (o.client_cert.empty() != o.client_key.empty()) {
        return fail("--client-cert and --client-key go together");
    }
    if (o.address.empty()) return fail("no referee address: set SCOUT_ADDRESS or pass --address");
    if (o.token.empty()) return fail("no bot token: set SCOUT_TOKEN or pass --token");
    return parsed;
}

v1::BotMessage hello_message(const Options& options) {
    v1::BotMessage message;
    auto* hello = message.mutable_hello();
    hello->set_bot_name(options.bot_name);
    hello->set_bot_version(options.bot_version);
    hello->set_protocol_version(kProtocolVersion);
    hello->set_max_concurrent_matches(static_cast<std::uint32_t>(std::max(1, options.concurrency)));
    hello->set_lean(!options.public_events);
    hello->set_accepts_bundles(true);  // the client unpacks RefereeMessage.bundle (§3.6.2)
    return message;
}

}  // namespace scout
