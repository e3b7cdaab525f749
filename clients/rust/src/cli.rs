//! The `main` of a bot program: settings from the environment and flags, a stderr logger, a
//! Tokio runtime, graceful stop on SIGINT/SIGTERM, and the exit status.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use log::{Level, LevelFilter, Log, Metadata, Record, info};

use crate::bot::Bot;
use crate::client::{Error, run};
use crate::config::{Config, Parsed, USAGE};

/// How long to wait, on exit, for bot threads still thinking.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// Runs `bot` as a bot program and returns its exit status: 0 after a stop (SIGINT, SIGTERM,
/// `--max-matches`, the referee's `Goodbye` without reconnect), 1 when the referee rejects the bot, 2 for a usage problem. Problems are
/// reported as one line on stderr.
pub fn main<B: Bot>(bot: B) -> ExitCode {
    let config = match Config::from_env_and_args() {
        Ok(Parsed::Run(config)) => *config,
        Ok(Parsed::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Version) => {
            println!("scout-bot {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(problem) => return fail(&problem.to_string(), 2),
    };
    init_logger(if config.verbose {
        LevelFilter::Debug
    } else {
        LevelFilter::Info
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the runtime: {e}"), 1),
    };
    let result = runtime.block_on(run(config, bot, stop_signal()));
    // A bot thread that overran cannot be stopped; do not wait for it for long.
    runtime.shutdown_timeout(EXIT_GRACE);
    match result {
        Ok(summary) => {
            info!("stopped after {} match(es)", summary.matches_finished);
            ExitCode::SUCCESS
        }
        Err(Error::Config(problem)) => fail(&problem, 2),
        Err(problem) => fail(&problem.to_string(), 1),
    }
}

fn fail(message: &str, code: u8) -> ExitCode {
    let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    eprintln!("scout-bot: error: {line}");
    ExitCode::from(code)
}

/// Completes on the first SIGINT or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    info!("stopping");
}

/// Logs `LEVEL target: message` lines to stderr, with seconds since start.
struct StderrLogger {
    start: Instant,
    level: LevelFilter,
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        // Only this crate's messages at debug level; dependencies from warnings up.
        metadata.level() <= self.level
            && (metadata.target().starts_with("scout") || metadata.level() <= Level::Warn)
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            let elapsed = self.start.elapsed().as_secs_f64();
            let _ = writeln!(
                std::io::stderr().lock(),
                "[{elapsed:9.3}] {:<5} {}",
                record.level(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

/// Installs the stderr logger (does nothing when a logger is installed already).
pub fn init_logger(level: LevelFilter) {
    let logger = StderrLogger {
        start: Instant::now(),
        level,
    };
    if log::set_logger(Box::leak(Box::new(logger))).is_ok() {
        log::set_max_level(level);
    }
}
