package sandbox

import "testing"

// CheckRunnable agrees with the Landlock domain the protections
// describe: a program beneath ReadableDirs or where AlsoReadable says
// (a directory or the file itself, where a link in /etc leads) runs; one
// elsewhere, or hidden there, does not; without Landlock, where the
// sandbox would run it, neither does one elsewhere: a command's link
// can make later sandboxes hide it (see
// TestShellOutsideSystemPlacesRefusedWithoutLandlock). With no sandbox
// at all, anything does.
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
		{Protections{Sandbox: true}, "/var/lib/tools/sh2", false},
		{Protections{Sandbox: true}, "/usr/bin/sh", true},
		{Protections{Sandbox: true}, "/srv/ws/bin/tool", true},
		{Protections{Sandbox: true}, "/tmp/sh", false},
		{Protections{}, "/var/lib/tools/sh2", true},
	} {
		err := c.prot.CheckRunnable(c.path, ws)
		if (err == nil) != c.ok {
			t.Errorf("CheckRunnable(%s) with Landlock %d and also readable %q: %v, want runnable %v",
				c.path, c.prot.Landlock, c.prot.AlsoReadable, err, c.ok)
		}
	}
}
