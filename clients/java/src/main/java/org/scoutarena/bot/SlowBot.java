package org.scoutarena.bot;

import org.scoutarena.client.Moves;
import org.scoutarena.client.ScoutBot;
import org.scoutarena.scout.v1.Action;
import org.scoutarena.scout.v1.DecisionRequest;
import org.scoutarena.scout.v1.MatchEnded;
import org.scoutarena.scout.v1.MatchStart;
import org.scoutarena.scout.v1.PublicEvent;
import org.scoutarena.scout.v1.RotationRequest;
import org.scoutarena.scout.v1.RoundEnded;

/** Testing aid behind {@code --slow-ms}: a bot that thinks {@code delayMs} before each answer. */
final class SlowBot implements ScoutBot {
  private final ScoutBot inner;
  private final long delayMs;

  SlowBot(ScoutBot inner, long delayMs) {
    this.inner = inner;
    this.delayMs = delayMs;
  }

  @Override
  public String name() {
    return inner.name();
  }

  @Override
  public String version() {
    return inner.version();
  }

  @Override
  public boolean chooseRotation(RotationRequest request) {
    return pause() && inner.chooseRotation(request);
  }

  @Override
  public Action act(DecisionRequest request) {
    return pause() ? inner.act(request) : Moves.fallback(request);
  }

  /** False when interrupted (the client gave up waiting and sent the fallback). */
  private boolean pause() {
    try {
      Thread.sleep(delayMs);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  @Override
  public void onMatchStart(MatchStart start) {
    inner.onMatchStart(start);
  }

  @Override
  public void onEvent(PublicEvent event) {
    inner.onEvent(event);
  }

  @Override
  public boolean wantsPublicEvents() {
    return inner.wantsPublicEvents();
  }

  @Override
  public void onRoundEnd(RoundEnded roundEnded) {
    inner.onRoundEnd(roundEnded);
  }

  @Override
  public void onMatchEnd(MatchEnded matchEnded) {
    inner.onMatchEnd(matchEnded);
  }
}
