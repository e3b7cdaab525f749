package org.scoutarena.client;

import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The tickets of assigned matches that have not ended, per referee node address (PROTOCOL.md
 * §3.8). A ticket is good for its own match only, until that match ends: a lost node stream is
 * reopened with the newest ticket of its address, a ticket the node refuses is dropped, a node
 * with no ticket left is let go, and so is one unreachable for too long, its tickets dropped.
 * Thread-safe.
 */
final class NodeTickets {

  /** Address → (match id → ticket), oldest assignment first. */
  private final Map<String, LinkedHashMap<String, String>> byAddress = new HashMap<>();
  /** Match id → the address of its node. */
  private final Map<String, String> addressOf = new HashMap<>();

  /** Remembers the ticket of an assigned match; a repeated assignment replaces the old one. */
  synchronized void add(String address, String matchId, String ticket) {
    matchEnded(matchId);
    byAddress.computeIfAbsent(address, a -> new LinkedHashMap<>()).put(matchId, ticket);
    addressOf.put(matchId, address);
  }

  /** The ticket of the newest unfinished match on {@code address}, or null when none is left. */
  synchronized String newest(String address) {
    LinkedHashMap<String, String> held = byAddress.get(address);
    if (held == null) {
      return null;
    }
    String newest = null;
    for (String ticket : held.values()) {
      newest = ticket;
    }
    return newest;
  }

  /** The match ended (or will not be resumed): its ticket opens nothing any more. */
  synchronized void matchEnded(String matchId) {
    String address = addressOf.remove(matchId);
    if (address == null) {
      return;
    }
    LinkedHashMap<String, String> held = byAddress.get(address);
    held.remove(matchId);
    if (held.isEmpty()) {
      byAddress.remove(address);
    }
  }

  /**
   * The node at {@code address} is gone (unreachable for too long): drop all of its tickets;
   * returns how many there were.
   */
  synchronized int dropAll(String address) {
    LinkedHashMap<String, String> held = byAddress.remove(address);
    if (held == null) {
      return 0;
    }
    held.keySet().forEach(addressOf::remove);
    return held.size();
  }

  /** The node at {@code address} refused {@code ticket} (UNAUTHENTICATED): drop it. */
  synchronized void refused(String address, String ticket) {
    LinkedHashMap<String, String> held = byAddress.get(address);
    if (held == null) {
      return;
    }
    for (Iterator<Map.Entry<String, String>> it = held.entrySet().iterator(); it.hasNext(); ) {
      Map.Entry<String, String> entry = it.next();
      if (entry.getValue().equals(ticket)) {
        it.remove();
        addressOf.remove(entry.getKey());
      }
    }
    if (held.isEmpty()) {
      byAddress.remove(address);
    }
  }
}
