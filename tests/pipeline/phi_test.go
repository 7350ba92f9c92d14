package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// logBuffer collects every log line of the services under test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// example loads a valid testdata event and applies edits to its fields.
func example(t *testing.T, path string, edit func(map[string]any)) []byte {
	t.Helper()
	b, err := fs.ReadFile(schemas.FS, path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNoPayloadValuesInLogs publishes events carrying unique marker strings
// down every path (committed, structural failures of each kind, transient
// failures that exhaust and are quarantined through the advisory path) with
// debug logging on, and asserts that no log line of any service contains a
// marker, while the quarantine records do keep them verbatim.
func TestNoPayloadValuesInLogs(t *testing.T) {
	const marker = "PHI-MARKER-7f3a9c"
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		if strings.Contains(body.String(), marker+"-exhaust") {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(down.Close)

	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	logs := &logBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	vcfg := validator.DefaultConfig()
	vcfg.Provision = false
	vcfg.DownstreamURL = down.URL
	vcfg.MaxDeliver = 2
	vcfg.AckWait = 2 * time.Second
	vcfg.BackoffBase, vcfg.BackoffMax = 20*time.Millisecond, 50*time.Millisecond
	vcfg.ClaimLease, vcfg.DownstreamTimeout = 3*time.Second, time.Second
	v, err := validator.New(srv.Connect(t), vcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	qcfg := quarantiner.DefaultConfig()
	qcfg.Provision = false
	q, err := quarantiner.New(srv.Connect(t), qcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{v.Run, q.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				t.Errorf("service: %v", err)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	events := []struct {
		subject string
		data    []byte
	}{
		{"events.pharmacy.dispense", example(t, "testdata/pharmacy/valid/dispense-schedule-ii.json", func(d map[string]any) {
			d["transaction_id"], d["actor_id"] = marker+"-committed", marker+"-rph"
		})},
		{"events.pharmacy.dispense", example(t, "testdata/pharmacy/valid/dispense-schedule-ii.json", func(d map[string]any) {
			d["transaction_id"], d["ndc"] = marker+"-badndc", marker+"-ndc"
		})},
		{"events.pharmacy.dispense", example(t, "testdata/pharmacy/valid/dispense-schedule-ii.json", func(d map[string]any) {
			d["transaction_id"], d["event_type"] = marker+"-schema", marker+"-type"
		})},
		{"events.pharmacy.dispense", []byte(`{"transaction_id": "` + marker + `-malformed", `)},
		{"events.fsma.shipping", example(t, "testdata/fsma/valid/shipping-gln.json", func(d map[string]any) {
			d["traceability_lot_code"], d["supplier_id"] = marker+"-tlc", ""
		})},
		{"events.pharmacy.dispense", example(t, "testdata/pharmacy/valid/dispense-schedule-ii.json", func(d map[string]any) {
			d["transaction_id"], d["actor_id"] = marker+"-exhaust-tx", marker+"-exhaust"
		})},
		{"events.widgets." + "created", []byte(`{"note":"` + marker + `-unknown"}`)},
	}
	js := srv.JetStream(t)
	for _, e := range events {
		if _, err := js.Publish(context.Background(), e.subject, e.data); err != nil {
			t.Fatal(err)
		}
	}
	// One event commits; the other six are quarantined (five structural,
	// one exhausted through the max-deliveries advisory).
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if n := count(t, js, subjects.QuarantineStream); n != uint64(len(events)-1) {
			return fmt.Errorf("QUARANTINE holds %d records", n)
		}
		if n := count(t, js, subjects.LedgerStream); n != 1 {
			return fmt.Errorf("LEDGER holds %d events", n)
		}
		return nil
	})
	cancel()
	wg.Wait()

	out := logs.String()
	if !strings.Contains(out, "DLQ_QUARANTINED") || !strings.Contains(out, "exhausted") {
		t.Fatalf("logs lack the quarantine lines, so the test proves nothing:\n%s", out)
	}
	for i, line := range strings.Split(out, "\n") {
		if strings.Contains(line, marker) {
			t.Errorf("log line %d carries a payload value: %s", i, line)
		}
	}
	// The records keep the payloads verbatim: the markers are there.
	s, err := js.Stream(context.Background(), subjects.QuarantineStream)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= uint64(len(events)-1); seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		r, err := record.Parse(m.Data)
		if err != nil {
			t.Fatalf("record %d: %v", seq, err)
		}
		payload, err := r.Payload.Bytes()
		if err != nil || !bytes.Contains(payload, []byte(marker)) {
			t.Errorf("record %d does not preserve its payload (%v)", seq, err)
		}
	}
}

func count(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
