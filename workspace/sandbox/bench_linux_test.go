//go:build linux

package sandbox

import (
	"os"
	"testing"
)

// BenchmarkStart runs true in the sandbox, whole and with parts left out,
// to show what each costs. The helper is this (small) test binary.
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
	} {
		cfg, err := c.cfg.WithDefaults()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				p, err := Start(cfg, root, "/bin/sh", "true", nil, null, null)
				if err != nil {
					b.Fatal(err)
				}
				_ = p.Cmd.Wait()
				if exit, err := p.Finish(); err != nil || exit.Code != 0 {
					b.Fatalf("%+v %v", exit, err)
				}
			}
		})
	}
}
