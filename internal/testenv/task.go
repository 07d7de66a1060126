package testenv

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/client"
)

// RunTask starts task, waits for it to exit and for all of its output to reach the
// streams its cio.Creator was given, deletes it and returns its exit status. The task
// must be created and not started.
//
// The output is awaited before the delete because Task.Delete cancels the copy of the
// FIFOs (cio's Cancel closes them) before it waits for it: what the copy has not read
// by then is lost, all of it when the copy had not even opened its FIFO yet. The
// task's exit says nothing about how far the copy got.
func RunTask(ctx context.Context, task client.Task) (client.ExitStatus, error) {
	exited, err := task.Wait(ctx)
	if err != nil {
		return client.ExitStatus{}, fmt.Errorf("wait task %s: %w", task.ID(), err)
	}
	if err := task.Start(ctx); err != nil {
		task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
		return client.ExitStatus{}, fmt.Errorf("start task %s: %w", task.ID(), err)
	}
	var status client.ExitStatus
	select {
	case status = <-exited:
	case <-ctx.Done():
		return client.ExitStatus{}, fmt.Errorf("await exit of %s: %w", task.ID(), ctx.Err())
	}
	if err := AwaitOutput(ctx, task); err != nil {
		return status, err
	}
	if _, err := task.Delete(ctx); err != nil {
		return status, fmt.Errorf("delete task %s: %w", task.ID(), err)
	}
	return status, nil
}

// AwaitOutput waits until the copy of an exited task's output has ended: the shim
// closed the FIFOs once the task's processes were gone and everything they wrote was
// read. A task without I/O has nothing to wait for. When ctx ends first, the wait goes
// on until the task is deleted (Delete cancels the copy).
func AwaitOutput(ctx context.Context, task client.Task) error {
	io := task.IO()
	if io == nil {
		return nil
	}
	copied := make(chan struct{})
	go func() {
		io.Wait()
		close(copied)
	}()
	select {
	case <-copied:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("await output of task %s: %w", task.ID(), ctx.Err())
	}
}
