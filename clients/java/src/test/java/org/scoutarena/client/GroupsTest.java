package org.scoutarena.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.scoutarena.scout.v1.Card;
import org.scoutarena.scout.v1.Show;

class GroupsTest {

  static List<Integer> faces(String spaced) {
    List<Integer> faces = new ArrayList<>();
    for (String part : spaced.trim().split("\\s+")) {
      faces.add(Integer.parseInt(part));
    }
    return faces;
  }

  static List<Card> cards(String faceSlashOther) {
    List<Card> cards = new ArrayList<>();
    for (String part : faceSlashOther.trim().split("\\s+")) {
      String[] values = part.split("/");
      cards.add(Card.newBuilder().setFace(Integer.parseInt(values[0]))
          .setOther(Integer.parseInt(values[1])).build());
    }
    return cards;
  }

  @ParameterizedTest
  @CsvSource({
      "7, true",
      "5 5 5, true",
      "3 4 5, true",
      "8 7 6, true",
      "3 5, false",
      "3 4 6, false",
      "4 4 5, false",
      "5 4 5, false",
      "9 2, false",
  })
  void recognisesSetsAndRuns(String spaced, boolean group) {
    assertEquals(group, Groups.isGroup(faces(spaced)));
  }

  @Test
  void emptyIsNoGroup() {
    assertFalse(Groups.isGroup(List.of()));
    assertFalse(Groups.isSet(List.of()));
    assertEquals(Groups.NOT_A_GROUP, Groups.strength(List.of()));
  }

  @ParameterizedTest
  @CsvSource({
      // 32·length + 16 if set + lowest face (PROTOCOL.md §2 and the §5.4 example)
      "5 5 5, 117",
      "3 4 5 6, 131",
      "5 5, 85",
      "6 6, 86",
      "2 1, 65",
      "7, 55",
      "3 5, -1",
  })
  void strengthIsTheEnginesFormula(String spaced, int strength) {
    assertEquals(strength, Groups.strength(faces(spaced)));
  }

  @Test
  void strengthOrdersByLengthThenSetThenLowestFace() {
    assertTrue(Groups.strength(faces("1 2 3")) > Groups.strength(faces("9 9")));
    assertTrue(Groups.strength(faces("2 2")) > Groups.strength(faces("8 9")));
    assertTrue(Groups.strength(faces("5 6 7")) > Groups.strength(faces("3 4 5")));
    assertTrue(Groups.strength(faces("8 8")) > Groups.strength(faces("6 6")));
    assertEquals(Groups.strength(faces("4 5")), Groups.strength(faces("5 4")));
  }

  @Test
  void strengthOfAShowReadsTheHandAtItsPositions() {
    List<Integer> hand = faces("9 2 6 2 7 5 2 1 3 4 6 1");
    assertEquals(65, Groups.strength(hand, show(6, 2)));  // 2 1
    assertEquals(67, Groups.strength(hand, show(8, 2)));  // 3 4
    assertEquals(57, Groups.strength(hand, show(0, 1)));  // 9
    assertEquals(Groups.NOT_A_GROUP, Groups.strength(hand, show(0, 2)));  // 9 2
    assertEquals(Groups.NOT_A_GROUP, Groups.strength(hand, show(11, 2)));  // out of range
    assertEquals(Groups.NOT_A_GROUP, Groups.strength(hand, show(0, 0)));
  }

  @Test
  void rotationReversesAndTurnsEveryCard() {
    // PROTOCOL.md §15: the dealt hand of seat 0 and the hand after rotating it.
    List<Card> dealt = cards("3/1 8/6 2/4 4/3 7/1 3/2 8/5 4/7 8/2 7/6 9/2 5/9");
    List<Card> rotated = cards("9/5 2/9 6/7 2/8 7/4 5/8 2/3 1/7 3/4 4/2 6/8 1/3");
    assertEquals(rotated, Groups.rotated(dealt));
    assertEquals(dealt, Groups.rotated(rotated));
  }

  static Show show(int start, int length) {
    return Show.newBuilder().setStart(start).setLength(length).build();
  }
}
