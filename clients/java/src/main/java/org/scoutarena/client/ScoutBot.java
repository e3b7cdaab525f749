package org.scoutarena.client;

import org.scoutarena.scout.v1.Action;
import org.scoutarena.scout.v1.DecisionRequest;
import org.scoutarena.scout.v1.MatchEnded;
import org.scoutarena.scout.v1.MatchStart;
import org.scoutarena.scout.v1.Probation;
import org.scoutarena.scout.v1.PublicEvent;
import org.scoutarena.scout.v1.RotationRequest;
import org.scoutarena.scout.v1.RoundEnded;

/**
 * A bot's logic. {@link ArenaClient} handles the connection, the clocks and the protocol and calls
 * these methods; implement the two decisions, and optionally the hooks.
 *
 * <p>Threading: calls about one match are made one at a time, in the order the referee sent the
 * messages; calls about different matches can run at the same time on different threads, so keep
 * per-match state in a concurrent map keyed by {@code match_id}. A call that has not returned
 * shortly before the referee's limit (deadline + time bank) is answered with the documented
 * fallback and its thread is interrupted; what it returns later is dropped. An exception or an
 * answer that is not in the legal lists is replaced by the fallback (no strike).
 */
public interface ScoutBot {

  /** Whether to rotate the dealt hand ({@code request.getHand()}) 180° for this round. */
  boolean chooseRotation(RotationRequest request);

  /**
   * The action for this turn. Any entry of {@code getLegalShowsList()} or
   * {@code getLegalScoutsList()} wrapped with {@link Moves#show} / {@link Moves#scout} is legal.
   */
  Action act(DecisionRequest request);

  /** Display name sent in Hello (informational; the referee's registered name wins). */
  default String name() {
    return getClass().getSimpleName();
  }

  /** Version sent in Hello, for the referee's logs. */
  default String version() {
    return "1.0.0";
  }

  /** A match begins, or is resumed after a reconnect ({@code isResumed()}: drop its old state). */
  default void onMatchStart(MatchStart start) {}

  /**
   * An action of any seat, the bot's own included. Only called on a full stream: by default the
   * client asks for a lean one (PROTOCOL.md §3.6.1), where the referee sends no
   * {@code PublicEvent} and each request's observation history tells what happened since the last
   * one. Return true from {@link #wantsPublicEvents()} (or pass {@code --public-events}) to get
   * them.
   */
  default void onEvent(PublicEvent event) {}

  /**
   * Whether this bot needs every {@code PublicEvent}: true makes the client ask for the full
   * stream ({@code Hello.lean = false}). Default false: a lean stream.
   */
  default boolean wantsPublicEvents() {
    return false;
  }

  /** A round ended; all hands are revealed. */
  default void onRoundEnd(RoundEnded roundEnded) {}

  /** A match ended; forget its state. */
  default void onMatchEnd(MatchEnded matchEnded) {}

  /**
   * The ladder put the bot on probation ({@code probation.getActive()}: no matches are scheduled
   * for it, {@code getReason()} says why) or lifted it. The client logs it either way.
   */
  default void onProbation(Probation probation) {}
}
