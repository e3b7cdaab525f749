package main

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	scoutv1 "github.com/scout-arena/scout-arena/clients/go/gen/scoutv1"
	"github.com/scout-arena/scout-arena/clients/go/scout"
)

func hand(faces ...int32) []*scoutv1.Card {
	out := make([]*scoutv1.Card, len(faces))
	for i, f := range faces {
		out[i] = &scoutv1.Card{Face: f, Other: f%10 + 1}
	}
	return out
}

func TestChooseActionPrefersTheStrongestShow(t *testing.T) {
	// faces   0:4 1:5 2:6 3:2 4:2 5:2 6:9 7:9
	req := &scoutv1.DecisionRequest{
		Observation: &scoutv1.Observation{Hand: hand(4, 5, 6, 2, 2, 2, 9, 9)},
		LegalShows: []*scoutv1.Show{
			{Start: 0, Length: 1}, {Start: 0, Length: 2}, {Start: 0, Length: 3}, // run 4-5-6
			{Start: 3, Length: 3}, // set 2-2-2: same length, a set wins
			{Start: 6, Length: 2}, // set 9-9: fewer cards
			{Start: 5, Length: 1},
		},
	}
	check := func(want *scoutv1.Show) {
		t.Helper()
		got, err := chooseAction(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, scout.ShowAction(want)) {
			t.Errorf("chooseAction = %v; want show %v", got, want)
		}
		if err := scout.CheckAction(req, got); err != nil {
			t.Errorf("the chosen action is not legal: %v", err)
		}
	}
	check(&scoutv1.Show{Start: 3, Length: 3})

	// Same count and kind: the higher lowest value wins (3-4 over 1-2, both runs).
	req.Observation.Hand = hand(1, 2, 7, 3, 4)
	req.LegalShows = []*scoutv1.Show{{Start: 0, Length: 2}, {Start: 3, Length: 2}, {Start: 2, Length: 1}}
	check(&scoutv1.Show{Start: 3, Length: 2})
}

func TestChooseActionScoutsWithoutAShow(t *testing.T) {
	req := &scoutv1.DecisionRequest{
		Observation: &scoutv1.Observation{Hand: hand(1, 3), ActiveSet: hand(8, 8)},
		LegalScouts: []*scoutv1.Scout{
			{End: scoutv1.End_END_LEFT, InsertAt: 0}, {End: scoutv1.End_END_LEFT, InsertAt: 1},
		},
	}
	got, err := chooseAction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, scout.ScoutAction(req.LegalScouts[0])) {
		t.Errorf("chooseAction = %v; want the first legal scout", got)
	}
}
