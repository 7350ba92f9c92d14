package streams_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

func TestEnsureIsIdempotent(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	o := streams.DefaultOptions()
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatal(err)
	}
	if err := streams.EnsureWORM(ctx, js, o); err != nil {
		t.Fatal(err)
	}
	before := map[string]time.Time{}
	for _, name := range []string{subjects.ReplaysStream, subjects.EventsStream, subjects.LedgerStream, subjects.FailuresStream, subjects.AdvisoriesStream, subjects.QuarantineStream, subjects.AuditStream, "KV_" + subjects.IdempotencyBucket, "KV_" + subjects.AttemptsBucket, "KV_" + subjects.DrainsBucket, "KV_" + subjects.ApprovalsBucket, "KV_" + subjects.HoldsBucket} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		before[name] = s.CachedInfo().Created
	}
	// A second start with the same options changes nothing.
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatalf("second EnsureCore: %v", err)
	}
	if err := streams.EnsureWORM(ctx, js, o); err != nil {
		t.Fatalf("second EnsureWORM: %v", err)
	}
	for name, created := range before {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if !s.CachedInfo().Created.Equal(created) {
			t.Errorf("%s was re-created", name)
		}
	}
}

func TestEnsureRefusesIncompatible(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*jetstream.StreamConfig)
		want   string
	}{
		{"retention", func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy }, "retention"},
		{"max age", func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, "max age"},
		{"subjects", func(c *jetstream.StreamConfig) { c.Subjects = []string{"events.pharmacy.>"} }, "subjects"},
		{"msg-id dedupe on", func(c *jetstream.StreamConfig) { c.Duplicates = 2 * time.Minute }, "duplicate window"},
		{"no source", func(c *jetstream.StreamConfig) { c.Sources = nil }, "sources"},
		{"another source", func(c *jetstream.StreamConfig) { c.Sources = []*jetstream.StreamSource{{Name: "OTHER"}} }, "sources"},
		// The layout before REPLAYS: replays stored in EVENTS itself, with
		// a stream-wide de-duplication window.
		{"earlier layout", func(c *jetstream.StreamConfig) {
			c.Subjects, c.Sources, c.Duplicates = []string{subjects.EventsAll, subjects.ReplaysAll}, nil, 2*time.Minute
		}, "subjects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := natstest.Start(t)
			js := srv.JetStream(t)
			ctx := context.Background()
			cfg := streams.Events(streams.DefaultOptions())
			tt.mutate(&cfg)
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			err := streams.EnsureCore(ctx, js, streams.DefaultOptions())
			if !errors.Is(err, streams.ErrIncompatible) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("EnsureCore = %v, want ErrIncompatible naming %q", err, tt.want)
			}
			s, err := js.Stream(ctx, subjects.EventsStream)
			if err != nil {
				t.Fatal(err)
			}
			if d := streams.StreamDiff(cfg, s.CachedInfo().Config); len(d) != 0 {
				t.Errorf("existing stream was altered: %v", d)
			}
		})
	}
}

func TestWORMConfigured(t *testing.T) {
	expiring := streams.DefaultOptions()
	expiring.QuarantineMaxAge = 7 * 365 * 24 * time.Hour
	for _, c := range []jetstream.StreamConfig{streams.Quarantine(streams.DefaultOptions()), streams.Audit(streams.DefaultOptions()),
		streams.LegalHold(expiring)} {
		wormConfigured(t, c)
	}
}

// everyDomain returns a retention of d for every registered domain, and
// of other for the domain named one (none when one is "").
func everyDomain(d time.Duration, one string, other time.Duration) map[string]time.Duration {
	m := map[string]time.Duration{}
	for _, n := range registry.Names() {
		m[n] = d
	}
	if one != "" {
		m[one] = other
	}
	return m
}

