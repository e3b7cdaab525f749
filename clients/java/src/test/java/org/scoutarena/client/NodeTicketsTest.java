package org.scoutarena.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

class NodeTicketsTest {

  @Test
  void theNewestTicketOfAnUnfinishedMatchOpensTheNodeStream() {
    NodeTickets tickets = new NodeTickets();
    assertNull(tickets.newest("node-a:1"));
    tickets.add("node-a:1", "m-1", "t-1");
    tickets.add("node-a:1", "m-2", "t-2");
    tickets.add("node-b:1", "m-3", "t-3");
    assertEquals("t-2", tickets.newest("node-a:1"));
    assertEquals("t-3", tickets.newest("node-b:1"));

    tickets.matchEnded("m-2");
    assertEquals("t-1", tickets.newest("node-a:1"), "an ended match's ticket is gone");
    tickets.matchEnded("m-1");
    assertNull(tickets.newest("node-a:1"), "no match left: the stream is let go");
    assertEquals("t-3", tickets.newest("node-b:1"), "other nodes keep theirs");
    tickets.matchEnded("m-unknown"); // a match of the main stream: nothing to forget
  }

  @Test
  void aRefusedTicketIsDroppedAndTheNextOneTried() {
    NodeTickets tickets = new NodeTickets();
    tickets.add("node-a:1", "m-1", "t-1");
    tickets.add("node-a:1", "m-2", "t-2");
    tickets.refused("node-a:1", "t-2");
    assertEquals("t-1", tickets.newest("node-a:1"));
    tickets.refused("node-a:1", "t-1");
    assertNull(tickets.newest("node-a:1"));
    tickets.refused("node-a:1", "t-1"); // refused twice: nothing left to drop
    tickets.matchEnded("m-1");
    assertNull(tickets.newest("node-a:1"));
  }

  @Test
  void aRepeatedAssignmentReplacesTheMatchTicketAndMakesItTheNewest() {
    NodeTickets tickets = new NodeTickets();
    tickets.add("node-a:1", "m-1", "t-1");
    tickets.add("node-a:1", "m-2", "t-2");
    tickets.add("node-a:1", "m-1", "t-1b");
    assertEquals("t-1b", tickets.newest("node-a:1"));
    tickets.matchEnded("m-1");
    assertEquals("t-2", tickets.newest("node-a:1"), "the old ticket of m-1 is gone as well");
    tickets.add("node-b:1", "m-2", "t-2b"); // moved to another node
    assertNull(tickets.newest("node-a:1"));
    assertEquals("t-2b", tickets.newest("node-b:1"));
  }

  @Test
  void anUnreachableNodeDropsAllOfItsTickets() {
    NodeTickets tickets = new NodeTickets();
    tickets.add("node-a:1", "m-1", "t-1");
    tickets.add("node-a:1", "m-2", "t-2");
    tickets.add("node-b:1", "m-3", "t-3");
    assertEquals(2, tickets.dropAll("node-a:1"));
    assertNull(tickets.newest("node-a:1"));
    assertEquals("t-3", tickets.newest("node-b:1"), "other nodes keep theirs");
    assertEquals(0, tickets.dropAll("node-a:1"));
    tickets.matchEnded("m-1"); // forgotten with its node: nothing to do
    tickets.add("node-a:1", "m-4", "t-4"); // a later assignment starts afresh
    assertEquals("t-4", tickets.newest("node-a:1"));
  }
}
