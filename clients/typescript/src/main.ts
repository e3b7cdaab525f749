// The bot program: `node dist/main.js`. Reads the launch convention (SCOUT_ADDRESS, SCOUT_TOKEN,
// SCOUT_TLS, SCOUT_CA_CERT, SCOUT_BOT_NAME, SCOUT_CONCURRENCY, SCOUT_PUBLIC_EVENTS; flags
// override), plays the bot of src/bot.ts until SIGTERM/SIGINT or the referee's
// Goodbye{reconnect: false} (exit 0), and exits 1 with a one-line message when the referee
// rejects it (unknown token, superseded, ...) or is not back within --shutdown-give-up-ms of a
// shutdown Goodbye, 2 on a usage error.

import { chooseAction } from "./bot";
import { resolveConfig, type Config } from "./lib/config";
import {
  ConnectionLost,
  ConnectionRejected,
  KIT_VERSION,
  ReconnectGaveUp,
  createLogger,
  runBot,
  type Bot,
  type Logger,
} from "./lib";

const PROGRAM = "scout-bot";

/** The bot: `chooseAction` from src/bot.ts. Add `chooseRotation` or `on…` hooks here if you like. */
function makeBot(config: Config, log: Logger): Bot {
  const bot: Bot = { chooseAction };
  return config.slowMs > 0 ? slowedDown(bot, config.slowMs, log) : bot;
}

/**
 * Testing aid for --slow-ms: blocks the whole event loop before each decision, as a CPU-bound
 * bot would. A blocked event loop cannot send the fallback in time, so this shows how the referee
 * times a bot out (TIMED_OUT, a strike, the fallback played by the referee).
 */
function slowedDown(bot: Bot, ms: number, log: Logger): Bot {
  log.warn(`--slow-ms ${ms}: every decision blocks for ${ms} ms (testing timeouts)`);
  const cell = new Int32Array(new SharedArrayBuffer(4));
  return {
    ...bot,
    chooseAction(turn, context) {
      Atomics.wait(cell, 0, 0, ms);
      return bot.chooseAction(turn, context);
    },
  };
}

function fail(message: string): void {
  process.stderr.write(`${PROGRAM}: error: ${message.split(/\s+/).join(" ")}\n`);
}

async function main(): Promise<number> {
  const parsed = resolveConfig(process.argv.slice(2), process.env);
  if (parsed.kind === "help") {
    process.stdout.write(`${parsed.text}\n`);
    return 0;
  }
  if (parsed.kind === "error") {
    fail(parsed.message);
    return 2;
  }
  const config = parsed.config;
  const log = createLogger(PROGRAM, config.verbose ? "debug" : "info");

  const stop = new AbortController();
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      process.exit(0); // a second signal: do not wait for the graceful close
    }
    log.info(`${signal}: stopping`);
    stop.abort();
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);

  try {
    const summary = await runBot(makeBot(config, log), {
      address: config.address,
      token: config.token,
      tls: config.tls,
      ...(config.caCert !== undefined && { caCert: config.caCert }),
      ...(config.clientCert !== undefined && { clientCert: config.clientCert }),
      ...(config.clientKey !== undefined && { clientKey: config.clientKey }),
      botName: config.botName,
      botVersion: KIT_VERSION,
      concurrency: config.concurrency,
      safetyMarginMs: config.safetyMarginMs,
      useTimeBank: config.useTimeBank,
      shutdownGiveUpMs: config.shutdownGiveUpMs,
      // Unset: a lean stream unless the bot defines onPublicEvent.
      ...(config.publicEvents && { publicEvents: true }),
      signal: stop.signal,
      logger: log,
    });
    log.info(`stopped after ${summary.matchesFinished} finished match(es)`);
    return 0;
  } catch (error) {
    if (
      error instanceof ConnectionRejected ||
      error instanceof ConnectionLost ||
      error instanceof ReconnectGaveUp
    ) {
      fail(error.message);
      return 1;
    }
    if (error instanceof Error && "code" in error && typeof error.code === "string") {
      fail(error.message); // e.g. ENOENT reading a certificate file
      return 2;
    }
    throw error;
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    fail(error instanceof Error ? error.message : String(error));
    process.exit(1);
  },
);
