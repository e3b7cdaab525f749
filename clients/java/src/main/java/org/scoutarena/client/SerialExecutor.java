package org.scoutarena.client;

import java.util.ArrayDeque;
import java.util.Queue;
import java.util.concurrent.Executor;

/**
 * Runs tasks one at a time, in submission order, on a shared executor: one per match, so a
 * match's hooks and decisions see its messages in order while matches run in parallel.
 */
final class SerialExecutor implements Executor {
  private final Queue<Runnable> tasks = new ArrayDeque<>();
  private final Executor executor;
  private Runnable active;

  SerialExecutor(Executor executor) {
    this.executor = executor;
  }

  @Override
  public synchronized void execute(Runnable task) {
    tasks.add(() -> {
      try {
        task.run();
      } finally {
        scheduleNext();
      }
    });
    if (active == null) {
      scheduleNext();
    }
  }

  private synchronized void scheduleNext() {
    active = tasks.poll();
    if (active != null) {
      executor.execute(active);
    }
  }
}
