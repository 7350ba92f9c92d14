package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// compareTracing measures what tracing costs the ingest within one process
// and one server: rounds of an untraced and a traced validator phase, in
// ABBA order (untraced, traced, traced, untraced, ...) so that a drift of
// the machine or of the growing store weighs on both alike. Each phase
// ingests its own n events (sets of events, one per phase). In a traced
// phase the validator traces at 100 % sampling (t.validator) and, when t.on,
// so does the publisher (a producer span per event, the validator's spans
// its children), here or, when t.remote, elsewhere (the events carry a
// traceparent); the phase lasts until its spans are exported (ForceFlush).
// It prints each phase and the cost: one minus the traced phases' events
// per second over the untraced ones', in total.
func compareTracing(ctx context.Context, url string, js jetstream.JetStream, workers int, t *tracing,
	sets [][]event, snk *sink) error {
	var (
		committed        uint64
		evOff, evOn      int
		durOff, durOn    time.Duration
		cpuOff, cpuOn    time.Duration
		sinkCPU          time.Duration
		untraced         = noop.NewTracerProvider()
		tracedPhaseOrder = func(i int) bool { return i%4 == 1 || i%4 == 2 } // ABBA
	)
	for i, events := range sets {
		on := tracedPhaseOrder(i)
		tp := trace.TracerProvider(untraced)
		publish := func() error { return publishAll(ctx, js, events, func(e event) string { return e.subject }) }
		if on {
			tp = t.validator
			switch {
			case t.remote:
				msgs := withTraceparents(events)
				publish = func() error { return publishRemote(ctx, js, msgs) }
			case t.on:
				publish = func() error { return t.publishAll(ctx, js, events) }
			}
		}
		var sinkStart time.Duration
		committed += uint64(len(events))
		ph, err := validatorPhase(ctx, url, js, workers, tp, committed, 0,
			func() (err error) {
				if on && snk != nil {
					sinkStart, err = snk.cpu(ctx)
				}
				return err
			},
			publish,
			func() error {
				// A traced phase ends once its spans are exported: the batch
				// processor's tail is its cost, not the next phase's.
				if !on {
					return nil
				}
				for _, p := range []trace.TracerProvider{t.publisher, t.validator} {
					if f, ok := p.(interface{ ForceFlush(context.Context) error }); ok {
						if err := f.ForceFlush(ctx); err != nil {
							return err
						}
					}
				}
				return nil
			})
		if err != nil {
			return err
		}
		d := time.Duration(float64(len(events)) / ph.rate * float64(time.Second))
		cpu := ph.cpuPerEvent * time.Duration(len(events))
		label := "untraced"
		if on {
			label = "traced  "
			evOn, durOn, cpuOn = evOn+len(events), durOn+d, cpuOn+cpu
			if snk != nil {
				end, err := snk.cpu(ctx)
				if err != nil {
					return err
				}
				sinkCPU += end - sinkStart
			}
		} else {
			evOff, durOff, cpuOff = evOff+len(events), durOff+d, cpuOff+cpu
		}
		fmt.Printf("phase %2d %s %8.0f events/s  %6.1f µs CPU per event\n", i+1, label, ph.rate, us(ph.cpuPerEvent))
	}
	rateOff, rateOn := float64(evOff)/durOff.Seconds(), float64(evOn)/durOn.Seconds()
	perOff, perOn := cpuOff/time.Duration(evOff), cpuOn/time.Duration(evOn)
	fmt.Printf("untraced:                    %8.0f events/s, %.1f µs CPU per event\n", rateOff, us(perOff))
	fmt.Printf("traced (100 %%):              %8.0f events/s, %.1f µs CPU per event\n", rateOn, us(perOn))
	if snk != nil {
		fmt.Printf("trace sink CPU:              %.1f µs per traced event (its own process)\n", us(sinkCPU/time.Duration(evOn)))
	}
	fmt.Printf("tracing cost:                %8.1f %% of ingest throughput (%.1f %% by CPU per event)\n",
		100*(1-rateOn/rateOff), 100*(1-float64(perOff)/float64(perOn)))
	return nil
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
