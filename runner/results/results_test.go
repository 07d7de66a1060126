package results

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// A result outlives the store that marked it, reason included, until it is forgotten;
// a UID that is not a file name is kept all the same.
func TestResultsSurviveARestartUntilForgotten(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	const job, failed types.UID = "a/../job", "failed"
	s.Mark(job, "")
	s.Mark(failed, "DeadlineExceeded")
	s.Mark(failed, "ignored: the first mark stays")

	again, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if done, reason := again.Done(job); !done || reason != "" {
		t.Errorf("Done(%q) after a restart = %v, %q; want true, no reason", job, done, reason)
	}
	if done, reason := again.Done(failed); !done || reason != "DeadlineExceeded" {
		t.Errorf("Done(%q) after a restart = %v, %q; want true, DeadlineExceeded", failed, done, reason)
	}
	again.Forget(job)
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files after forgetting one of two results, want 1", len(entries))
	}
	if done, _ := again.Done(job); done {
		t.Errorf("Done(%q) after Forget = true", job)
	}
}
