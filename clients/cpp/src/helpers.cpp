#include "scout/helpers.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <sstream>

namespace scout {

bool is_set(const std::vector<int>& faces) {
    return !faces.empty() &&
           std::all_of(faces.begin(), faces.end(), [&](int f) { return f == faces.front(); });
}

bool is_group(const std::vector<int>& faces) {
    if (faces.empty()) return false;
    if (faces.size() == 1) return true;
    const int step = faces[1] - faces[0];
    if (step < -1 || step > 1) return false;
    for (std::size_t i = 1; i < faces.size(); ++i) {
        if (faces[i] - faces[i - 1] != step) return false;
    }
    return true;
}

int group_strength(const std::vector<int>& faces) {
    if (faces.empty()) return 0;
    const int lowest = *std::min_element(faces.begin(), faces.end());
    return 32 * static_cast<int>(faces.size()) + (is_set(faces) ? 16 : 0) + lowest;
}

std::vector<int> faces_at(const Hand& hand, int start, int length) {
    std::vector<int> faces;
    if (start < 0 || length < 1 || start + length > hand.size()) return faces;
    faces.reserve(static_cast<std::size_t>(length));
    for (int i = start; i < start + length; ++i) faces.push_back(hand.Get(i).face());
    return faces;
}

int show_strength(const Hand& hand, const v1::Show& show) {
    const auto faces = faces_at(hand, show.start(), show.length());
    return faces.empty() ? -1 : group_strength(faces);
}

v1::Action fallback_action(const v1::DecisionRequest& request) {
    v1::Action action;
    if (!request.legal_shows().empty()) {
        *action.mutable_show() = request.legal_shows(0);
    } else {
        auto* scout = action.mutable_scout();
        scout->set_end(v1::END_LEFT);
        scout->set_flip(false);
        scout->set_insert_at(0);
    }
    return action;
}

bool same_show(const v1::Show& a, const v1::Show& b) {
    return a.start() == b.start() && a.length() == b.length();
}

bool same_scout(const v1::Scout& a, const v1::Scout& b) {
    return a.end() == b.end() && a.flip() == b.flip() && a.insert_at() == b.insert_at();
}

std::optional<std::string> check_action(const v1::Action& action,
                                        const v1::DecisionRequest& request) {
    const auto listed_show = [&](const v1::Show& show) {
        return std::any_of(request.legal_shows().begin(), request.legal_shows().end(),
                           [&](const v1::Show& legal) { return same_show(legal, show); });
    };
    const auto listed_scout = [&](const v1::Scout& scout) {
        return std::any_of(request.legal_scouts().begin(), request.legal_scouts().end(),
                           [&](const v1::Scout& legal) { return same_scout(legal, scout); });
    };
    switch (action.kind_case()) {
        case v1::Action::kShow:
            if (!listed_show(action.show())) return "the Show is not among the legal shows";
            return std::nullopt;
        case v1::Action::kScout:
            if (!listed_scout(action.scout())) return "the Scout is not among the legal scouts";
            return std::nullopt;
        case v1::Action::kScoutAndShow: {
            if (!request.scout_and_show_available()) return "Scout & Show is not available now";
            const auto& both = action.scout_and_show();
            if (!listed_scout(both.scout())) {
                return "the Scout part is not among the legal scouts";
            }
            const int new_size = request.observation().hand_size() + 1;
            const auto& show = both.show();
            if (show.start() < 0 || show.length() < 1 || show.start() + show.length() > new_size) {
                return "the Show part is outside the hand after the Scout";
            }
            return std::nullopt;
        }
        case v1::Action::KIND_NOT_SET:
            break;
    }
    return "the action is empty";
}

std::string describe(const v1::Action& action) {
    std::ostringstream out;
    const auto scout_text = [&](const v1::Scout& s) {
        out << "scout(" << (s.end() == v1::END_LEFT ? "L" : s.end() == v1::END_RIGHT ? "R" : "?")
            << (s.flip() ? ",flip," : ",") << s.insert_at() << ")";
    };
    switch (action.kind_case()) {
        case v1::Action::kShow:
            out << "show(" << action.show().start() << "," << action.show().length() << ")";
            break;
        case v1::Action::kScout:
            scout_text(action.scout());
            break;
        case v1::Action::kScoutAndShow:
            scout_text(action.scout_and_show().scout());
            out << "+show(" << action.scout_and_show().show().start() << ","
                << action.scout_and_show().show().length() << ")";
            break;
        case v1::Action::KIND_NOT_SET:
            out << "(empty)";
            break;
    }
    return out.str();
}

std::chrono::milliseconds backoff_delay(int attempt, double unit_random) {
    constexpr std::int64_t initial_ms = 200;
    constexpr std::int64_t max_ms = 5000;
    const int shift = std::clamp(attempt, 0, 16);
    const std::int64_t step = std::min(max_ms, initial_ms << shift);
    const double jitter = 0.5 + 0.5 * std::clamp(unit_random, 0.0, 1.0);
    return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(step) * jitter));
}

