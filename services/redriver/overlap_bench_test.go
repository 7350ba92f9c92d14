package redriver

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// BenchmarkRefuseOverlap measures drain.start's overlap check over 5,000
// chains: with no unfinished drain (one multi-last get of DRAINS) and with
// a running drain over the same domain (a selection of the new filter).
func BenchmarkRefuseOverlap(b *testing.B) {
	srv := natstest.Start(b)
	srv.Provision(b, streams.DefaultOptions())
	nc := srv.Connect(b)
	cfg := DefaultConfig()
	cfg.Provision, cfg.AllowAnonymous = false, true
	s := runRedriver(b, srv.Connect(b), cfg)
	waitRedriver(b, nc)
	js := srv.JetStream(b)
	e := &testEnv{srv: srv, js: js, nc: nc}
	for i := range 5000 {
		e.write(b, spec{n: i, domain: "pharmacy", class: record.ClassExhausted, code: codes.DownstreamUnavailable, okey: fmt.Sprint("K", i%500)})
	}
	req := api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}}
	kv, err := js.KeyValue(context.Background(), subjects.DrainsBucket)
	if err != nil {
		b.Fatal(err)
	}
	for _, running := range []bool{false, true} {
		if running {
			st := api.DrainState{DrainID: "drain-bench", Status: api.DrainRunning, Request: req, StartedAt: time.Now().UTC(), Owner: "elsewhere",
				Heartbeat: time.Now().UTC()}
			v, _ := json.Marshal(st)
			if _, err := kv.Put(context.Background(), "drain-bench", v); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("unfinished drain %v", running), func(b *testing.B) {
			for b.Loop() {
				err := s.drainRunner.RefuseOverlap(context.Background(), req, "drain-new")
				if (err != nil) != running {
					b.Fatalf("refusal %v, want %v", err, running)
				}
			}
		})
	}
}
