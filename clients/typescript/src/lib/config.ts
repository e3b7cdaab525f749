// The launch convention: environment variables, overridden by command-line flags. Pure.

import { parseArgs } from "node:util";

export const DEFAULT_CONCURRENCY = 8;
export const DEFAULT_SAFETY_MARGIN_MS = 150;

export interface Config {
  /** host:port of the referee. */
  address: string;
  /** The bot's token, sent as `authorization: Bearer <token>`. */
  token: string;
  /** Connect with TLS (implied by a CA or client certificate). */
  tls: boolean;
  /** PEM file of a CA to trust instead of the system roots. */
  caCert?: string;
  /** PEM client certificate and key, for referees that require them (mutual TLS). */
  clientCert?: string;
  clientKey?: string;
  /** Display name for Hello (the referee's registered name is authoritative). */
  botName: string;
  /** max_concurrent_matches for Hello. */
  concurrency: number;
  /** Send the fallback this long before deadline + bank runs out. */
  safetyMarginMs: number;
  /** Never draw on the time bank: fall back at the plain deadline. */
  useTimeBank: boolean;
  /** Ask for every PublicEvent and ACCEPTED result instead of a lean stream. */
  publicEvents: boolean;
  /** Testing aid: block for this long in every decision (0: off). */
  slowMs: number;
  /** After a shutdown Goodbye, give up reconnecting after this long (default 15 minutes). */
  shutdownGiveUpMs: number;
  verbose: boolean;
}

export type ConfigResult =
  | { kind: "run"; config: Config }
  | { kind: "help"; text: string }
  | { kind: "error"; message: string };

export const USAGE = `usage: node dist/main.js [options]

Plays the example bot on a Scout Arena referee until SIGTERM/SIGINT.

options (each overrides the environment variable in brackets):
  --address HOST:PORT      referee address, or unix:/PATH [SCOUT_ADDRESS] (required)
  --token TOKEN            bot token [SCOUT_TOKEN] (required)
  --tls                    connect with TLS [SCOUT_TLS=1]
  --ca-cert FILE           PEM of the CA to trust [SCOUT_CA_CERT] (implies --tls)
  --client-cert FILE       PEM client certificate, for mutual TLS (implies --tls)
  --client-key FILE        PEM key of the client certificate
  --name NAME              display name sent in Hello [SCOUT_BOT_NAME]
  --concurrency N          matches to play at once [SCOUT_CONCURRENCY] (default ${DEFAULT_CONCURRENCY})
  --safety-margin-ms MS    send the fallback this long before the limit (default ${DEFAULT_SAFETY_MARGIN_MS})
  --no-time-bank           fall back at the plain deadline, never drawing on the bank
  --public-events          ask for every public event and accepted result, not a lean
                           stream [SCOUT_PUBLIC_EVENTS=1]
  --slow-ms MS             testing: block the event loop MS ms in every decision
  --shutdown-give-up-ms MS after a shutdown goodbye, give up reconnecting after MS
                           (exit 1; default 900000: 15 minutes)
  -v, --verbose            log every message
  -h, --help               show this help`;

const TRUE_WORDS = new Set(["1", "true", "yes", "on"]);

function envFlag(value: string | undefined): boolean {
  return value !== undefined && TRUE_WORDS.has(value.trim().toLowerCase());
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}

function parseCount(text: string, what: string, min: number): number | string {
  const value = Number(text);
  if (!/^\s*\d+\s*$/.test(text) || !Number.isSafeInteger(value) || value < min) {
    return `${what} must be an integer >= ${min}, not ${JSON.stringify(text)}`;
  }
  return value;
}

/** The configuration from command-line arguments (without node and the script) and environment. */
export function resolveConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ConfigResult {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        address: { type: "string" },
        token: { type: "string" },
        tls: { type: "boolean" },
        "ca-cert": { type: "string" },
        "client-cert": { type: "string" },
        "client-key": { type: "string" },
        name: { type: "string" },
        concurrency: { type: "string" },
        "safety-margin-ms": { type: "string" },
        "no-time-bank": { type: "boolean" },
        "public-events": { type: "boolean" },
        "slow-ms": { type: "string" },
        "shutdown-give-up-ms": { type: "string" },
        verbose: { type: "boolean", short: "v" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    return { kind: "error", message: error instanceof Error ? error.message : String(error) };
  }
  if (values.help) {
    return { kind: "help", text: USAGE };
  }
  const address = nonEmpty(values.address) ?? nonEmpty(env["SCOUT_ADDRESS"]);
  if (address === undefined) {
    return {
      kind: "error",
      message: "no referee address: pass --address HOST:PORT or set SCOUT_ADDRESS",
    };
  }
  const token = nonEmpty(values.token) ?? nonEmpty(env["SCOUT_TOKEN"]);
  if (token === undefined) {
    return { kind: "error", message: "no bot token: pass --token TOKEN or set SCOUT_TOKEN" };
  }
  const concurrency = parseCount(
    values.concurrency ?? nonEmpty(env["SCOUT_CONCURRENCY"]) ?? String(DEFAULT_CONCURRENCY),
    "the concurrency",
    1,
  );
  if (typeof concurrency === "string") {
    return { kind: "error", message: concurrency };
  }
  const margin = parseCount(
    values["safety-margin-ms"] ?? String(DEFAULT_SAFETY_MARGIN_MS),
    "--safety-margin-ms",
    0,
  );
  if (typeof margin === "string") {
    return { kind: "error", message: margin };
  }
  const slowMs = parseCount(values["slow-ms"] ?? "0", "--slow-ms", 0);
  if (typeof slowMs === "string") {
    return { kind: "error", message: slowMs };
  }
  const giveUp = parseCount(
    values["shutdown-give-up-ms"] ?? String(15 * 60 * 1000),
    "--shutdown-give-up-ms",
    1,
  );
  if (typeof giveUp === "string") {
    return { kind: "error", message: giveUp };
  }
  const caCert = nonEmpty(values["ca-cert"]) ?? nonEmpty(env["SCOUT_CA_CERT"]);
  const clientCert = nonEmpty(values["client-cert"]);
  const clientKey = nonEmpty(values["client-key"]);
  if ((clientCert === undefined) !== (clientKey === undefined)) {
    return { kind: "error", message: "--client-cert and --client-key go together" };
  }
  const config: Config = {
    address,
    token,
    tls:
      Boolean(values.tls) ||
      envFlag(env["SCOUT_TLS"]) ||
      caCert !== undefined ||
      clientCert !== undefined,
    botName: nonEmpty(values.name) ?? nonEmpty(env["SCOUT_BOT_NAME"]) ?? "typescript-example",
    concurrency,
    safetyMarginMs: margin,
    useTimeBank: !values["no-time-bank"],
    publicEvents: Boolean(values["public-events"]) || envFlag(env["SCOUT_PUBLIC_EVENTS"]),
    slowMs,
    shutdownGiveUpMs: giveUp,
    verbose: Boolean(values.verbose),
  };
  if (caCert !== undefined) {
    config.caCert = caCert;
  }
  if (clientCert !== undefined && clientKey !== undefined) {
    config.clientCert = clientCert;
    config.clientKey = clientKey;
  }
  return { kind: "run", config };
}
