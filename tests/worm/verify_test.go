// Package worm tests, on the whole system (the all-in-one stack, the
// default config's real identities, an embedded server), that audit.verify
// never goes blind: documents forged in DOCUMENTS with the validator's
// credential (the one service that writes there) are each reported with
// their fault, and verify answers, with the rest checked.
package worm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// system is a running stack and a connection per person.
type system struct {
	st    *stack.Stack
	conns map[string]*nats.Conn
}

// start runs the whole system on a free port with a temporary store.
func start(t *testing.T) *system {
	t.Helper()
	cfg := stack.DefaultConfig()
	dir := t.TempDir()
	cfg.DataDir, cfg.AnchorDir = dir+"/data", dir+"/anchors"
	cfg.Port, cfg.SyncAlways, cfg.MetricsAddr = -1, false, ""
	cfg.PasswordCost = access.MinBcryptCost
	cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
	st, err := stack.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the stack did not stop within 30 s")
		}
	})
	select {
	case <-st.Ready():
	case err := <-done:
		t.Fatalf("stack exited: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("stack not ready after 60 s")
	}
	return &system{st: st, conns: map[string]*nats.Conn{}}
}

func (s *system) conn(t *testing.T, person string) *nats.Conn {
	t.Helper()
	if nc, ok := s.conns[person]; ok {
		return nc
	}
	nc, err := s.st.ConnectAs(person)
	if err != nil {
		t.Fatalf("connect as %s: %v", person, err)
	}
	t.Cleanup(nc.Close)
	s.conns[person] = nc
	return nc
}

// request sends req as person and decodes the reply into rep; it returns
// the service error code, if any.
func (s *system) request(t *testing.T, person, subject string, req, rep any) string {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.conn(t, person).Request(subject, b, 60*time.Second)
	if err != nil {
		t.Fatalf("%s as %s: %v", subject, person, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return code
	}
	if err := json.Unmarshal(m.Data, rep); err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	return ""
}

// documentChain publishes, as the publisher, a DSCSA document with one bad
// event and returns the document's SHA-256 and the bad event's chain.
func (s *system) documentChain(t *testing.T) (sha, dlqID string) {
	t.Helper()
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	id := "SHIP-VERIFY & <Müller & Söhne> 陈伟"
	data, err := set.Document(id, 41_000, 5, map[int]bool{3: true})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(s.conn(t, string(access.RolePublisher)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), subjects.Event(dscsa.Name, subjects.DocumentType), data); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		var page api.ListReply
		if code := s.request(t, access.DefaultPerson(access.RoleViewer), api.AuditList, api.ListRequest{Domain: dscsa.Name}, &page); code != "" {
			return errors.New(code)
		}
		for _, it := range page.Items {
			var rep api.GetReply
			if code := s.request(t, access.DefaultPerson(access.RoleViewer), api.AuditGet, api.GetRequest{DLQID: it.DLQID}, &rep); code != "" {
				return errors.New(code)
			}
			if d := rep.State.Document; d != nil && d.ID == id {
				sha, dlqID = d.SHA256, it.DLQID
				return nil
			}
		}
		return fmt.Errorf("no chain of the document yet")
	})
	return sha, dlqID
}

