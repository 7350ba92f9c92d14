package chaos_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document/upload"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

// TestDocumentValidatorKilled: a document of 5,000 events (in parts, 10 of
// them bad) is being ingested when its validator process is killed
// (SIGKILL) mid-document; a validator started again finishes it. Every
// event ends committed once or quarantined once: LEDGER holds each valid
// event's key once, QUARANTINE one first record per bad event, nothing
// else, and the document's message is acknowledged.
func TestDocumentValidatorKilled(t *testing.T) {
	natstest.Long(t, "a cluster of processes killed and restarted, minutes")
	const n = 5_000
	bad := map[int]bool{}
	for i := range 10 {
		bad[i*487+3] = true
	}
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	data, err := set.Document("SHIP-CHAOS", 500_000, n, bad)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "validator")
	build := exec.Command("go", "build", "-o", bin, "./services/validator/cmd/validator")
	build.Dir = tools.Root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	js := srv.JetStream(t)
	qcfg := quarantiner.DefaultConfig()
	qcfg.Provision, qcfg.AckWait, qcfg.RetryDelay, qcfg.TerminatedGrace = false, 2*time.Second, 100*time.Millisecond, 200*time.Millisecond
	q, err := quarantiner.New(srv.Connect(t), qcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "quarantiner", q.Run)

	logf, err := os.Create(filepath.Join(dir, "validator.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	start := func() *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "NATS_URL="+srv.ClientURL(), "DEADLETTER_PROVISION=false", "DEADLETTER_CREATE_CONSUMER=true",
			"DEADLETTER_METRICS_ADDR=127.0.0.1:0", "DEADLETTER_ACK_WAIT=2s", "DEADLETTER_INSTANCE_ID=chaos-validator")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		return cmd
	}
	v := start()
	if _, err := upload.Publish(context.Background(), js, subjects.Event(dscsa.Name, subjects.DocumentType), bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	// Killed once the document is being committed, before it is done.
	var atKill uint64
	natstest.CheckFor(t, 120*time.Second, 5*time.Millisecond, func() error {
		if atKill = msgs(t, js, subjects.LedgerStream); atKill < 100 {
			return fmt.Errorf("%d committed", atKill)
		}
		return nil
	})
	if err := v.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = v.Process.Wait()
	atKill = msgs(t, js, subjects.LedgerStream)
	if atKill >= n-uint64(len(bad)) {
		t.Fatalf("the document was done (%d committed) before the kill", atKill)
	}
	t.Logf("killed with %d of %d events committed", atKill, n-len(bad))
	start()

	natstest.CheckFor(t, 180*time.Second, 100*time.Millisecond, func() error {
		if got := msgs(t, js, subjects.LedgerStream); got != n-uint64(len(bad)) {
			return fmt.Errorf("LEDGER %d, want %d", got, n-len(bad))
		}
		if got := msgs(t, js, subjects.QuarantineStream); got != uint64(len(bad)) {
			return fmt.Errorf("QUARANTINE %d, want %d", got, len(bad))
		}
		c, err := js.Consumer(context.Background(), subjects.EventsStream, subjects.ValidatorConsumer)
		if err != nil {
			return err
		}
		info, err := c.Info(context.Background())
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("consumer: %d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	// Each valid event's key once in LEDGER (one subject per key), each bad
	// event's chain once in QUARANTINE.
	doc, err := document.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := js.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ls.Info(context.Background(), jetstream.WithSubjectFilter(subjects.LedgerAll))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != n-len(bad) {
		t.Errorf("%d LEDGER subjects for %d valid events", len(info.State.Subjects), n-len(bad))
	}
	for s, c := range info.State.Subjects {
		if c != 1 {
			t.Errorf("%s: %d LEDGER messages", s, c)
		}
	}
	qs, err := js.Stream(context.Background(), subjects.QuarantineStream)
	if err != nil {
		t.Fatal(err)
	}
	qinfo, err := qs.Info(context.Background(), jetstream.WithSubjectFilter(subjects.QuarantineAll))
	if err != nil {
		t.Fatal(err)
	}
	if len(qinfo.State.Subjects) != len(bad) || len(doc.Events) != n {
		t.Errorf("%d quarantine chains for %d bad events", len(qinfo.State.Subjects), len(bad))
	}
}

func msgs(tb testing.TB, js jetstream.JetStream, stream string) uint64 {
	tb.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Msgs
}
