//! # Scout Arena client for Rust
//!
//! A small library that plays a SCOUT bot on a Scout Arena referee: it connects over gRPC
//! (`scout.v1.Arena/Play`, metadata `authorization: Bearer <token>`), says Hello, routes the
//! referee's messages of several concurrent matches, answers rotation and decision requests with
//! your [`Bot`], keeps every answer inside the referee's clock (falling back to a legal move
//! when the bot is late), and reconnects with exponential backoff when the stream is lost. It
//! also follows a ladder's match assignments to other referee nodes (PROTOCOL.md §3.8), so a
//! bot plays those matches like any other.
//!
//! ```no_run
//! use scout_client::proto::{Action, DecisionRequest};
//! use scout_client::{Bot, Config, fallback_action};
//!
//! struct MyBot;
//!
//! impl Bot for MyBot {
//!     fn decide(&self, request: &DecisionRequest) -> Action {
//!         fallback_action(request) // the first legal Show, else a Scout
//!     }
//! }
//!
//! # async fn play() -> Result<(), scout_client::Error> {
//! let config = Config::new("127.0.0.1:50051", "my-token");
//! scout_client::run(config, MyBot, std::future::pending()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! A bot program usually hands everything to [`cli::main`], which follows the launch
//! convention (environment `SCOUT_ADDRESS`, `SCOUT_TOKEN`, ... overridden by flags), logs to
//! stderr and exits 0 on SIGINT/SIGTERM or on the referee's `Goodbye` without reconnect, and 1
//! when the referee rejects the bot.

pub mod cli;
pub mod config;
pub mod game;

mod bot;
mod client;
mod target;

/// Types and client stubs generated at build time from `proto/scout/v1/*.proto`.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    tonic::include_proto!("scout.v1");
}

pub use bot::Bot;
pub use client::{
    BACKOFF_INITIAL, BACKOFF_MAX, Error, KEEPALIVE_INTERVAL, NODE_UNREACHABLE_CUTOFF,
    PROTOCOL_VERSION, Summary, backoff_delay, end_status, goodbye_delay, is_rejection, run,
};
pub use config::Config;
pub use game::{check_action, fallback_action, group_strength, hand_faces, show_strength};
