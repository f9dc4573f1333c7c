package remote

import (
	"testing"
	"time"
)

// A node pings its callers as its options say, as a client pings its
// nodes: zeros mean the defaults, a negative KeepaliveTime no pings.
func TestNodeOptions_Keepalive(t *testing.T) {
	for _, c := range []struct {
		time, timeout         time.Duration
		wantTime, wantTimeout time.Duration // 0: no pings
	}{
		{0, 0, DefaultKeepaliveTime, DefaultKeepaliveTimeout},
		{30 * time.Second, 2 * time.Second, 30 * time.Second, 2 * time.Second},
		{0, -1, DefaultKeepaliveTime, DefaultKeepaliveTimeout},
		{-1, time.Second, 0, 0},
	} {
		d := (&NodeOptions{KeepaliveTime: c.time, KeepaliveTimeout: c.timeout}).dials()
		if d.ping.Time != c.wantTime || d.ping.Timeout != c.wantTimeout {
			t.Errorf("KeepaliveTime %v, KeepaliveTimeout %v: pings every %v, answer awaited %v; want %v, %v",
				c.time, c.timeout, d.ping.Time, d.ping.Timeout, c.wantTime, c.wantTimeout)
		}
		if d.ping.Time > 0 && !d.ping.PermitWithoutStream {
			t.Errorf("KeepaliveTime %v: no pings without a call running", c.time)
		}
	}
}
