package redriver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestBadRequestsNameTheField: drain filters with unknown codes, classes
// or domains, and a correction that is not a JSON object, are BAD_REQUEST
// naming the member (issue 15, bug 8: the filters selected nothing, and
// the correction was stored and burnt a redrive).
func TestBadRequestsNameTheField(t *testing.T) {
	e := newTestEnv(t)
	id := e.write(t, spec{n: 1, domain: "dscsa", class: record.ClassValidation, code: codes.SchemaValidation})
	for _, tc := range []struct {
		name, subject, body, field string
	}{
		{"unknown error code", api.DrainStart, `{"filter":{"error_codes":["NOSUCH_CODE"]}}`, "filter.error_codes"},
		{"unknown class", api.DrainStart, `{"filter":{"classes":["weird"]}}`, "filter.classes"},
		{"unknown domain", api.DrainStart, `{"filter":{"domain":"bank"}}`, "filter.domain"},
		{"unknown filter member", api.DrainStart, `{"filter":{"domains":["dscsa"]}}`, "filter.domains"},
		{"bad since", api.DrainStart, `{"filter":{"since":"yesterday"}}`, "filter.since"},
		{"bad dlq id", api.DrainStart, `{"filter":{"dlq_ids":["ok_1","quarantine.>"]}}`, "filter.dlq_ids[1]"},
		{"concurrency", api.DrainStart, `{"max_concurrency":100000}`, "max_concurrency"},
		{"payload not an object", api.Redrive, `{"dlq_id":"` + id + `","payload":"abc","reason":"fix"}`, "payload"},
		{"payload an array", api.Redrive, `{"dlq_id":"` + id + `","payload":[1],"reason":"fix"}`, "payload"},
		{"release class", api.Release, `{"dlq_id":"` + id + `","reason":"y","class":"poison"}`, "class"},
		{"drain id", api.DrainStatus, `{"drain_id":"a.b"}`, "drain_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := endpoint.CallRaw(ctx, e.nc, tc.subject, []byte(tc.body))
			if api.CodeOf(err) != api.ErrBadRequest || api.FieldOf(err) != tc.field {
				t.Fatalf("%s %s: %v, want BAD_REQUEST naming %q", tc.subject, tc.body, err, tc.field)
			}
		})
	}
	// The refused corrections burnt no redrive: the chain is as written.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := e.js.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := q.Info(ctx, jetstream.WithSubjectFilter(subjects.Quarantine("dscsa", id)))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subjects.Quarantine("dscsa", id)]; n != 1 {
		t.Errorf("chain holds %d records after refused corrections, want 1", n)
	}
}

// TestShutdownUnderRequests: stopping the redriver while requests are in
// flight (dry runs, redrives, status reads) waits for them, under the race
// detector (issue 15, bug 12: the micro callbacks' wg.Add raced Run's
// wg.Wait).
func TestShutdownUnderRequests(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	nc := srv.Connect(t)
	for round := range 3 {
		cfg := DefaultConfig()
		cfg.Provision, cfg.AllowAnonymous = false, true
		s, err := New(srv.Connect(t), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		waitRedriver(t, nc)
		var (
			wg       sync.WaitGroup
			answered atomic.Int64
		)
		stop := make(chan struct{})
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				bodies := []struct{ subject, body string }{
					{api.DrainStart, `{"dry_run":true}`},
					{api.Redrive, `{"dlq_id":"` + domain.Key("pharmacy", "nothing") + `"}`},
					{api.DrainList, ``},
				}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					b := bodies[(i+w)%len(bodies)]
					rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, _ = endpoint.CallRaw(rctx, nc, b.subject, []byte(b.body))
					rcancel()
					answered.Add(1)
				}
			}()
		}
		// Requests are flowing (and more are in flight) when Run stops.
		want := int64(20 + round*30)
		natstest.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
			if n := answered.Load(); n < want {
				return fmt.Errorf("%d requests answered, waiting for %d", n, want)
			}
			return nil
		})
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after its context was cancelled")
		}
		close(stop)
		wg.Wait()
	}
}
