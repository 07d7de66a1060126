package nodeshutdown

import (
	"testing"
	"time"
)

func TestShutdownGrace(t *testing.T) {
	g, err := Grace(30*time.Second, 10*time.Second)
	if err != nil || g.Regular() != 20*time.Second {
		t.Errorf("Grace(30s, 10s) = %+v, %v", g, err)
	}
	for _, bad := range [][2]time.Duration{{10 * time.Second, 20 * time.Second}, {-time.Second, 0}} {
		if _, err := Grace(bad[0], bad[1]); err == nil {
			t.Errorf("Grace(%v, %v): no error", bad[0], bad[1])
		}
	}
}
