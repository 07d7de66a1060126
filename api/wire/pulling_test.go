package wire

import "testing"

func TestPullProgressMessageReadsBackAsPsShowsIt(t *testing.T) {
	for _, tc := range []struct {
		p     PullProgress
		msg   string
		short string
	}{
		{PullProgress{}, `Pulling image "busybox"`, ""},
		{PullProgress{Done: 0, Total: 912}, `Pulling image "busybox": 0 B of 912 B`, "0B/912B"},
		{PullProgress{Done: 12_345_678, Total: 45_600_000}, `Pulling image "busybox": 12.3 MB of 45.6 MB`, "12.3MB/45.6MB"},
		{PullProgress{Done: 999_960, Total: 1_234_000_000}, `Pulling image "busybox": 1.0 MB of 1.2 GB`, "1.0MB/1.2GB"},
	} {
		if got := tc.p.Message("busybox"); got != tc.msg {
			t.Errorf("Message(%+v) = %q, want %q", tc.p, got, tc.msg)
		}
		if short, ok := PullingBytes(tc.msg); !ok || short != tc.short {
			t.Errorf("PullingBytes(%q) = %q, %v; want %q", tc.msg, short, ok, tc.short)
		}
	}
	for _, msg := range []string{"", "Back-off pulling image \"busybox\"", "Pulling image \"x\": garbage"} {
		if short, ok := PullingBytes(msg); ok {
			t.Errorf("PullingBytes(%q) = %q, true; want not a pull's progress", msg, short)
		}
	}
}
