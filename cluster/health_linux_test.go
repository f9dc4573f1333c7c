package cluster_test

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/polyweave/polyweave-go/cluster"
)

// TestAutomanaged_HealthOnMemberHost: an automanaged member answers
// health checks on the host of its own address (here loopback,
// 127.0.0.1), and on no other address of the machine: not on its other
// interfaces' addresses, nor on another loopback address (127.0.0.2,
// which Linux routes to loopback too). With HealthHost, it answers them
// there instead.
func TestAutomanaged_HealthOnMemberHost(t *testing.T) {
	store := openStore(t, freshSchema())
	// others are this machine's addresses besides 127.0.0.1.
	others := []string{"127.0.0.2"}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && !ip.IP.IsLinkLocalUnicast() {
			others = append(others, ip.IP.String())
		}
	}
	for _, tc := range []struct {
		name     string
		opts     []cluster.AutomanagedOption
		host     string   // where it answers
		notThere []string // where it must not
	}{
		{"default", nil, "127.0.0.1", others},
		{"HealthHost", []cluster.AutomanagedOption{cluster.HealthHost("127.0.0.2")}, "127.0.0.2", []string{"127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			// The member binds its health port itself (where it binds
			// is the test), on a port found free, which another process
			// may take first: a Start that fails for that is tried again
			// on another.
			var port int
			at := func(host string) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
			for attempt := 1; ; attempt++ {
				port = freePorts(t, 1)[0]
				m, err := cluster.Start(&cluster.Options{
					Provider: cluster.Automanaged(port, []string{at(tc.host)}, 100*time.Millisecond, tc.opts...),
					Store:    store, Session: sessionFunc(t, 1, newSideFile(t), nil),
				})
				if err == nil {
					closeAtCleanup(t, m)
					break
				}
				if attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
					t.Fatal(err)
				}
			}
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Get(fmt.Sprintf("http://%s/_health", at(tc.host)))
			if err != nil {
				t.Fatalf("health check on %s: %v", at(tc.host), err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("health check on %s: %s", at(tc.host), resp.Status)
			}
			for _, host := range tc.notThere {
				if c, err := net.DialTimeout("tcp", at(host), 10*time.Second); err == nil {
					c.Close()
					t.Errorf("the member's health port is reachable on %s", at(host))
				}
			}
		})
	}
}
