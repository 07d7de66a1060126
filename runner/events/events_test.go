package events

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A repeat of the latest record folds into it with a count and its last time; a record
// that differs in anything kubectl shows starts a new one.
func TestAddFoldsRepeatsOfTheLatestRecord(t *testing.T) {
	now := time.Unix(1000, 0)
	s := New(func() time.Time { return now })
	backOff := Record{UID: "u1", Pod: "default/web", Container: "app", Type: Warning, Reason: "BackOff", Message: "restarting"}
	s.Add(backOff)
	now = now.Add(time.Minute)
	s.Add(backOff)
	s.Add(Record{UID: "u1", Pod: "default/web", Container: "app", Type: Normal, Reason: "Started", Message: "started"})

	got := s.Pod("u1")
	if len(got) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(got), got)
	}
	if got[0].Count != 2 || !got[0].First.Equal(time.Unix(1000, 0)) || !got[0].Last.Equal(now) {
		t.Errorf("folded record %+v, want count 2 from 1000 to %v", got[0], now.Unix())
	}
	if got[1].Reason != "Started" || got[1].Count != 1 {
		t.Errorf("second record %+v, want Started once", got[1])
	}
}

// Each pod's ring and the global ring keep only their newest records, and a pod's
// records go when it is forgotten.
func TestRingsAreBoundedAndForgotten(t *testing.T) {
	s := New(time.Now)
	for i := range eventsPerPod + 5 {
		s.Add(Record{UID: "u1", Type: Normal, Reason: "Pulled", Message: fmt.Sprint(i)})
	}
	for i := range eventsGlobal + 1 {
		s.Add(Record{Type: Warning, Reason: "SourceFailed", Message: fmt.Sprint(i)})
	}
	pod := s.Pod("u1")
	if len(pod) != eventsPerPod || pod[0].Message != "5" {
		t.Errorf("pod ring holds %d records from %q, want %d from \"5\"", len(pod), pod[0].Message, eventsPerPod)
	}
	if all := s.All(); len(all) != eventsGlobal+eventsPerPod || all[0].Message != "1" {
		t.Errorf("all: %d records from %q, want the global ring from \"1\" first", len(all), all[0].Message)
	}
	s.Forget(types.UID("u1"))
	if got := s.Pod("u1"); len(got) != 0 {
		t.Errorf("forgotten pod still has %d records", len(got))
	}
}

// A subscriber gets each record as added (a repeat with its new count); after it ends
// its subscription it gets nothing more.
func TestSubscribersSeeRecordsUntilTheyLeave(t *testing.T) {
	s := New(time.Now)
	ch, leave := s.Subscribe()
	r := Record{UID: "u1", Type: Warning, Reason: "Unhealthy", Message: "probe failed"}
	s.Add(r)
	s.Add(r)
	if got := <-ch; got.Count != 1 {
		t.Errorf("first delivery count %d, want 1", got.Count)
	}
	if got := <-ch; got.Count != 2 {
		t.Errorf("second delivery count %d, want 2", got.Count)
	}
	leave()
	s.Add(r)
	select {
	case got := <-ch:
		t.Errorf("delivered after leaving: %+v", got)
	default:
	}
}
