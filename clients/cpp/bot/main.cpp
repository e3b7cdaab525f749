// scout-bot: the example bot program. Reads the launch convention (SCOUT_ADDRESS, SCOUT_TOKEN,
// SCOUT_TLS, SCOUT_CA_CERT, SCOUT_BOT_NAME, SCOUT_CONCURRENCY; flags override), plays until
// SIGINT/SIGTERM or the referee's Goodbye without reconnect (exit 0) or until the referee rejects
// it (exit 1). Logs go to stderr.
//
// The logic is choose_action() in strategy.cpp; this file only wires it to the client library.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <pthread.h>
#include <string>
#include <thread>
#include <vector>

#include "scout/client.hpp"
#include "strategy.hpp"

int main(int argc, char** argv) {
    // Block SIGINT/SIGTERM in every thread (gRPC's included, so block before creating any);
    // one thread waits for them and stops the client gracefully.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    const std::string program = argc > 0 ? argv[0] : "scout-bot";
    const auto parsed = scout::parse_options(std::vector<std::string>(argv + 1, argv + argc),
                                             [](const char* name) { return std::getenv(name); });
    if (parsed.help) {
        std::cout << scout::usage(program);
        return 0;
    }
    if (!parsed.error.empty()) {
        std::cerr << program << ": " << parsed.error << "\n";
        return 2;
    }

    auto client = std::make_shared<scout::Client>(
        parsed.options, [] { return std::make_unique<scout::FunctionBot>(choose_action); });

    std::thread([client, signals] {
        int received = 0;
        sigwait(&signals, &received);
        scout::log_info("received ", received == SIGTERM ? "SIGTERM" : "SIGINT", "; stopping");
        client->stop();
    }).detach();

    const int exit_code = client->run();
    if (!client->workers_finished()) {
        // A bot call is still running: do not wait for it (or run destructors under it).
        std::fflush(nullptr);
        std::_Exit(exit_code);
    }
    return exit_code;
}
