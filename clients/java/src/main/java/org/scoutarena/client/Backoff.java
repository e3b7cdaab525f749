package org.scoutarena.client;

import java.time.Duration;
import java.util.random.RandomGenerator;

/**
 * Reconnect delays: 0.2 s doubling up to 5 s, with jitter (half to all of the step); and the wait
 * the referee asks for in a {@code Goodbye}.
 */
public final class Backoff {

  /** The first step. */
  public static final Duration INITIAL = Duration.ofMillis(200);
  /** The largest step. */
  public static final Duration MAX = Duration.ofSeconds(5);

  private Backoff() {}

  /** The step (without jitter) before reconnect {@code attempt} (0-based). */
  public static Duration step(int attempt) {
    int doublings = Math.max(0, Math.min(attempt, 16));
    long millis = INITIAL.toMillis() << doublings;
    return Duration.ofMillis(Math.min(MAX.toMillis(), millis));
  }

  /**
   * The delay before reconnect {@code attempt}: a uniform draw from half to all of the step, so
   * many bots of one host do not reconnect in lockstep.
   */
  public static Duration delay(int attempt, RandomGenerator random) {
    long step = step(attempt).toMillis();
    long low = step / 2;
    return Duration.ofMillis(low + random.nextLong(step - low + 1));
  }

  /**
   * The wait before reconnecting after a {@code Goodbye} with {@code reconnect: true}: its
   * {@code retry_after_ms} (unsigned) plus a little jitter, up to a tenth of it plus 100 ms, so
   * that many bots do not come back at the same instant. Not a failure: no backoff step.
   */
  public static Duration afterGoodbye(int retryAfterMs, RandomGenerator random) {
    long base = Integer.toUnsignedLong(retryAfterMs);
    return Duration.ofMillis(base + random.nextLong(base / 10 + 100 + 1));
  }
}
