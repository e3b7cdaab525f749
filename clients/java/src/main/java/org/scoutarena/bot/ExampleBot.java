package org.scoutarena.bot;

import java.util.Comparator;
import java.util.List;
import org.scoutarena.client.Groups;
import org.scoutarena.client.Moves;
import org.scoutarena.client.ScoutBot;
import org.scoutarena.scout.v1.Action;
import org.scoutarena.scout.v1.DecisionRequest;
import org.scoutarena.scout.v1.RotationRequest;
import org.scoutarena.scout.v1.Show;

/**
 * THE BOT'S LOGIC — replace the bodies of {@link #chooseRotation} and {@link #act} with yours.
 *
 * <p>This example needs no rules engine: it only picks from the referee's legal lists. It plays
 * the strongest legal Show (most cards; at equal size a set beats a run; then the higher lowest
 * face, read from its own hand at the Show's positions), otherwise the first legal Scout, and
 * never rotates. Everything else (connection, clocks, fallbacks, reconnects) is done by
 * {@link org.scoutarena.client.ArenaClient}.
 */
public final class ExampleBot implements ScoutBot {

  @Override
  public String name() {
    return "java-example";
  }

  @Override
  public boolean chooseRotation(RotationRequest request) {
    return false;
  }

  @Override
  public Action act(DecisionRequest request) {
    List<Integer> faces = Groups.faces(request.getObservation().getHandList());
    // Stream.max keeps the first of equally strong Shows, so the choice is deterministic.
    var strongest = request.getLegalShowsList().stream()
        .max(Comparator.comparingInt((Show show) -> Groups.strength(faces, show)));
    if (strongest.isPresent()) {
      return Moves.show(strongest.get());
    }
    if (request.getLegalScoutsCount() > 0) {
      return Moves.scout(request.getLegalScouts(0));
    }
    return Moves.fallback(request); // never reached: the lists are never both empty
  }
}
