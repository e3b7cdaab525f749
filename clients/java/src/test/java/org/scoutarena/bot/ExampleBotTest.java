package org.scoutarena.bot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import org.junit.jupiter.api.Test;
import org.scoutarena.client.Moves;
import org.scoutarena.scout.v1.Card;
import org.scoutarena.scout.v1.DecisionRequest;
import org.scoutarena.scout.v1.End;
import org.scoutarena.scout.v1.Observation;
import org.scoutarena.scout.v1.RotationRequest;
import org.scoutarena.scout.v1.Scout;
import org.scoutarena.scout.v1.Show;

class ExampleBotTest {

  private final ExampleBot bot = new ExampleBot();

  private static DecisionRequest.Builder request(int... faces) {
    Observation.Builder observation = Observation.newBuilder();
    for (int face : faces) {
      observation.addHand(Card.newBuilder().setFace(face).setOther(face == 1 ? 2 : 1));
    }
    return DecisionRequest.newBuilder().setMatchId("m").setRequestId(1)
        .setObservation(observation);
  }

  private static Show show(int start, int length) {
    return Show.newBuilder().setStart(start).setLength(length).build();
  }

  private static Scout scout(End end, boolean flip, int at) {
    return Scout.newBuilder().setEnd(end).setFlip(flip).setInsertAt(at).build();
  }

  @Test
  void prefersTheLongestShow() {
    // faces 3 3 5 6 7 9: the run 5-6-7 (3 cards) beats the set 3-3 (2 cards)
    DecisionRequest request = request(3, 3, 5, 6, 7, 9)
        .addLegalShows(show(0, 1)).addLegalShows(show(0, 2)).addLegalShows(show(2, 2))
        .addLegalShows(show(2, 3)).addLegalShows(show(5, 1))
        .build();
    assertEquals(Moves.show(2, 3), bot.act(request));
  }

  @Test
  void atEqualLengthASetBeatsARun() {
    // faces 6 7 2 2: the set 2-2 beats the run 6-7 although its cards are lower
    DecisionRequest request = request(6, 7, 2, 2)
        .addLegalShows(show(0, 2)).addLegalShows(show(2, 2))
        .build();
    assertEquals(Moves.show(2, 2), bot.act(request));
  }

  @Test
  void atEqualLengthAndTypeTheHigherLowestFaceWins() {
    // faces 3 4 9 8: the run 8-9 (lowest 8) beats 3-4 (lowest 3); single cards lose to pairs
    DecisionRequest request = request(3, 4, 9, 8)
        .addLegalShows(show(0, 1)).addLegalShows(show(0, 2)).addLegalShows(show(2, 2))
        .addLegalShows(show(3, 1))
        .build();
    assertEquals(Moves.show(2, 2), bot.act(request));
  }

  @Test
  void equallyStrongShowsKeepTheFirst() {
    DecisionRequest request = request(5, 1, 5)
        .addLegalShows(show(0, 1)).addLegalShows(show(2, 1))
        .build();
    assertEquals(Moves.show(0, 1), bot.act(request));
  }

  @Test
  void withoutAShowItTakesTheFirstLegalScout() {
    DecisionRequest request = request(1, 9)
        .addLegalScouts(scout(End.END_LEFT, false, 0))
        .addLegalScouts(scout(End.END_LEFT, false, 1))
        .addLegalScouts(scout(End.END_RIGHT, true, 2))
        .build();
    assertEquals(Moves.scout(End.END_LEFT, false, 0), bot.act(request));
  }

  @Test
  void everyAnswerIsListed() {
    DecisionRequest request = request(4, 4, 4, 8)
        .addLegalShows(show(0, 3)).addLegalShows(show(1, 2))
        .addLegalScouts(scout(End.END_LEFT, false, 0))
        .build();
    assertEquals(java.util.Optional.empty(), Moves.problem(bot.act(request), request));
  }

  @Test
  void neverRotates() {
    assertFalse(bot.chooseRotation(RotationRequest.getDefaultInstance()));
  }
}