// TestRetention: a QUARANTINE MaxAge below the longest retention (the
// registry's, or a configured one) is refused, naming both; LEGALHOLD is
// provisioned only when QUARANTINE has a MaxAge, with none of its own.
func TestRetention(t *testing.T) {
	const year = 365 * 24 * time.Hour
	tests := []struct {
		name      string
		maxAge    time.Duration
		retention map[string]time.Duration
		wantErr   string // "" for none; else a text the error names
	}{
		{"no max age", 0, nil, ""},
		{"the longest retention exactly (DSCSA 6 y)", 6 * year, nil, ""},
		{"below DSCSA's 6 y", 5 * year, nil, "dscsa"},
		{"a day below", 6*year - 24*time.Hour, nil, "21 U.S.C. 360eee-1"},
		{"configured in seconds", 3 * time.Second, everyDomain(time.Second, "dscsa", 2*time.Second), ""},
		{"configured longer than the max age", 3 * time.Second, everyDomain(time.Second, "pharmacy", 4*time.Second), "pharmacy 4s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := streams.DefaultOptions()
			o.QuarantineMaxAge, o.DuplicateWindow, o.Retention = tt.maxAge, time.Second, tt.retention
			err := o.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate = %v", err)
			case tt.wantErr != "" && (!errors.Is(err, streams.ErrRetention) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.maxAge.String())):
				t.Errorf("Validate = %v, want %v naming %q and the max age", err, streams.ErrRetention, tt.wantErr)
			}
		})
	}
	if _, err := streams.ParseRetention("dscsa=6h,nowhere"); err == nil {
		t.Error("ParseRetention accepted a member without a duration")
	}
	o := streams.DefaultOptions()
	o.Retention = map[string]time.Duration{"nowhere": time.Hour}
	if o.Validate() == nil {
		t.Error("a retention of an unknown domain accepted")
	}
	ctx := context.Background()
	for _, maxAge := range []time.Duration{0, 3 * time.Second} {
		srv := natstest.Start(t)
		js := srv.JetStream(t)
		o := streams.DefaultOptions()
		o.QuarantineMaxAge, o.DuplicateWindow = maxAge, time.Second
		o.Retention = everyDomain(time.Second, "", 0)
		if err := streams.EnsureWORM(ctx, js, o); err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, subjects.LegalHoldStream)
		switch {
		case maxAge == 0 && !errors.Is(err, jetstream.ErrStreamNotFound):
			t.Errorf("LEGALHOLD without a QUARANTINE max age: %v", err)
		case maxAge > 0 && err != nil:
			t.Errorf("LEGALHOLD with a QUARANTINE max age: %v", err)
		case maxAge > 0 && s.CachedInfo().Config.MaxAge != 0:
			t.Errorf("LEGALHOLD has a max age: %s", s.CachedInfo().Config.MaxAge)
		}
	}
}

func wormConfigured(t *testing.T, c jetstream.StreamConfig) {
	t.Helper()
	if !c.DenyDelete || !c.DenyPurge || c.AllowRollup || c.AllowMsgTTL || c.SubjectDeleteMarkerTTL != 0 ||
		c.AllowMsgSchedules || c.Discard != jetstream.DiscardNew || c.MaxAge != 0 || c.MaxMsgs != -1 || c.MaxBytes != -1 {
		t.Fatalf("QUARANTINE config is not WORM: %+v", c)
	}
}

func TestOptionsValidate(t *testing.T) {
	bad := streams.DefaultOptions()
	bad.Replicas = 0
	if bad.Validate() == nil {
		t.Error("replicas 0 accepted")
	}
	bad = streams.DefaultOptions()
	bad.DuplicateWindow = 30 * 24 * time.Hour
	if bad.Validate() == nil {
		t.Error("duplicate window longer than max age accepted")
	}
	if err := streams.DefaultOptions().Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

// TestEnsureUpgradesToAtomic: the stores of a layout from before atomic
// batches (LEDGER, QUARANTINE and the IDEMPOTENCY bucket without allow
// atomic publish) are upgraded in place by the next provisioning, and
// nothing else about them changes.
func TestEnsureUpgradesToAtomic(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	o := streams.DefaultOptions()
	for _, cfg := range []jetstream.StreamConfig{streams.Replays(o), streams.Events(o), streams.Ledger(o), streams.Quarantine(o)} {
		cfg.AllowAtomicPublish = false
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	// AUDIT of the earlier layouts: the checkpoints only, no atomic
	// publish, and QUARANTINE's MaxAge (which would expire the people's
	// key registry and the checkpoint chain's first sequences).
	old := streams.Audit(o)
	old.Subjects, old.AllowAtomicPublish, old.MaxAge = []string{subjects.AuditCheckpoints}, false, 6*365*24*time.Hour
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, streams.Idempotency(o)); err != nil {
		t.Fatal(err)
	}
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatal(err)
	}
	if err := streams.EnsureWORM(ctx, js, o); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{subjects.EventsStream, subjects.ReplaysStream, subjects.LedgerStream, subjects.QuarantineStream, "KV_" + subjects.IdempotencyBucket} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; !c.AllowAtomicPublish {
			t.Errorf("%s: allow atomic publish still off", name)
		}
	}
	for _, name := range []string{subjects.QuarantineStream, subjects.AuditStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; !c.DenyDelete || !c.DenyPurge || c.AllowRollup {
			t.Errorf("%s lost its WORM settings in the upgrade: %+v", name, c)
		}
	}
	s, err := js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.CachedInfo().Config.Subjects, streams.Audit(o).Subjects; !slices.Equal(got, want) {
		t.Errorf("AUDIT subjects after the upgrade: %v, want %v", got, want)
	}
	if age := s.CachedInfo().Config.MaxAge; age != 0 {
		t.Errorf("AUDIT max age after the upgrade: %s, want none", age)
	}
}

