package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polyweave/polyweave-go/durability"
	"github.com/polyweave/polyweave-go/durability/memstore"
	"github.com/polyweave/polyweave-go/models/modeltest"
	"github.com/polyweave/polyweave-go/models/scripted"
	"github.com/polyweave/polyweave-go/telemetry"
)

// TestConformance_TappedModel: a traced adapter still keeps the whole
// model-adapter contract (the tap only watches).
func TestConformance_TappedModel(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	tel, err := telemetry.New(&telemetry.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	modeltest.Run(t, func(t *testing.T, turns []scripted.Turn) modeltest.Harness {
		m, err := scripted.New(scripted.Script{Turns: turns}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return modeltest.Harness{Spec: tel.Model(m.Spec("model"), "scripted"), Requests: func() []map[string]json.RawMessage {
			var out []map[string]json.RawMessage
			for _, rec := range m.Requests() {
				fields := map[string]json.RawMessage{}
				for _, p := range rec.Request.Params {
					fields[p.Name] = p.Value
				}
				out = append(out, fields)
			}
			return out
		}}
	})
}

// TestStore_CommitLatency: each store call is measured by operation and
// outcome; a call on a closed store counts as an error.
func TestStore_CommitLatency(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel, err := telemetry.New(&telemetry.Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	store := tel.Store(memstore.New(nil))
	ctx := context.Background()
	if err := store.PersistEvent(ctx, "a", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := store.PersistEvents(ctx, "a", 1, [][]byte{[]byte("y"), []byte("z")}); err != nil {
		t.Fatal(err)
	}
	if err := store.PersistSnapshot(ctx, "a", 3, []byte("s")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := store.GetSnapshot(ctx, "a"); err != nil || !ok {
		t.Fatalf("snapshot: %v %v", ok, err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := store.PersistEvent(ctx, "a", 4, []byte("late")); !errors.Is(err, durability.ErrClosed) {
		t.Fatalf("persist after close: %v", err)
	}
	want := map[string]uint64{"persist_event/ok": 1, "persist_events/ok": 1, "persist_snapshot/ok": 1, "get_snapshot/ok": 1, "persist_event/error": 1}
	if counts := storeCounts(t, reader); !maps.Equal(counts, want) {
		t.Errorf("store measurements %v, want %v", counts, want)
	}
}

// storeCounts returns the store calls measured, by "operation/outcome".
func storeCounts(t *testing.T, reader sdkmetric.Reader) map[string]uint64 {
	t.Helper()
	return histogramCounts(t, reader, telemetry.MetricStoreDuration, "polyweave.store.operation", "polyweave.store.outcome")
}

// histogramCounts returns the measurements of the histogram named name,
// by the values of the attributes attrs (see key).
func histogramCounts(t *testing.T, reader sdkmetric.Reader, name string, attrs ...string) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				counts[key(dp.Attributes, attrs...)] += dp.Count
			}
		}
	}
	return counts
}

// TestStore_KeepsOptionalInterfaces: the measured store implements
// durability.Salvager exactly when the store it wraps does (a host finds
// it by a type assertion, as after agent.New wrapped its store), and
// measures Salvage like the other calls.
func TestStore_KeepsOptionalInterfaces(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel, err := telemetry.New(&telemetry.Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	ctx := context.Background()

	plain := tel.Store(struct{ durability.Store }{memstore.New(nil)}) // only a Store
	defer plain.Close()
	if _, ok := plain.(durability.Salvager); ok {
		t.Errorf("%T wrapping a store without Salvage is a durability.Salvager", plain)
	}

	store := tel.Store(memstore.New(nil))
	sv, ok := store.(durability.Salvager)
	if !ok {
		t.Fatalf("%T wrapping a memstore is not a durability.Salvager", store)
	}
	if err := store.PersistEvents(ctx, "a", 0, [][]byte{[]byte("x"), []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if got, err := sv.Salvage(ctx, "a"); err != nil || got.Events != 2 || got.Dropped != 0 {
		t.Fatalf("Salvage = %+v, %v; want the 2 events kept", got, err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Salvage(ctx, "a"); !errors.Is(err, durability.ErrClosed) {
		t.Fatalf("salvage after close: %v", err)
	}
	want := map[string]uint64{"persist_events/ok": 1, "salvage/ok": 1, "salvage/error": 1}
	if counts := storeCounts(t, reader); !maps.Equal(counts, want) {
		t.Errorf("store measurements %v, want %v", counts, want)
	}
}

// TestOff_NothingWrapped: without providers, nothing is tapped and the
// store is returned as is.
func TestOff_NothingWrapped(t *testing.T) {
	tel, err := telemetry.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := memstore.New(nil)
	defer s.Close()
	if tel.Store(s) != durability.Store(s) {
		t.Error("store wrapped without metrics")
	}
}
