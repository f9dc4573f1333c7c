package sandbox

import "testing"

// CheckRunnable agrees with the Landlock domain the protections
// describe: a program beneath ReadableDirs or where AlsoReadable says
// (a directory or the file itself, where a link in /etc leads) runs; one
// elsewhere, or hidden there, does not; without Landlock any path that is
// not hidden or the host's /tmp does.
func TestCheckRunnable(t *testing.T) {
	ws := "/srv/ws"
	landlock := Protections{Sandbox: true, Landlock: 4, AlsoReadable: []string{"/var/lib/ca", "/var/lib/tools/sh"},
		Hidden: []string{"/var/lib/ca/private"}}
	for _, c := range []struct {
		prot Protections
		path string
		ok   bool
	}{
		{landlock, "/usr/bin/sh", true},
		{landlock, "/srv/ws/bin/tool", true},
		{landlock, "/var/lib/ca/bin/sh", true},
		{landlock, "/var/lib/tools/sh", true},
		{landlock, "/var/lib/tools/sh2", false},
		{landlock, "/var/lib/cabin/sh", false},
		{landlock, "/var/lib/ca/private/sh", false},
		{landlock, "/tmp/sh", false},
		{Protections{Sandbox: true}, "/var/lib/tools/sh2", true},
		{Protections{Sandbox: true}, "/tmp/sh", false},
	} {
		err := c.prot.CheckRunnable(c.path, ws)
		if (err == nil) != c.ok {
			t.Errorf("CheckRunnable(%s) with Landlock %d and also readable %q: %v, want runnable %v",
				c.path, c.prot.Landlock, c.prot.AlsoReadable, err, c.ok)
		}
	}
}
