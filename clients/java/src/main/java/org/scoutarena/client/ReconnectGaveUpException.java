package org.scoutarena.client;

import java.time.Duration;

/**
 * The referee said {@code Goodbye} with {@code reconnect: true} (it was shutting down) and did
 * not take the bot back within {@link ClientConfig#shutdownGiveUpMs()}: it was stopped for good
 * (PROTOCOL.md §10.1), so the bot stops trying.
 */
public final class ReconnectGaveUpException extends Exception {
  private static final long serialVersionUID = 1L;

  /** @param after how long the bot kept trying after the Goodbye */
  public ReconnectGaveUpException(Duration after) {
    super("the referee did not come back within " + after.toMillis() / 1000.0
        + " s of its shutdown goodbye; giving up");
  }
}
