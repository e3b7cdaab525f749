package org.scoutarena.client;

import java.util.ArrayList;
import java.util.List;
import org.scoutarena.scout.v1.Card;
import org.scoutarena.scout.v1.Show;

/**
 * Face-value arithmetic on hands: sets, runs and their strength, exactly as the referee's engine
 * computes them (docs/PROTOCOL.md §2). Pure functions, no rules engine.
 */
public final class Groups {

  /** Returned by the strength functions for cards that are not a set or a run. */
  public static final int NOT_A_GROUP = -1;

  private Groups() {}

  /** The face values of {@code cards}, position 0 first. */
  public static List<Integer> faces(List<Card> cards) {
    List<Integer> faces = new ArrayList<>(cards.size());
    for (Card card : cards) {
      faces.add(card.getFace());
    }
    return faces;
  }

  /** True when all faces are equal (a single card is a set). */
  public static boolean isSet(List<Integer> faces) {
    if (faces.isEmpty()) {
      return false;
    }
    int first = faces.get(0);
    return faces.stream().allMatch(face -> face == first);
  }

  /** True when the faces are a set, or a run of 2+ cards stepping by exactly +1 or exactly -1. */
  public static boolean isGroup(List<Integer> faces) {
    if (faces.isEmpty()) {
      return false;
    }
    if (faces.size() == 1) {
      return true;
    }
    int step = faces.get(1) - faces.get(0);
    if (step < -1 || step > 1) {
      return false;
    }
    for (int i = 1; i < faces.size(); i++) {
      if (faces.get(i) - faces.get(i - 1) != step) {
        return false;
      }
    }
    return true;
  }

  /**
   * The engine's strength of a group: {@code 32·length + (16 if set) + lowest face}; a group beats
   * another iff its strength is greater. {@link #NOT_A_GROUP} when the faces are no group.
   */
  public static int strength(List<Integer> faces) {
    if (!isGroup(faces)) {
      return NOT_A_GROUP;
    }
    int lowest = faces.stream().mapToInt(Integer::intValue).min().orElseThrow();
    return 32 * faces.size() + (isSet(faces) ? 16 : 0) + lowest;
  }

  /**
   * Strength of {@code show} played from a hand with these faces: the faces at positions
   * {@code start … start+length-1}. {@link #NOT_A_GROUP} when out of range or not a group.
   */
  public static int strength(List<Integer> handFaces, Show show) {
    int start = show.getStart();
    int length = show.getLength();
    if (start < 0 || length < 1 || start + length > handFaces.size()) {
      return NOT_A_GROUP;
    }
    return strength(handFaces.subList(start, start + length));
  }

  /** The hand after a 180° rotation: reversed, and every card turned (face ↔ other). */
  public static List<Card> rotated(List<Card> hand) {
    List<Card> result = new ArrayList<>(hand.size());
    for (int i = hand.size() - 1; i >= 0; i--) {
      Card card = hand.get(i);
      result.add(Card.newBuilder().setFace(card.getOther()).setOther(card.getFace()).build());
    }
    return result;
  }
}
