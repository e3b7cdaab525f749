package scout

import "testing"

func TestTicketBook(t *testing.T) {
	b := make(ticketBook)
	if _, ok := b.newest("node-a"); ok {
		t.Fatal("an empty book has a ticket")
	}
	b.add("node-a", "m1", "t1")
	b.add("node-a", "m2", "t2")
	b.add("node-b", "m3", "t3")
	want := func(address, value string) {
		t.Helper()
		got, ok := b.newest(address)
		switch {
		case value == "" && ok:
			t.Errorf("newest(%s) = %v; want none", address, got)
		case value != "" && got.value != value:
			t.Errorf("newest(%s) = %v, %t; want %s", address, got, ok, value)
		}
	}
	want("node-a", "t2")
	want("node-b", "t3")

	// A fresh ticket of a match replaces its older one and becomes the newest.
	b.add("node-a", "m1", "t1-fresh")
	want("node-a", "t1-fresh")
	if n := len(b["node-a"]); n != 2 {
		t.Errorf("node-a holds %d tickets; want 2 (one per match)", n)
	}

	// A refused ticket is dropped and the next newest is tried.
	b.drop("node-a", "t1-fresh")
	want("node-a", "t2")

	// A match that ended takes its ticket along; with none left the address is gone.
	b.ended("m2")
	want("node-a", "")
	if _, held := b["node-a"]; held {
		t.Error("node-a is still in the book with no ticket")
	}
	b.ended("m-unknown")
	want("node-b", "t3")
	b.drop("node-b", "t-unknown")
	want("node-b", "t3")
	b.ended("m3")
	if len(b) != 0 {
		t.Errorf("book %v; want empty", b)
	}
}
