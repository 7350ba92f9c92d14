package quarantiner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// The client of the quarantiner's append endpoints (shared/chain's
// Appender) is tested here, against a real quarantiner: shared/chain
// cannot import this package.

// quarantineOne quarantines a malformed event on subject and returns its
// dlq id once its chain has its first record.
func (e *env) quarantineOne(t *testing.T, subject string, data []byte) string {
	t.Helper()
	before := len(e.allRecords(t))
	seq := e.publishEvent(t, subject, data, nil)
	f := structural(subject, seq, data, codes.MalformedJSON)
	e.reportFailure(t, f)
	e.waitRecords(t, before+1)
	return record.DLQIDFor(f)
}

// TestAppenderCodes: each refusal of the quarantiner reaches the caller as
// a *chain.AppendError with the reply's code (chain.CodeOf), naming the
// endpoint asked; no reply is api.ErrUnavailable with the transport error
// wrapped.
func TestAppenderCodes(t *testing.T) {
	e := newEnv(t)
	q := e.start(t, testConfig(), nil)
	id := e.quarantineOne(t, "events.dscsa.shipping", []byte(`{"seller": "Müller & Söhne <Großhandel>", "note": "\"quoted\"`))
	lifecycle := chain.NewAppender(q.nc, api.QuarantinerAppend)
	holds := chain.NewAppender(q.nc, api.QuarantinerHold)
	hold := &record.HoldMark{HoldID: "h-étienne", CaseID: "Pharmacie Saint-Étienne v. <Grossiste> & Cie", At: time.Now().UTC()}
	ctx := context.Background()

	for _, tc := range []struct {
		name string
		a    *chain.Appender
		req  api.AppendRequest
		want string // "": appended
	}{
		{"redrive requested", lifecycle, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindRedriveRequested, ExpectedIndex: ptr(1), DrainID: "d1"}, ""},
		{"retried request answered as the first time", lifecycle, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindRedriveRequested, ExpectedIndex: ptr(1), DrainID: "d1"}, ""},
		{"no kind", lifecycle, api.AppendRequest{DLQID: id, Domain: "dscsa"}, api.ErrBadRequest},
		{"unknown dlq id", lifecycle, api.AppendRequest{DLQID: "dscsa_00", Domain: "dscsa", Kind: record.KindResolved, Actor: "Müller & Söhne", Reason: "r"}, api.ErrNotFound},
		{"stale index", lifecycle, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindReplayed, ExpectedIndex: ptr(1)}, api.ErrConflict},
		{"release when not poison", lifecycle, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindReleased, Class: record.ClassValidation, Actor: "a", Reason: "r"}, api.ErrInvalidTransition},
		{"hold on the lifecycle endpoint", lifecycle, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindHoldPlaced, Actor: "a", Reason: "r", Hold: hold}, api.ErrForbidden},
		{"resolve on the hold endpoint", holds, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindResolved, Actor: "a", Reason: "r"}, api.ErrForbidden},
		{"hold placed", holds, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindHoldPlaced, ExpectedIndex: ptr(2), Actor: "Erin <legal> & \"counsel\"", Reason: "subpoena", Hold: hold}, ""},
		{"nobody serves the subject", chain.NewAppender(q.nc, "quarantiner.nowhere"), api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindResolved}, api.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := tc.a.Append(ctx, tc.req)
			if got := chain.CodeOf(err); got != tc.want {
				t.Fatalf("code = %q (%v), want %q", got, err, tc.want)
			}
			if tc.want == "" {
				if rep.DLQID != id || rep.Index != *tc.req.ExpectedIndex || rep.AuditHash == "" {
					t.Errorf("reply = %+v", rep)
				}
				return
			}
			var ae *chain.AppendError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %T %v, want *chain.AppendError", err, err)
			}
			if ae.Subject == "" || ae.Message == "" || err.Error() != ae.Subject+": "+tc.want+": "+ae.Message {
				t.Errorf("error %q does not name the endpoint, code and message", err)
			}
			if tc.want == api.ErrUnavailable && !errors.Is(err, nats.ErrNoResponders) {
				t.Errorf("err = %v, want it to wrap nats.ErrNoResponders", err)
			}
		})
	}
	if n := len(e.chainOf(t, "dscsa", id)); n != 3 {
		t.Errorf("chain has %d records, want 3 (quarantined, redrive_requested once, hold_placed)", n)
	}
}

// TestAppenderTraceContext: an Appender with a tracer sends the trace
// context of its ctx, and the record names that trace; one without sends
// none, and the record does not name the caller's trace.
func TestAppenderTraceContext(t *testing.T) {
	const callerTrace, callerSpan = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7"
	e := newEnv(t)
	q := e.start(t, testConfig(), nil)
	tid, _ := trace.TraceIDFromHex(callerTrace)
	sid, _ := trace.SpanIDFromHex(callerSpan)
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	plain := chain.NewAppender(q.nc, api.QuarantinerAppend)
	for _, tc := range []struct {
		name    string
		a       *chain.Appender
		subject string
		traced  bool
	}{
		{"with a tracer", plain.WithTracer(telemetry.NewTracer(nil, nil)), "events.pharmacy.dispense", true},
		{"without", plain, "events.pharmacy.receiving", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := e.quarantineOne(t, tc.subject, []byte(`{"pharmacy": "Pharmacie Saint-Étienne",`))
			if _, err := tc.a.Append(ctx, api.AppendRequest{DLQID: id, Domain: "pharmacy", Kind: record.KindRedriveRequested, ExpectedIndex: ptr(1), DrainID: "d1"}); err != nil {
				t.Fatal(err)
			}
			var got record.Record
			for _, r := range e.allRecords(t) {
				if r.DLQID == id && r.Index == 1 {
					got = r
				}
			}
			if (got.TraceID == callerTrace) != tc.traced {
				t.Errorf("record trace %q, caller's %s, want traced %v", got.TraceID, callerTrace, tc.traced)
			}
		})
	}
}

