package org.scoutarena.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.scoutarena.scout.v1.Action;
import org.scoutarena.scout.v1.Card;
import org.scoutarena.scout.v1.DecisionRequest;
import org.scoutarena.scout.v1.End;
import org.scoutarena.scout.v1.Observation;
import org.scoutarena.scout.v1.Scout;
import org.scoutarena.scout.v1.ScoutAndShow;
import org.scoutarena.scout.v1.Show;

/** Building actions, the documented fallback, and a cheap pre-send check against the legal lists. */
public final class Moves {

  private Moves() {}

  /** {@code Action{show}}: any entry of {@code legal_shows} can be sent back as it is. */
  public static Action show(Show show) {
    return Action.newBuilder().setShow(show).build();
  }

  /** {@code Action{show: {start, length}}}. */
  public static Action show(int start, int length) {
    return show(Show.newBuilder().setStart(start).setLength(length).build());
  }

  /** {@code Action{scout}}: any entry of {@code legal_scouts} can be sent back as it is. */
  public static Action scout(Scout scout) {
    return Action.newBuilder().setScout(scout).build();
  }

  /** {@code Action{scout: {end, flip, insert_at}}}. */
  public static Action scout(End end, boolean flip, int insertAt) {
    return scout(Scout.newBuilder().setEnd(end).setFlip(flip).setInsertAt(insertAt).build());
  }

  /** {@code Action{scout_and_show}}: the show part indexes the hand after the scouted card went in. */
  public static Action scoutAndShow(Scout scout, Show show) {
    return Action.newBuilder()
        .setScoutAndShow(ScoutAndShow.newBuilder().setScout(scout).setShow(show))
        .build();
  }

  /**
   * The referee's own fallback, always legal: the first legal Show if any, otherwise
   * {@code Scout{END_LEFT, flip=false, insert_at=0}} (which is {@code legal_scouts[0]}).
   */
  public static Action fallback(DecisionRequest request) {
    if (request.getLegalShowsCount() > 0) {
      return show(request.getLegalShows(0));
    }
    if (request.getLegalScoutsCount() > 0) {
      return scout(request.getLegalScouts(0));
    }
    return scout(End.END_LEFT, false, 0);
  }

  /**
   * Why the referee would surely refuse {@code action} for {@code request}, or empty when it is
   * listed (Show, Scout) or plausible (Scout &amp; Show: available, listed scout part, show part
   * inside the new hand — the referee judges the rest).
   */
  public static Optional<String> problem(Action action, DecisionRequest request) {
    if (action == null) {
      return Optional.of("no action (null)");
    }
    return switch (action.getKindCase()) {
      case SHOW -> request.getLegalShowsList().contains(action.getShow())
          ? Optional.empty()
          : Optional.of("Show " + brief(action.getShow()) + " is not among the legal shows");
      case SCOUT -> isListedScout(action.getScout(), request)
          ? Optional.empty()
          : Optional.of("Scout " + brief(action.getScout()) + " is not among the legal scouts");
      case SCOUT_AND_SHOW -> scoutAndShowProblem(action.getScoutAndShow(), request);
      case KIND_NOT_SET -> Optional.of("the Action has no kind set");
    };
  }

  private static Optional<String> scoutAndShowProblem(ScoutAndShow combo, DecisionRequest request) {
    if (!request.getScoutAndShowAvailable()) {
      return Optional.of("Scout & Show is not available now");
    }
    if (!isListedScout(combo.getScout(), request)) {
      return Optional.of("the Scout part " + brief(combo.getScout()) + " is not a legal scout");
    }
    int newSize = request.getObservation().getHandCount() + 1;
    Show show = combo.getShow();
    if (show.getLength() < 1 || show.getStart() < 0
        || show.getStart() + show.getLength() > newSize) {
      return Optional.of("the Show part " + brief(show) + " lies outside the hand of " + newSize
          + " cards after the Scout");
    }
    return Optional.empty();
  }

  private static boolean isListedScout(Scout scout, DecisionRequest request) {
    if (request.getLegalScoutsList().contains(scout)) {
      return true;
    }
    // A one-card active set is listed with END_LEFT only; END_RIGHT names the same card.
    return scout.getEnd() == End.END_RIGHT
        && request.getObservation().getActiveSetCount() == 1
        && request.getLegalScoutsList().contains(scout.toBuilder().setEnd(End.END_LEFT).build());
  }

  /**
   * Own hand after {@code scout} (the card taken from the active set, turned if {@code flip},
   * inserted before position {@code insert_at}); empty when the table is clear or out of range.
   */
  public static Optional<List<Card>> handAfter(Observation observation, Scout scout) {
    List<Card> active = observation.getActiveSetList();
    int insertAt = scout.getInsertAt();
    if (active.isEmpty() || insertAt < 0 || insertAt > observation.getHandCount()) {
      return Optional.empty();
    }
    Card taken = scout.getEnd() == End.END_RIGHT ? active.get(active.size() - 1) : active.get(0);
    if (scout.getFlip()) {
      taken = Card.newBuilder().setFace(taken.getOther()).setOther(taken.getFace()).build();
    }
    List<Card> hand = new ArrayList<>(observation.getHandList());
    hand.add(insertAt, taken);
    return Optional.of(hand);
  }

  /** Short text of a Show, e.g. {@code show(3,2)}. */
  public static String brief(Show show) {
    return "show(" + show.getStart() + "," + show.getLength() + ")";
  }

  /** Short text of a Scout, e.g. {@code scout(END_LEFT,flip=false,at=0)}. */
  public static String brief(Scout scout) {
    return "scout(" + scout.getEnd() + ",flip=" + scout.getFlip() + ",at=" + scout.getInsertAt()
        + ")";
  }

  /** Short text of an action, for logs. */
  public static String brief(Action action) {
    return switch (action.getKindCase()) {
      case SHOW -> brief(action.getShow());
      case SCOUT -> brief(action.getScout());
      case SCOUT_AND_SHOW -> brief(action.getScoutAndShow().getScout()) + "+"
          + brief(action.getScoutAndShow().getShow());
      case KIND_NOT_SET -> "(no action)";
    };
  }
}
