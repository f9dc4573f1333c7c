//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// BenchmarkStart runs true in the sandbox, whole and with parts left out,
// to show what each costs, and in a sandbox prepared ahead (off the
// clock) to show what is left of a command's start once the set-up is
// done. The helper is this (small) test binary.
func BenchmarkStart(b *testing.B) {
	dir := b.TempDir()
	root, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"full", Config{}},
		{"network-allowed", Config{AllowNetwork: true}},
		{"no-landlock", Config{WithoutLandlock: true}},
		{"prepared", Config{}},
	} {
		cfg, err := c.cfg.WithDefaults()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				var p *Process
				if c.name == "prepared" {
					b.StopTimer()
					if p, err = Prepare(cfg, root, null, null); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					err = p.Run("/bin/sh", "true", nil)
				} else {
					p, err = Start(cfg, root, "/bin/sh", "true", nil, null, null)
				}
				if err != nil {
					b.Fatal(err)
				}
				exit, err := p.Finish()
				if err != nil || exit.Code != 0 {
					b.Fatalf("%+v %v", exit, err)
				}
				b.StopTimer()
				_ = p.Cmd.Wait() // the namespaces' teardown, as the workspace reaps in the background
				b.StartTimer()
			}
		})
	}
}

// BenchmarkRunLooksAgain measures what Run adds to a prepared
// sandbox's start: looking again for the paths to hide, as a set-up
// does (the helper then checks each is covered), the defaults alone,
// with a missing path and a pattern in the workspace, and with a
// pattern that matches many files; and reading again where the links
// of EtcLinkDirs lead, which the host does.
func BenchmarkRunLooksAgain(b *testing.B) {
	dir := b.TempDir()
	many := b.TempDir()
	for i := range MaxHidden - len(DefaultHidden) - 1 {
		if err := os.WriteFile(filepath.Join(many, "f"+strconv.Itoa(i)+".pem"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, dir string
		hide      []string
	}{
		{"defaults", dir, nil},
		{"missing-and-pattern", dir, []string{dir + "/later.env", dir + "/*.pem"}},
		{"pattern-matching-many", many, []string{many + "/*.pem"}},
	} {
		cfg, err := Config{Hide: c.hide}.WithDefaults()
		if err != nil {
			b.Fatal(err)
		}
		if cfg.Resolved, err = ResolveHide(cfg.Hide, c.dir); err != nil {
			b.Fatal(err)
		}
		defaults, others := hideList(DefaultHidden, c.dir)
		list := append(slices.Clone(defaults), others...)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := planHiding(list, cfg.Resolved, nil, c.dir, systemPlaces(ReadableDirs, nil)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("etc-links", func(b *testing.B) {
		for b.Loop() {
			etcLinked(EtcLinkDirs, dir)
		}
	})
}
