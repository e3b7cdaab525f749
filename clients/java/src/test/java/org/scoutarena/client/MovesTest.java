package org.scoutarena.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.scoutarena.client.GroupsTest.cards;
import static org.scoutarena.client.GroupsTest.show;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.scoutarena.scout.v1.Action;
import org.scoutarena.scout.v1.DecisionRequest;
import org.scoutarena.scout.v1.End;
import org.scoutarena.scout.v1.Observation;
import org.scoutarena.scout.v1.Scout;

class MovesTest {

  /** Seat 0 at request 7 of the PROTOCOL.md §5.4 example: no Show beats 5-5-5. */
  static DecisionRequest scoutAndShowExample() {
    Observation observation = Observation.newBuilder()
        .setMatchId("m-0011")
        .addAllHand(cards("9/5 2/9 6/7 2/8 7/4 5/8 3/4 4/2 6/8 1/3"))
        .addAllActiveSet(cards("5/3 5/7 5/6"))
        .setActiveOwner(2)
        .build();
    DecisionRequest.Builder request = DecisionRequest.newBuilder()
        .setMatchId("m-0011").setRequestId(7).setObservation(observation)
        .setScoutAndShowAvailable(true).setDeadlineMs(1000).setTimeBankMs(10000);
    for (End end : List.of(End.END_LEFT, End.END_RIGHT)) {
      for (boolean flip : List.of(false, true)) {
        for (int at = 0; at <= 10; at++) {
          request.addLegalScouts(scout(end, flip, at));
        }
      }
    }
    return request.build();
  }

  static Scout scout(End end, boolean flip, int insertAt) {
    return Scout.newBuilder().setEnd(end).setFlip(flip).setInsertAt(insertAt).build();
  }

  @Test
  void fallbackIsTheFirstLegalShow() {
    DecisionRequest request = DecisionRequest.newBuilder()
        .addLegalShows(show(0, 1)).addLegalShows(show(0, 2))
        .addLegalScouts(scout(End.END_LEFT, false, 0))
        .build();
    assertEquals(Moves.show(0, 1), Moves.fallback(request));
  }

  @Test
  void fallbackWithoutShowsIsTheFirstScout() {
    assertEquals(Moves.scout(End.END_LEFT, false, 0), Moves.fallback(scoutAndShowExample()));
    assertEquals(Moves.scout(End.END_LEFT, false, 0),
        Moves.fallback(DecisionRequest.getDefaultInstance()));
  }

  @Test
  void listedActionsPass() {
    DecisionRequest request = scoutAndShowExample();
    for (Scout scout : request.getLegalScoutsList()) {
      assertTrue(Moves.problem(Moves.scout(scout), request).isEmpty());
    }
    DecisionRequest withShows = request.toBuilder().addLegalShows(show(3, 1)).build();
    assertTrue(Moves.problem(Moves.show(3, 1), withShows).isEmpty());
  }

  @Test
  void unlistedActionsAreFlagged() {
    DecisionRequest request = scoutAndShowExample();
    assertTrue(Moves.problem(Moves.show(6, 2), request).orElseThrow().contains("legal shows"));
    assertTrue(Moves.problem(Moves.scout(End.END_LEFT, false, 11), request).isPresent());
    assertTrue(Moves.problem(Action.getDefaultInstance(), request).isPresent());
    assertTrue(Moves.problem(null, request).isPresent());
  }

  @Test
  void endRightNamesTheOnlyCardOfAOneCardSet() {
    DecisionRequest request = DecisionRequest.newBuilder()
        .setObservation(Observation.newBuilder()
            .addAllHand(cards("1/2 3/4")).addAllActiveSet(cards("7/8")))
        .addLegalScouts(scout(End.END_LEFT, false, 0))
        .build();
    assertTrue(Moves.problem(Moves.scout(End.END_RIGHT, false, 0), request).isEmpty());
    assertTrue(Moves.problem(Moves.scout(End.END_RIGHT, true, 0), request).isPresent());
  }

  @Test
  void scoutAndShowChecksAvailabilityScoutPartAndRange() {
    DecisionRequest request = scoutAndShowExample();
    Scout left = scout(End.END_LEFT, false, 8);
    assertTrue(Moves.problem(Moves.scoutAndShow(left, show(6, 4)), request).isEmpty());
    assertTrue(Moves.problem(Moves.scoutAndShow(left, show(8, 3)), request).isEmpty());
    assertTrue(Moves.problem(Moves.scoutAndShow(left, show(9, 3)), request).isPresent());
    assertTrue(Moves.problem(Moves.scoutAndShow(left, show(0, 0)), request).isPresent());
    DecisionRequest unavailable = request.toBuilder().setScoutAndShowAvailable(false).build();
    assertTrue(Moves.problem(Moves.scoutAndShow(left, show(6, 4)), unavailable).isPresent());
  }

  @Test
  void handAfterAScoutFollowsTheWorkedExample() {
    Observation observation = scoutAndShowExample().getObservation();
    var hand = Moves.handAfter(observation, scout(End.END_LEFT, false, 8)).orElseThrow();
    assertEquals(cards("9/5 2/9 6/7 2/8 7/4 5/8 3/4 4/2 5/3 6/8 1/3"), hand);
    assertEquals(131, Groups.strength(Groups.faces(hand), show(6, 4)));

    var turned = Moves.handAfter(observation, scout(End.END_RIGHT, true, 2)).orElseThrow();
    assertEquals(GroupsTest.faces("9 2 6 6 2 7 5 3 4 6 1"), Groups.faces(turned));
    assertEquals(86, Groups.strength(Groups.faces(turned), show(2, 2)));

    assertTrue(Moves.handAfter(observation, scout(End.END_LEFT, false, 11)).isEmpty());
    assertTrue(Moves.handAfter(Observation.getDefaultInstance(),
        scout(End.END_LEFT, false, 0)).isEmpty());
  }

  @Test
  void briefTexts() {
    assertEquals("show(6,4)", Moves.brief(Moves.show(6, 4)));
    assertEquals("scout(END_LEFT,flip=true,at=2)",
        Moves.brief(Moves.scout(End.END_LEFT, true, 2)));
  }
}
