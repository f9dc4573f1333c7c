package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/polyweave/polyweave-go/durability"
)

// Store returns s measured: each call's duration goes to the histogram
// polyweave.store.operation.duration, by polyweave.store.operation
// (persist_event, persist_events and persist_snapshot are the commits;
// get_events, get_snapshot, delete_events, delete_snapshots, and salvage)
// and polyweave.store.outcome ("ok" or "error"). Without metrics it
// returns s. The returned Store implements the optional interfaces of
// package durability that s implements, and only those
// ([durability.Salvager]), so that a type assertion finds on it what it
// finds on s; it says what it measures with Unwrap (agent.StoreWrapper).
// The caller still closes s (or the returned Store, which closes s).
func (t *Telemetry) Store(s durability.Store) durability.Store {
	if !t.metering {
		return s
	}
	m := &measuredStore{s: s, t: t}
	if sv, ok := s.(durability.Salvager); ok {
		return &measuredSalvager{measuredStore: m, sv: sv}
	}
	return m
}

type measuredStore struct {
	s durability.Store
	t *Telemetry
}

// Unwrap returns the store measured: agents on two measured copies of one
// store see that they share it (agent.StoreWrapper), so two open agents
// of one name on it are refused as on the bare store.
func (m *measuredStore) Unwrap() durability.Store { return m.s }

// Pre-built attribute sets: recording allocates nothing per call.
var storeSets = func() map[string][2]metric.MeasurementOption {
	m := map[string][2]metric.MeasurementOption{}
	for _, op := range []string{"persist_event", "persist_events", "persist_snapshot", "get_events", "get_snapshot", "delete_events", "delete_snapshots", "salvage"} {
		for i, outcome := range []string{"ok", "error"} {
			set := attribute.NewSet(attribute.String("polyweave.store.operation", op), attribute.String("polyweave.store.outcome", outcome))
			v := m[op]
			v[i] = metric.WithAttributeSet(set)
			m[op] = v
		}
	}
	return m
}()

func (m *measuredStore) record(op string, start time.Time, err error) {
	i := 0
	if err != nil {
		i = 1
	}
	m.t.store.Record(context.Background(), time.Since(start).Seconds(), storeSets[op][i])
}

func (m *measuredStore) PersistEvent(ctx context.Context, name string, index uint64, data []byte) error {
	start := time.Now()
	err := m.s.PersistEvent(ctx, name, index, data)
	m.record("persist_event", start, err)
	return err
}

func (m *measuredStore) PersistEvents(ctx context.Context, name string, first uint64, data [][]byte) error {
	start := time.Now()
	err := m.s.PersistEvents(ctx, name, first, data)
	m.record("persist_events", start, err)
	return err
}

func (m *measuredStore) GetEvents(ctx context.Context, name string, from, to uint64, fn func(index uint64, data []byte) error) error {
	start := time.Now()
	err := m.s.GetEvents(ctx, name, from, to, fn)
	m.record("get_events", start, err)
	return err
}

func (m *measuredStore) DeleteEvents(ctx context.Context, name string, through uint64) error {
	start := time.Now()
	err := m.s.DeleteEvents(ctx, name, through)
	m.record("delete_events", start, err)
	return err
}

func (m *measuredStore) PersistSnapshot(ctx context.Context, name string, index uint64, data []byte) error {
	start := time.Now()
	err := m.s.PersistSnapshot(ctx, name, index, data)
	m.record("persist_snapshot", start, err)
	return err
}

func (m *measuredStore) GetSnapshot(ctx context.Context, name string) (durability.Snapshot, bool, error) {
	start := time.Now()
	snap, ok, err := m.s.GetSnapshot(ctx, name)
	m.record("get_snapshot", start, err)
	return snap, ok, err
}

func (m *measuredStore) DeleteSnapshots(ctx context.Context, name string, through uint64) error {
	start := time.Now()
	err := m.s.DeleteSnapshots(ctx, name, through)
	m.record("delete_snapshots", start, err)
	return err
}

func (m *measuredStore) Close() error { return m.s.Close() }

// measuredSalvager is the measured store of a store that salvages.
type measuredSalvager struct {
	*measuredStore
	sv durability.Salvager
}

func (m *measuredSalvager) Salvage(ctx context.Context, name string) (durability.Salvaged, error) {
	start := time.Now()
	out, err := m.sv.Salvage(ctx, name)
	m.record("salvage", start, err)
	return out, err
}
