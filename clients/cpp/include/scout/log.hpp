// Minimal thread-safe logging to stderr (stdout is left to the bot author).
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace scout {

enum class LogLevel { Debug = 0, Info = 1, Warning = 2, Error = 3 };

/// Messages below this level are dropped. Default: Info.
void set_log_level(LogLevel level);
LogLevel log_level();

/// Writes one line "HH:MM:SS.mmm LEVEL message" to stderr.
void log_line(LogLevel level, std::string_view message);

template <class... Parts>
void log(LogLevel level, const Parts&... parts) {
    if (level < log_level()) return;
    std::ostringstream out;
    (out << ... << parts);
    log_line(level, out.str());
}

template <class... Parts>
void log_debug(const Parts&... parts) { log(LogLevel::Debug, parts...); }
template <class... Parts>
void log_info(const Parts&... parts) { log(LogLevel::Info, parts...); }
template <class... Parts>
void log_warning(const Parts&... parts) { log(LogLevel::Warning, parts...); }
template <class... Parts>
void log_error(const Parts&... parts) { log(LogLevel::Error, parts...); }

}  // namespace scout