// TestAppenderUpdate: the client's loop reads the chain, decides, appends
// conditionally and decides again when the chain moved.
func TestAppenderUpdate(t *testing.T) {
	e := newEnv(t)
	q := e.start(t, testConfig(), nil)
	reader := chain.NewReader(q.js)
	holds := chain.NewAppender(q.nc, api.QuarantinerHold)
	lifecycle := chain.NewAppender(q.nc, api.QuarantinerAppend)
	ctx := context.Background()
	placeHold := func(holdID string) chain.Decide {
		return func(ch chain.Chain) (*api.AppendRequest, error) {
			if ch.State.HeldBy(holdID) {
				return nil, nil // the chain says so already
			}
			return &api.AppendRequest{DLQID: ch.DLQID, Domain: ch.Domain, Kind: record.KindHoldPlaced, Actor: "Erin <legal>",
				Reason: "Müller & Söhne <Großhandel> subpoena", Hold: &record.HoldMark{HoldID: holdID, CaseID: "case-" + holdID, At: time.Now().UTC()}}, nil
		}
	}

	t.Run("concurrent writers", func(t *testing.T) {
		// Four callers each place their own hold on one chain at the same
		// time: a conditional append is refused only when another caller's
		// landed, and the refused caller decides again on the stored
		// chain. A caller meets at most three others' appends, fewer than
		// UpdateAttempts: every hold lands, once.
		id := e.quarantineOne(t, "events.dscsa.shipping", []byte(`{"gtin": "0"`))
		const writers = 4
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Go(func() {
				_, _, errs[i] = holds.Update(ctx, reader, "dscsa", id, placeHold(fmt.Sprintf("h%d", i)))
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		}
		ch, err := reader.Read(ctx, "dscsa", id)
		if err != nil || ch.FoldErr != nil {
			t.Fatalf("chain: %v, fold %v", err, ch.FoldErr)
		}
		if len(ch.Records) != 1+writers {
			t.Errorf("chain has %d records, want %d", len(ch.Records), 1+writers)
		}
		for i := range writers {
			if !ch.State.HeldBy(fmt.Sprintf("h%d", i)) {
				t.Errorf("hold h%d is not in the chain", i)
			}
		}
	})

	id := e.quarantineOne(t, "events.dscsa.receiving", []byte(`{"lot": "<L1>"`))
	for _, tc := range []struct {
		name      string
		a         *chain.Appender
		decide    chain.Decide
		appended  bool
		wantErr   error
		wantCode  string
		wantCalls int32
	}{
		{"appends", holds, placeHold("h1"), true, nil, "", 1},
		{"nothing to do", holds, placeHold("h1"), false, nil, "", 1},
		{"decide refuses", holds, func(chain.Chain) (*api.AppendRequest, error) { return nil, errNoHold }, false, errNoHold, "", 1},
		{"refused for good", lifecycle, func(ch chain.Chain) (*api.AppendRequest, error) {
			return &api.AppendRequest{DLQID: ch.DLQID, Domain: ch.Domain, Kind: record.KindHoldPlaced, Actor: "a", Reason: "r",
				Hold: &record.HoldMark{HoldID: "h2", CaseID: "c", At: time.Now()}}, nil
		}, false, nil, api.ErrForbidden, 1},
		{"invalid every time", lifecycle, func(ch chain.Chain) (*api.AppendRequest, error) {
			return &api.AppendRequest{DLQID: ch.DLQID, Domain: ch.Domain, Kind: record.KindResolved}, nil // no reason: invalid
		}, false, chain.ErrKeptChanging, api.ErrInvalidTransition, chain.UpdateAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			rep, appended, err := tc.a.Update(ctx, reader, "dscsa", id, func(ch chain.Chain) (*api.AppendRequest, error) {
				calls.Add(1)
				return tc.decide(ch)
			})
			if appended != tc.appended || chain.CodeOf(err) != tc.wantCode || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) ||
				(tc.wantErr == nil && tc.wantCode == "" && err != nil) {
				t.Fatalf("Update = %+v, %v, %v; want appended %v, err %v, code %q", rep, appended, err, tc.appended, tc.wantErr, tc.wantCode)
			}
			if n := calls.Load(); n != tc.wantCalls {
				t.Errorf("decide called %d times, want %d", n, tc.wantCalls)
			}
			if appended && (rep.Index != 1 || rep.Status != record.StatusOpen) {
				t.Errorf("reply = %+v", rep)
			}
		})
	}
}

var errNoHold = errors.New("test: hold not lifted")
