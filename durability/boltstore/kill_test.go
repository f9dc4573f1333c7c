package boltstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// killChildEnv names the file a re-executed test binary writes to until it
// is killed.
const killChildEnv = "BOLTSTORE_KILL_CHILD_PATH"

const (
	killWriters       = 8
	killAcks          = 3000 // acknowledged writes before the kill
	killSnapshotEvery = 100
	killBatch         = 4 // odd writers persist batches of this many events
)

// TestKill_AcknowledgedWritesSurvive runs writers in a child process that
// prints each acknowledged write, SIGKILLs it mid-stream, reopens the file
// and checks that every acknowledged event is there: persist returned only
// once the write was on disk. Half the writers persist batches
// (PersistEvents): after the kill each holds whole batches only.
func TestKill_AcknowledgedWritesSurvive(t *testing.T) {
	if path := os.Getenv(killChildEnv); path != "" {
		runKillChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "kill.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill_AcknowledgedWritesSurvive$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := make(map[int]int) // writer -> highest acknowledged index
	sc := bufio.NewScanner(out)
	ack := func() bool {
		var w, i int
		if _, err := fmt.Sscanf(sc.Text(), "ack %d %d", &w, &i); err != nil {
			return false
		}
		acked[w] = max(acked[w], i)
		return true
	}
	for n := 0; n < killAcks && sc.Scan(); {
		if ack() {
			n++
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// The acks the child printed before it died count too: it goes on
	// writing until the kill lands, and a write it acknowledged after the
	// count above (a snapshot after its events, say) must survive as well.
	for sc.Scan() {
		ack()
	}
	_ = cmd.Wait() // killed: the error is expected
	if len(acked) != killWriters {
		t.Fatalf("child acknowledged writes of %d writers, want %d (scan error %v)", len(acked), killWriters, sc.Err())
	}

	s, err := Open(path, nil)
	if err != nil {
		t.Fatalf("open after kill: %v", err)
	}
	defer s.Close()
	ctx := t.Context()
	for w, last := range acked {
		name := fmt.Sprint("writer-", w)
		snap, ok, err := s.GetSnapshot(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		from := uint64(0)
		if ok {
			from = snap.Index
		}
		if from > uint64(last)+1 {
			t.Errorf("%s: snapshot at %d is past the last acknowledged event %d", name, from, last)
		}
		next := from
		err = s.GetEvents(ctx, name, from, 0, func(i uint64, d []byte) error {
			if i != next || string(d) != fmt.Sprint("event ", i) {
				return fmt.Errorf("event %d %q, want %d", i, d, next)
			}
			next++
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if next <= uint64(last) {
			t.Errorf("%s: events %d..%d were acknowledged but are gone after the kill", name, next, last)
		}
		if w%2 == 1 && next%killBatch != 0 {
			t.Errorf("%s: events end at %d, inside a batch of %d", name, next-1, killBatch)
		}
	}
}

// runKillChild writes until the parent kills the process.
func runKillChild(path string) {
	// Small checkpoints, so that the kill finds data both checkpointed and
	// only in the log, and may land inside a checkpoint.
	s, err := Open(path, &Options{CheckpointOps: 500})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx := context.Background()
	for w := range killWriters {
		wg.Go(func() {
			name := fmt.Sprint("writer-", w)
			step := uint64(1)
			if w%2 == 1 {
				step = killBatch
			}
			for i := uint64(0); ; i += step {
				if i > 0 && i%killSnapshotEvery == 0 {
					if err := s.PersistSnapshot(ctx, name, i, []byte("state")); err != nil {
						fmt.Println("snapshot:", err)
						os.Exit(1)
					}
				}
				batch := make([][]byte, step)
				for k := range batch {
					batch[k] = fmt.Append(nil, "event ", i+uint64(k))
				}
				var err error
				if step == 1 {
					err = s.PersistEvent(ctx, name, i, batch[0])
				} else {
					err = s.PersistEvents(ctx, name, i, batch)
				}
				if err != nil {
					fmt.Println("persist:", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Printf("ack %d %d\n", w, i+step-1)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
