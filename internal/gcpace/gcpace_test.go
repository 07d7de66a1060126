package gcpace

import (
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"
)

// fake is a Pacer whose switches and clock the test sees and moves.
type fake struct {
	*Pacer
	mu    sync.Mutex
	calls []string
	at    time.Time
}

func newFake() *fake {
	f := &fake{at: time.Unix(1000, 0)}
	f.Pacer = &Pacer{Idle: 50, Busy: 200, Quiet: 10 * time.Second,
		set:     func(n int) { f.record(map[int]string{50: "idle", 200: "busy"}[n]) },
		collect: func() { f.record("collect") },
		now:     func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.at },
	}
	return f
}

func (f *fake) record(s string) { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }

func (f *fake) advance(d time.Duration) { f.mu.Lock(); f.at = f.at.Add(d); f.mu.Unlock() }

func (f *fake) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func TestWorkSwitchesToBusyOnceAndQuietBackToIdle(t *testing.T) {
	f := newFake()
	f.settle()
	if got := f.took(); len(got) != 0 {
		t.Fatalf("idle pacer settled with %v, want nothing", got)
	}
	f.Work()
	f.Work()
	if got := f.took(); !slices.Equal(got, []string{"busy"}) {
		t.Fatalf("after two Works: %v, want one switch to busy", got)
	}
	f.advance(9 * time.Second)
	f.Work() // work goes on: the quiet spell starts again
	f.advance(9 * time.Second)
	f.settle()
	if got := f.took(); len(got) != 0 {
		t.Fatalf("9 s after the last work: %v, want the busy setting kept", got)
	}
	f.advance(time.Second)
	f.settle()
	if got := f.took(); !slices.Equal(got, []string{"idle", "collect"}) {
		t.Fatalf("10 s after the last work: %v, want idle, then a collection to the idle goal", got)
	}
	f.settle()
	f.Work()
	if got := f.took(); !slices.Equal(got, []string{"busy"}) {
		t.Fatalf("work after the quiet spell: %v, want busy again", got)
	}
}

// TestTheLastSwitchIsInForce races Work with settle: whatever the order, the switches
// alternate and the last one matches the pacer's state.
func TestTheLastSwitchIsInForce(t *testing.T) {
	f := newFake()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				f.Work()
				f.advance(time.Second)
				f.settle()
			}
		})
	}
	wg.Wait()
	var switches []string
	for _, c := range f.took() {
		if c != "collect" {
			switches = append(switches, c)
		}
	}
	for i := 1; i < len(switches); i++ {
		if switches[i] == switches[i-1] {
			t.Fatalf("switch %d repeats %q: the switches do not alternate", i, switches[i])
		}
	}
	want := "idle"
	if f.busy.Load() {
		want = "busy"
	}
	if len(switches) == 0 || switches[len(switches)-1] != want {
		t.Fatalf("last switch %v, but the pacer is %s", switches[len(switches)-1:], want)
	}
}

// TestNewSetsTheCollector checks the real collector's setting.
func TestNewSetsTheCollector(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	p := New(50, 200, time.Second)
	if got := debug.SetGCPercent(50); got != 50 {
		t.Fatalf("GOGC after New = %d, want the idle 50", got)
	}
	p.Work()
	if got := debug.SetGCPercent(200); got != 200 {
		t.Fatalf("GOGC after Work = %d, want the busy 200", got)
	}
}
