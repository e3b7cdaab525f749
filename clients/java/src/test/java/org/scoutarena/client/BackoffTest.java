package org.scoutarena.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class BackoffTest {

  @Test
  void stepsDoubleFromTwoHundredMillisecondsUpToFiveSeconds() {
    long[] expected = {200, 400, 800, 1600, 3200, 5000, 5000, 5000};
    for (int attempt = 0; attempt < expected.length; attempt++) {
      assertEquals(Duration.ofMillis(expected[attempt]), Backoff.step(attempt));
    }
    assertEquals(Backoff.MAX, Backoff.step(1_000_000));
    assertEquals(Backoff.INITIAL, Backoff.step(-3));
  }

  @Test
  void afterAGoodbyeWaitsRetryAfterPlusALittleJitter() {
    SplittableRandom random = new SplittableRandom(7);
    for (int i = 0; i < 2000; i++) {
      long delay = Backoff.afterGoodbye(800, random).toMillis();
      assertTrue(delay >= 800 && delay <= 980, "delay " + delay);
    }
    assertTrue(Backoff.afterGoodbye(0, random).toMillis() <= 100);
    assertTrue(Backoff.afterGoodbye(-1, random).toMillis() >= 4_294_967_295L, "unsigned");
  }

  @Test
  void jitterStaysBetweenHalfAndAllOfTheStep() {
    SplittableRandom random = new SplittableRandom(7);
    for (int attempt = 0; attempt < 12; attempt++) {
      long step = Backoff.step(attempt).toMillis();
      long lowest = Long.MAX_VALUE;
      long highest = 0;
      for (int i = 0; i < 2000; i++) {
        long delay = Backoff.delay(attempt, random).toMillis();
        assertTrue(delay >= step / 2 && delay <= step, "delay " + delay + " for step " + step);
        lowest = Math.min(lowest, delay);
        highest = Math.max(highest, delay);
      }
      assertTrue(highest - lowest > step / 4, "the delays should spread out");
    }
  }
}
