package telemetry

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"

	"github.com/polyweave/polyweave-go/internal/leakcheck"
)

// boundsTelemetry starts telemetry with the given providers; t's cleanup
// shuts it down and checks for leaked goroutines.
func boundsTelemetry(t *testing.T, opts Options) *Telemetry {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, before) })
	tel, err := New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("shut telemetry down: %v", err)
		}
	})
	return tel
}

// TestNew_TypedNilProviders: a host that keeps its providers in typed
// variables and leaves them nil when telemetry is off passes typed nils
// (a nil *sdktrace.TracerProvider in the interface): that turns tracing
// and metrics off, as an untyped nil does, rather than panicking.
func TestNew_TypedNilProviders(t *testing.T) {
	var tp *sdktrace.TracerProvider
	var mp *sdkmetric.MeterProvider
	tel := boundsTelemetry(t, Options{TracerProvider: tp, MeterProvider: mp})
	if tel.Tracing() || tel.rec != nil {
		t.Errorf("typed nil providers: tracing %v, recorder %v; want both off", tel.Tracing(), tel.rec != nil)
	}
}
