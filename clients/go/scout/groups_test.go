package scout

import (
	"slices"
	"testing"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
)

func cards(pairs ...int32) []*scoutv1.Card {
	out := make([]*scoutv1.Card, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &scoutv1.Card{Face: pairs[i], Other: pairs[i+1]})
	}
	return out
}

func TestGroupStrength(t *testing.T) {
	tests := []struct {
		faces []int32
		want  Strength
		ok    bool
	}{
		{[]int32{7}, 32 + 16 + 7, true},
		{[]int32{5, 5, 5}, 117, true}, // PROTOCOL.md §5.4
		{[]int32{5, 5}, 85, true},
		{[]int32{6, 6}, 86, true},
		{[]int32{3, 4, 5, 6}, 131, true},
		{[]int32{8, 7, 6}, 96 + 6, true},
		{[]int32{2, 1}, 64 + 1, true},
		{nil, 0, false},
		{[]int32{9, 2}, 0, false},
		{[]int32{3, 4, 6}, 0, false},
		{[]int32{3, 4, 3}, 0, false},
		{[]int32{5, 5, 6}, 0, false},
	}
	for _, tt := range tests {
		got, ok := GroupStrength(tt.faces)
		if got != tt.want || ok != tt.ok {
			t.Errorf("GroupStrength(%v) = %d, %t; want %d, %t", tt.faces, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBeats(t *testing.T) {
	tests := []struct {
		faces, active []int32
		want          bool
	}{
		{[]int32{1}, nil, true},                 // anything beats a clear table
		{[]int32{9, 2}, nil, false},             // but it must be a group
		{[]int32{2, 1}, []int32{9, 9}, false},   // same length: a run does not beat a set
		{[]int32{4, 4}, []int32{5, 6}, true},    // same length: a set beats a run
		{[]int32{1, 2, 3}, []int32{9, 9}, true}, // more cards win
		{[]int32{4, 3}, []int32{2, 1}, true},    // higher lowest value
		{[]int32{5, 5}, []int32{5, 5}, false},   // equal does not beat
		{[]int32{3, 4}, []int32{5, 5, 5}, false},
	}
	for _, tt := range tests {
		if got := Beats(tt.faces, tt.active); got != tt.want {
			t.Errorf("Beats(%v, %v) = %t; want %t", tt.faces, tt.active, got, tt.want)
		}
	}
}

func TestShowStrength(t *testing.T) {
	hand := cards(9, 5, 2, 9, 6, 7, 2, 8, 7, 4, 5, 8, 3, 4, 4, 2, 6, 8, 1, 3)
	if s, ok := ShowStrength(hand, &scoutv1.Show{Start: 6, Length: 2}); !ok || s != 64+3 {
		t.Errorf("ShowStrength(6+2) = %d, %t; want 67, true", s, ok)
	}
	if _, ok := ShowStrength(hand, &scoutv1.Show{Start: 9, Length: 3}); ok {
		t.Error("a show past the end of the hand has no strength")
	}
	if _, ok := ShowStrength(hand, &scoutv1.Show{Start: 0, Length: 0}); ok {
		t.Error("a show of length 0 has no strength")
	}
}

func TestRotateHand(t *testing.T) {
	// PROTOCOL.md §5.1: dealt 3/1 8/6 ... 9/2 5/9 rotates to 9/5 2/9 ... 6/8 1/3.
	dealt := cards(3, 1, 8, 6, 2, 4, 4, 3, 7, 1, 3, 2, 8, 5, 4, 7, 8, 2, 7, 6, 9, 2, 5, 9)
	want := []int32{9, 2, 6, 2, 7, 5, 2, 1, 3, 4, 6, 1}
	if got := Faces(RotateHand(dealt)); !slices.Equal(got, want) {
		t.Errorf("rotated faces = %v; want %v", got, want)
	}
	if r := RotateHand(dealt); r[0].GetOther() != 5 || r[11].GetOther() != 3 {
		t.Errorf("rotated cards are not turned: %v ... %v", r[0], r[11])
	}
}

func TestHandAfterScout(t *testing.T) {
	// PROTOCOL.md §5.4.
	hand := cards(9, 5, 2, 9, 6, 7, 2, 8, 7, 4, 5, 8, 3, 4, 4, 2, 6, 8, 1, 3)
	active := cards(5, 3, 5, 7, 5, 6)
	got, rest, err := HandAfterScout(hand, active, &scoutv1.Scout{End: scoutv1.End_END_LEFT, InsertAt: 8})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{9, 2, 6, 2, 7, 5, 3, 4, 5, 6, 1}; !slices.Equal(Faces(got), want) {
		t.Errorf("hand after the scout = %v; want %v", Faces(got), want)
	}
	if want := []int32{5, 5}; !slices.Equal(Faces(rest), want) {
		t.Errorf("rest of the active set = %v; want %v", Faces(rest), want)
	}
	got, rest, err = HandAfterScout(hand, active, &scoutv1.Scout{End: scoutv1.End_END_RIGHT, Flip: true, InsertAt: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{9, 2, 6, 6, 2, 7, 5, 3, 4, 6, 1}; !slices.Equal(Faces(got), want) {
		t.Errorf("hand after the turned scout = %v; want %v", Faces(got), want)
	}
	if len(rest) != 2 || rest[1].GetOther() != 7 {
		t.Errorf("rest of the active set = %v", rest)
	}
	if active[2].GetFace() != 5 {
		t.Error("HandAfterScout changed the active set")
	}
	if _, _, err := HandAfterScout(hand, active, &scoutv1.Scout{End: scoutv1.End_END_LEFT, InsertAt: 11}); err == nil {
		t.Error("insert_at past the hand size must fail")
	}
	if _, _, err := HandAfterScout(hand, nil, &scoutv1.Scout{End: scoutv1.End_END_LEFT}); err == nil {
		t.Error("scouting from a clear table must fail")
	}
	if _, _, err := HandAfterScout(hand, active, &scoutv1.Scout{}); err == nil {
		t.Error("END_UNSPECIFIED must fail")
	}
}