// TestEnsureUpgradesEventsToRedriven: an EVENTS provisioned by the previous
// layout (events.> only, replays sourced from REPLAYS) is given
// redriven.> in place by the next provisioning: its messages, its source
// and every other setting stay, a replay an older redriver left in
// REPLAYS is still delivered, and a replay published on redriven.> is
// stored in EVENTS itself.
func TestEnsureUpgradesEventsToRedriven(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	o := streams.DefaultOptions()
	old := streams.Events(o)
	old.Subjects = []string{subjects.EventsAll}
	for _, cfg := range []jetstream.StreamConfig{streams.Replays(o), old} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, subjects.Event("pharmacy", "dispense"), []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, subjects.Replay("pharmacy", "dispense"), []byte(`{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, subjects.Redriven("pharmacy", "dispense", "pharmacy_ab", 1), []byte(`{"n":3}`)); err == nil {
		t.Fatal("the old EVENTS stored a redriven subject")
	}
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatalf("EnsureCore on the previous layout: %v", err)
	}
	s, err := js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	have := s.CachedInfo().Config
	if d := streams.StreamDiff(streams.Events(o), have); len(d) != 0 {
		t.Fatalf("EVENTS after the upgrade differs: %v", d)
	}
	ack, err := js.Publish(ctx, subjects.Redriven("pharmacy", "dispense", "pharmacy_ab", 1), []byte(`{"n":3}`))
	if err != nil || ack.Stream != subjects.EventsStream {
		t.Fatalf("redriven publish after the upgrade: %+v, %v", ack, err)
	}
	natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != 3 {
			return fmt.Errorf("EVENTS holds %d messages, want 3 (event, sourced replay, redriven replay)", info.State.Msgs)
		}
		return nil
	})
	m, err := s.GetLastMsgForSubject(ctx, subjects.Replay("pharmacy", "dispense"))
	if err != nil || string(m.Data) != `{"n":2}` {
		t.Fatalf("the replay left in REPLAYS is not in EVENTS: %v", err)
	}
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatalf("second EnsureCore: %v", err)
	}
}

// TestLedgerOncePerSubject: the server itself refuses a second message on
// a LEDGER subject (10077), whoever sends it and without any expectation
// header, on a LEDGER provisioned now and on one of the earlier layout
// that provisioning upgrades in place (the discard policy and the
// per-subject limit of an existing stream can be updated); a LEDGER of the
// earlier layout with a subject already written twice is not upgraded
// (the server would remove the older message) and provisioning says why.
func TestLedgerOncePerSubject(t *testing.T) {
	o := streams.DefaultOptions()
	subj := subjects.Ledger("pharmacy", "pharmacy_0123456789abcdef0123456789abcdef")
	other := subjects.Ledger("pharmacy", "pharmacy_fedcba9876543210fedcba9876543210")
	for _, tc := range []struct {
		name string
		// old: LEDGER exists beforehand in the earlier layout, holding
		// these subjects' messages.
		old     bool
		written []string
		wantErr error
	}{
		{name: "provisioned now"},
		{name: "earlier layout, one message per subject", old: true, written: []string{subj, other}},
		{name: "earlier layout, a subject written twice", old: true, written: []string{subj, subj, other}, wantErr: streams.ErrSubjectWrittenTwice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			js := srv.JetStream(t)
			ctx := context.Background()
			if tc.old {
				cfg := streams.Ledger(o)
				cfg.MaxMsgsPerSubject, cfg.DiscardNewPerSubject = 0, false
				if _, err := js.CreateStream(ctx, cfg); err != nil {
					t.Fatal(err)
				}
				for _, s := range tc.written {
					if _, err := js.Publish(ctx, s, []byte(`{"supplier":"Müller & Söhne <Großhandel>"}`)); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := streams.EnsureCore(ctx, js, o)
			s, serr := js.Stream(ctx, subjects.LedgerStream)
			if serr != nil {
				t.Fatal(serr)
			}
			info, ierr := s.Info(ctx)
			if ierr != nil {
				t.Fatal(ierr)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("EnsureCore = %v, want %v", err, tc.wantErr)
				}
				if info.State.Msgs != uint64(len(tc.written)) || info.Config.MaxMsgsPerSubject > 0 {
					t.Fatalf("LEDGER changed: %d messages, max per subject %d", info.State.Msgs, info.Config.MaxMsgsPerSubject)
				}
				return
			}
			if err != nil {
				t.Fatalf("EnsureCore: %v", err)
			}
			if d := streams.StreamDiff(streams.Ledger(o), info.Config); len(d) > 0 {
				t.Fatalf("LEDGER differs: %v", d)
			}
			if info.State.Msgs != uint64(len(tc.written)) {
				t.Fatalf("LEDGER holds %d messages, want %d", info.State.Msgs, len(tc.written))
			}
			if len(tc.written) == 0 {
				if _, err := js.Publish(ctx, subj, []byte(`{"n":1}`)); err != nil {
					t.Fatal(err)
				}
			}
			_, err = js.Publish(ctx, subj, []byte(`{"n":2}`))
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != streams.ErrCodeMaxMsgsPerSubject {
				t.Fatalf("second message on a LEDGER subject: %v, want error %d", err, streams.ErrCodeMaxMsgsPerSubject)
			}
			if _, err := js.Publish(ctx, subjects.Ledger("fsma", "fsma_0123456789abcdef0123456789abcdef"), []byte(`{}`)); err != nil {
				t.Fatalf("another subject: %v", err)
			}
		})
	}
}