// TestVerifyNeverBlind: each forged input the validator's credential can
// leave in DOCUMENTS (a garbage manifest, a manifest naming absent chunks,
// one naming another document's chunks, altered bytes under a document's
// name, a manifest under a name that is no SHA-256) is reported by
// audit.verify as a document problem naming its fault; verify answers
// (never UNAVAILABLE), reads the real document whole, and audit.get still
// hands out the real document event's original bytes.
func TestVerifyNeverBlind(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	realSHA, dlqID := s.documentChain(t)
	inspector := access.DefaultPerson(access.RoleInspector)
	var before api.GetReply
	if code := s.request(t, inspector, api.AuditGet, api.GetRequest{DLQID: dlqID, IncludePayload: true, Reason: "DSCSA inspection"}, &before); code != "" ||
		len(before.DocumentBytes) == 0 {
		t.Fatalf("audit.get before: %s, %d original bytes", code, len(before.DocumentBytes))
	}

	js, err := jetstream.New(s.conn(t, access.Validator))
	if err != nil {
		t.Fatal(err)
	}
	name := func(b string) string {
		sum := sha256.Sum256([]byte(b))
		return hex.EncodeToString(sum[:])
	}
	manifest := func(sha string, size int, upload string, runs [][2]uint64) []byte {
		b, _ := json.Marshal(streams.DocumentManifest{Version: streams.DocumentManifestVersion, SHA256: sha, Size: int64(size),
			ChunkSize: streams.DocumentChunkSize, Upload: upload, Chunks: runs, Created: time.Now().UTC().Format(time.RFC3339)})
		return b
	}
	chunk := func(sha, upload string, b []byte) [][2]uint64 {
		ack, err := js.Publish(ctx, streams.DocumentChunkSubject(sha, upload, 0), b)
		if err != nil {
			t.Fatalf("a chunk as the validator: %v", err)
		}
		return [][2]uint64{{ack.Sequence, 1}}
	}
	original := `{"quantity":500,"party":"Müller & Söhne <Großhandel>"}`
	altered := `{"quantity":900,"party":"Müller & Söhne <Großhandel>"}`
	forgeries := []struct {
		name  string
		doc   string
		data  func(doc string) []byte
		fault streams.DocumentFault
	}{
		{"garbage", name("garbage"), func(string) []byte { return []byte(`{"sha256": <Müller & Söhne>, "陈伟"`) }, streams.FaultManifestUnreadable},
		{"absent chunks", name("absent"), func(d string) []byte { return manifest(d, 10, "forged", [][2]uint64{{9_000_000, 1}}) },
			streams.FaultChunkMissing},
		{"another document's chunks", name("foreign"), func(d string) []byte {
			return manifest(d, len(altered), "forged", chunk(realSHA, "forged", []byte(altered)))
		}, streams.FaultChunkForeign},
		{"altered bytes under the original's name", name(original), func(d string) []byte {
			return manifest(d, len(altered), "forged", chunk(d, "forged", []byte(altered)))
		}, streams.FaultHash},
		{"a name that is no SHA-256", "Müller-Söhne", func(d string) []byte { return manifest(d, 1, "forged", [][2]uint64{{1, 1}}) },
			streams.FaultManifestName},
	}
	for _, f := range forgeries {
		if _, err := js.Publish(ctx, streams.DocumentManifestSubject(f.doc), f.data(f.doc)); err != nil {
			t.Fatalf("%s as the validator: %v", f.name, err)
		}
	}

	var rep api.VerifyReply
	if code := s.request(t, access.DefaultPerson(access.RoleViewer), api.AuditVerify, api.VerifyRequest{}, &rep); code != "" {
		t.Fatalf("audit.verify answered %s: it went blind", code)
	}
	for _, f := range forgeries {
		t.Run(f.name, func(t *testing.T) {
			n := 0
			for _, p := range rep.Problems {
				if p.Kind == api.ProblemDocument && strings.Contains(p.Subject, f.doc) {
					n++
					if !strings.Contains(p.Detail, string(f.fault)) {
						t.Errorf("the problem does not name %s: %s", f.fault, p.Detail)
					}
					if strings.Contains(p.Detail, "quantity") || strings.Contains(p.Detail, "Müller & Söhne") {
						t.Errorf("the problem carries the document's bytes: %s", p.Detail)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d problems of the forged document, want 1: %+v", n, rep.Problems)
			}
		})
	}
	if rep.OK || rep.ProblemCount != len(forgeries) {
		t.Errorf("verify: OK %v, %d problems, want %d: %+v", rep.OK, rep.ProblemCount, len(forgeries), rep.Problems)
	}
	if rep.Documents == nil || rep.Documents.Objects != 1 || rep.Documents.Named != 1 || rep.Records == 0 {
		t.Errorf("verify read %+v of DOCUMENTS and %d records; want the real document read whole, and named once", rep.Documents, rep.Records)
	}
	var after api.GetReply
	if code := s.request(t, inspector, api.AuditGet, api.GetRequest{DLQID: dlqID, IncludePayload: true, Reason: "DSCSA inspection"}, &after); code != "" ||
		string(after.DocumentBytes) != string(before.DocumentBytes) {
		t.Errorf("audit.get after: %s, the original bytes changed: %v", code, string(after.DocumentBytes) != string(before.DocumentBytes))
	}
}
