package containerdrt

import (
	"context"
	"testing"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"google.golang.org/protobuf/types/known/emptypb"
)

// recordStore is a containers.Store whose List answers with what it held when the
// list began, after listed is closed: what containerd does for a list that was under
// way while a write was made.
type recordStore struct {
	containers.Store
	held   map[string]containers.Container
	began  chan struct{} // closed when a list began
	listed chan struct{} // a list answers once closed
}

func (s *recordStore) List(ctx context.Context, _ ...string) ([]containers.Container, error) {
	var out []containers.Container
	for _, c := range s.held {
		out = append(out, c)
	}
	if s.began != nil {
		close(s.began)
		<-s.listed
	}
	return out, nil
}

func (s *recordStore) Get(ctx context.Context, id string) (containers.Container, error) {
	if c, ok := s.held[id]; ok {
		return c, nil
	}
	return containers.Container{}, errdefs.ErrNotFound
}

// A write through the Runtime made while every record is being listed is not undone by
// the list, which may have read before it; a record reported changed meanwhile is read
// again.
func TestRecordsKeepWritesMadeDuringAList(t *testing.T) {
	rec := func(id, v string) containers.Container {
		return containers.Container{ID: id, Labels: map[string]string{"v": v}}
	}
	store := &recordStore{held: map[string]containers.Container{"a": rec("a", "1"), "b": rec("b", "1"), "c": rec("c", "1")}}
	c := newRecords("")
	ctx := context.Background()
	if _, err := c.list(ctx, store, false); err != nil {
		t.Fatal(err)
	}

	store.began, store.listed = make(chan struct{}), make(chan struct{})
	c.mu.Lock()
	c.whole = true
	c.mu.Unlock()
	done := make(chan []containers.Container)
	go func() {
		got, err := c.list(ctx, store, false)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	<-store.began // the list has read what the store held
	c.wrote("a", &containersapi.UpdateContainerRequest{Container: &containersapi.Container{ID: "a"}},
		&containersapi.UpdateContainerResponse{Container: &containersapi.Container{ID: "a", Labels: map[string]string{"v": "2"}}}, nil)
	c.wrote("b", &containersapi.DeleteContainerRequest{ID: "b"}, &emptypb.Empty{}, nil)
	store.held["c"] = rec("c", "2") // another client's write, reported
	c.reported(recordEvent{id: "c", op: "update", labels: map[string]string{"v": "2"}})
	close(store.listed)

	got := map[string]string{}
	for _, r := range <-done {
		got[r.ID] = r.Labels["v"]
	}
	want := map[string]string{"a": "2", "c": "2"}
	if len(got) != len(want) || got["a"] != want["a"] || got["c"] != want["c"] {
		t.Fatalf("listed %v, want %v", got, want)
	}
}
