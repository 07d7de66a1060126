package systemd

import (
	"fmt"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier speaks the notify protocol (sd_notify(3)) to the service manager that
// started this process with Type=notify. Without NOTIFY_SOCKET every call is a no-op.
type Notifier struct {
	send func(state string) (bool, error) // daemon.SdNotify's; tests replace it
}

// NewNotifier returns a Notifier for the process's NOTIFY_SOCKET.
func NewNotifier() *Notifier {
	return &Notifier{send: func(state string) (bool, error) { return daemon.SdNotify(false, state) }}
}

// Ready says the service is up, with a one-line status.
func (n *Notifier) Ready(status string) error {
	return n.notify(daemon.SdNotifyReady, "STATUS="+oneLine(status))
}

// Status sets the one line systemctl status shows.
func (n *Notifier) Status(status string) error {
	return n.notify("STATUS=" + oneLine(status))
}

// Watchdog is a keep-alive ping (WatchdogSec=).
func (n *Notifier) Watchdog() error {
	return n.notify(daemon.SdNotifyWatchdog)
}

// Stopping says the service is stopping, with a status.
func (n *Notifier) Stopping(status string) error {
	return n.notify(daemon.SdNotifyStopping, "STATUS="+oneLine(status))
}

func (n *Notifier) notify(states ...string) error {
	if _, err := n.send(strings.Join(states, "\n")); err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	return nil
}

// oneLine keeps a status to its first line: the protocol separates fields by newlines.
func oneLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// WatchdogInterval is the service's WatchdogSec when the watchdog is on for this
// process, else 0.
func WatchdogInterval() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0
	}
	return d
}