std::chrono::milliseconds goodbye_delay(std::uint32_t retry_after_ms, double unit_random) {
    const auto base = static_cast<std::int64_t>(retry_after_ms);
    const double jitter = static_cast<double>(base / 10 + 100) * std::clamp(unit_random, 0.0, 1.0);
    return std::chrono::milliseconds(base + static_cast<std::int64_t>(jitter));
}

std::chrono::milliseconds answer_budget(std::uint32_t deadline_ms, std::uint32_t time_bank_ms,
                                        int margin_ms, bool use_bank) {
    const std::int64_t total = static_cast<std::int64_t>(deadline_ms) +
                               (use_bank ? static_cast<std::int64_t>(time_bank_ms) : 0) -
                               margin_ms;
    return std::chrono::milliseconds(std::max<std::int64_t>(0, total));
}

bool is_permanent_rejection(grpc::StatusCode code, const std::string& details) {
    switch (code) {
        case grpc::StatusCode::UNAUTHENTICATED:
        case grpc::StatusCode::PERMISSION_DENIED:
        case grpc::StatusCode::INVALID_ARGUMENT:
        case grpc::StatusCode::FAILED_PRECONDITION:
        case grpc::StatusCode::UNIMPLEMENTED:
            return true;
        case grpc::StatusCode::ABORTED: {
            std::string lower(details);
            std::transform(lower.begin(), lower.end(), lower.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            return lower.find("superseded") != std::string::npos;
        }
        default:
            return false;
    }
}

std::string status_code_name(grpc::StatusCode code) {
    switch (code) {
        case grpc::StatusCode::OK: return "OK";
        case grpc::StatusCode::CANCELLED: return "CANCELLED";
        case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
        case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
        case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
        case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
        case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
        case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
        case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
        case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
        case grpc::StatusCode::ABORTED: return "ABORTED";
        case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
        case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
        case grpc::StatusCode::INTERNAL: return "INTERNAL";
        case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
        case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
        case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
        default: break;
    }
    return "STATUS_" + std::to_string(static_cast<int>(code));
}

void NodeTickets::add(const std::string& address, const std::string& match_id,
                      const std::string& ticket) {
    end_match(match_id);
    by_address_[address].push_back(Held{match_id, ticket});
}

void NodeTickets::end_match(const std::string& match_id) {
    for (auto it = by_address_.begin(); it != by_address_.end();) {
        auto& held = it->second;
        held.erase(std::remove_if(held.begin(), held.end(),
                                  [&](const Held& h) { return h.match_id == match_id; }),
                   held.end());
        it = held.empty() ? by_address_.erase(it) : std::next(it);
    }
}

void NodeTickets::refuse(const std::string& address, const std::string& ticket) {
    const auto it = by_address_.find(address);
    if (it == by_address_.end()) return;
    auto& held = it->second;
    held.erase(std::remove_if(held.begin(), held.end(),
                              [&](const Held& h) { return h.ticket == ticket; }),
               held.end());
    if (held.empty()) by_address_.erase(it);
}

std::optional<std::string> NodeTickets::newest(const std::string& address) const {
    const auto it = by_address_.find(address);
    if (it == by_address_.end()) return std::nullopt;
    return it->second.back().ticket;
}

std::size_t NodeTickets::drop_address(const std::string& address) {
    const auto it = by_address_.find(address);
    if (it == by_address_.end()) return 0;
    const std::size_t dropped = it->second.size();
    by_address_.erase(it);
    return dropped;
}

}  // namespace scout
