// When and how soon to reconnect. Pure, so that it can be unit-tested.

import { status as Status } from "@grpc/grpc-js";

export const BACKOFF_INITIAL_MS = 200;
export const BACKOFF_MAX_MS = 5_000;

/**
 * Milliseconds to wait before reconnect `attempt` (0-based): 0.2 s doubling up to 5 s, with
 * jitter (half to all of the step) so that many bots on one host do not reconnect in lockstep.
 * `random` returns a number in [0, 1).
 */
export function backoffDelayMs(attempt: number, random: () => number = Math.random): number {
  const doublings = Math.min(Math.max(0, Math.floor(attempt)), 16);
  const step = Math.min(BACKOFF_MAX_MS, BACKOFF_INITIAL_MS * 2 ** doublings);
  return step * (0.5 + 0.5 * random());
}

/**
 * Milliseconds to wait before reconnecting after a `Goodbye{reconnect: true}` (PROTOCOL.md
 * §10.1): the referee's `retry_after_ms` plus a little jitter (up to a tenth of it, plus
 * 100 ms), so that many bots do not come back at the same instant. Not a failure: it does not
 * grow the backoff.
 */
export function goodbyeDelayMs(retryAfterMs: number, random: () => number = Math.random): number {
  const base = Math.max(0, Number(retryAfterMs) || 0);
  return base + (base / 10 + 100) * random();
}

/** Statuses that a retry would only repeat: the bot's configuration or code must change. */
const NEVER_RETRY: ReadonlySet<Status> = new Set([
  Status.UNAUTHENTICATED,
  Status.PERMISSION_DENIED,
  Status.INVALID_ARGUMENT,
  Status.FAILED_PRECONDITION,
  Status.UNIMPLEMENTED,
]);

/**
 * Whether a Play call that ended with this status must not be retried: a rejection (bad token,
 * not a Hello, wrong protocol, no Arena service) or ABORTED "superseded" (another process took
 * over the token; reconnecting would only take it back and forth). Everything else, including
 * UNAVAILABLE, CANCELLED, INTERNAL, DEADLINE_EXCEEDED and a plain end of the stream, is a
 * connection loss to recover from.
 */
export function isRejection(code: Status, details: string): boolean {
  if (NEVER_RETRY.has(code)) {
    return true;
  }
  return code === Status.ABORTED && /superseded/i.test(details);
}

/** The name of a gRPC status code ("UNAVAILABLE"), or its number when unknown. */
export function statusName(code: number): string {
  return Status[code] ?? String(code);
}
