// A minimal logger. Everything goes to stderr: stdout is left to the bot author.

export type Level = "debug" | "info" | "warn" | "error";

const RANK: Readonly<Record<Level, number>> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** A logger writing `ISO-time LEVEL name: message` lines at `level` and above to stderr. */
export function createLogger(name: string, level: Level = "info"): Logger {
  const write = (at: Level, message: string): void => {
    if (RANK[at] >= RANK[level]) {
      process.stderr.write(`${new Date().toISOString()} ${at.toUpperCase()} ${name}: ${message}\n`);
    }
  };
  return {
    debug: (message) => write("debug", message),
    info: (message) => write("info", message),
    warn: (message) => write("warn", message),
    error: (message) => write("error", message),
  };
}

/** A logger that drops everything. */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
