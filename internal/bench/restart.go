package bench

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// restarts measures a SIGKILLed container → running again: the first restart, which
// has no back-off, with the PLEG woken by containerd's exit event and without (the
// relist period alone). Without, the wait is for the next relist, whose ticks keep
// one phase from the daemon's start; each cycle of a sample (write, start, kill,
// restart, remove) is so short and regular that every kill would fall at the same
// point of the period, and the row would measure the period less how long the cycle
// took. The kills are spread over the period instead: the k-th of n waits k/n of it
// first. It returns the back-off chain, to be run beside the idle
// measurements (which need the time anyway, and whose daemon is another process): the
// back-offs of 10, 20, 40 and 80 s, measured as lateness past their expiry.
func (r *Run) restarts(ctx context.Context) (chain func() error, _ error) {
	woken, err := r.node(ctx, "restart")
	if err != nil {
		return nil, err
	}
	polled, err := r.node(ctx, "relist-only", "--pleg-exit-events=false")
	if err != nil {
		return nil, err
	}
	for _, n := range []*Node{woken, polled} {
		if err := n.Start(); err != nil {
			return nil, err
		}
	}
	for _, c := range []struct {
		n    *Node
		net  string
		mode string
		want float64
	}{{woken, "pod", "exit event", 100}, {woken, "host", "exit event", 100}, {polled, "pod", "relist only", ms(relistPeriod) + 100}} {
		var samples []float64
		reps := r.repeats(5)
		for rep := range reps {
			name := fmt.Sprintf("first%s%d", c.net, rep)
			k, err := newKiller(r, c.n, name, c.net == "host")
			if err != nil {
				return nil, err
			}
			if c.n == polled {
				k.delay = time.Duration(rep) * relistPeriod / time.Duration(reps)
			}
			d, err := k.restart()
			if err != nil {
				return nil, err
			}
			samples = append(samples, ms(d))
			if err := c.n.Clear(ctx); err != nil {
				return nil, err
			}
		}
		r.Report.Add(NewRow(fmt.Sprintf("restart/first/net=%s/%s", c.net, strings.ReplaceAll(c.mode, " ", "-")),
			fmt.Sprintf("SIGKILL → running again, 1st restart (exit → start events), %s network, %s", netWord(c.net), c.mode), "ms", samples).
			Want(Target{Max: c.want}))
	}
	if err := polled.Stop(); err != nil {
		return nil, err
	}
	return func() error {
		defer woken.Stop()
		if err := r.backoffChain(woken); err != nil {
			return err
		}
		return woken.Clear(ctx)
	}, nil
}

// backoffChain runs three pods on n, each killed as soon as it runs again, so that its
// waits are 10, 20, 40 and 80 s, and measures how late each restart came.
func (r *Run) backoffChain(n *Node) error {
	backoffs := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}
	late := make([][]float64, len(backoffs))
	var g errgroup.Group
	results := make([][]time.Duration, r.repeats(3))
	for i := range results {
		k, err := newKiller(r, n, fmt.Sprintf("chain%d", i), false)
		if err != nil {
			return err
		}
		time.Sleep(700 * time.Millisecond) // the pods' restarts do not coincide
		g.Go(func() error {
			if _, err := k.restart(); err != nil { // the first, at once
				return err
			}
			for _, b := range backoffs {
				d, err := k.restart()
				if err != nil {
					return err
				}
				results[i] = append(results[i], d-b)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, res := range results {
		for j, d := range res {
			late[j] = append(late[j], ms(d))
		}
	}
	for j, b := range backoffs {
		r.Report.Add(NewRow(fmt.Sprintf("restart/backoff=%s", b), fmt.Sprintf("restart after a %s back-off: time past its expiry", b), "ms", late[j]).
			Want(Target{Max: 200}))
	}
	return nil
}

// killer kills a pod's container and times its restart by containerd's events.
type killer struct {
	r      *Run
	n      *Node
	prefix string        // of the pod's container IDs: "<pod name>-<node>_"
	pid    uint32        // of the running container
	delay  time.Duration // waited before the kill, beyond the start's publication
}

// newKiller writes the pod and waits for its container to run.
func newKiller(r *Run, n *Node, name string, hostNet bool) (*killer, error) {
	k := &killer{r: r, n: n, prefix: name + "-" + nodeName + "_"}
	mark := r.events.Mark()
	if err := n.Write(name+".yaml", Pod(name, Stopper, hostNet)); err != nil {
		return nil, err
	}
	start, err := r.events.Await(mark, 1, time.Minute, k.started)
	if err != nil {
		return nil, err
	}
	k.pid = start[0].PID
	return k, nil
}

// started matches the start of an attempt of the pod's container.
func (k *killer) started(ev Event) bool {
	return In(k.n.Name, "/tasks/start")(ev) && strings.HasPrefix(ev.Container, k.prefix)
}

// restart kills the container and returns the time from its exit to the start of the
// next attempt.
func (k *killer) restart() (time.Duration, error) {
	time.Sleep(200*time.Millisecond + k.delay) // the start is recorded and published
	mark := k.r.events.Mark()
	if err := syscall.Kill(int(k.pid), syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill %s: %w", k.prefix, err)
	}
	pid := k.pid
	exit, err := k.r.events.Await(mark, 1, time.Minute, func(ev Event) bool {
		return In(k.n.Name, "/tasks/exit")(ev) && ev.PID == pid
	})
	if err != nil {
		return 0, err
	}
	started, err := k.r.events.Await(mark, 1, 3*time.Minute, k.started)
	if err != nil {
		return 0, err
	}
	k.pid = started[0].PID
	return started[0].Time.Sub(exit[0].Time), nil
}
