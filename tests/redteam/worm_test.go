package redteam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Server error codes of a refused write: a rollup on a stream that allows
// none, a second message on a subject of a stream that holds one.
const (
	errRollupNotPermitted  = 10111
	errMaxMsgsPerSubjectID = 10077
)

// subjectMatches reports whether the NATS subject pattern matches subject.
func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(p) == len(s)
}

// mayPublish reports whether the services' account user may publish on
// subject (its allow list matches it, its deny list does not).
func mayPublish(user, subject string) bool {
	spec, ok := access.Lookup(user)
	if !ok {
		return false
	}
	for _, d := range spec.Publish.Deny {
		if subjectMatches(d, subject) {
			return false
		}
	}
	for _, a := range spec.Publish.Allow {
		if subjectMatches(a, subject) {
			return true
		}
	}
	return false
}

// kept publishes, as the publisher, a DSCSA document with one bad event
// (a quarantined chain that names it) and returns the document's hex
// SHA-256 and that chain's dlq id, once the validator kept the document.
// Its events are the sample's from first on (a bad event seen before
// would join that event's chain).
func (e *env) keptDocument(tb testing.TB, id string, first int) (sha, dlqID string) {
	tb.Helper()
	wormDocMu.Lock()
	defer wormDocMu.Unlock()
	if d, ok := wormDocs[id]; ok {
		return d[0], d[1]
	}
	defer func() {
		if sha != "" {
			wormDocs[id] = [2]string{sha, dlqID}
		}
	}()
	set, err := sample.Load()
	if err != nil {
		tb.Fatal(err)
	}
	data, err := set.Document(id, first, 4, map[int]bool{2: true})
	if err != nil {
		tb.Fatal(err)
	}
	e.publish(tb, subjects.Event(dscsa.Name, subjects.DocumentType), string(data), nil)
	natstest.CheckFor(tb, 30*time.Second, 100*time.Millisecond, func() error {
		var page api.ListReply
		if code := e.request(tb, access.DefaultPerson(access.RoleViewer), api.AuditList, api.ListRequest{Domain: dscsa.Name, Limit: 1000}, &page); code != "" {
			return errors.New(code)
		}
		for _, it := range page.Items {
			rep := e.chain(tb, it.DLQID)
			if d := rep.State.Document; d != nil && d.ID == id {
				sha, dlqID = d.SHA256, it.DLQID
				return nil
			}
		}
		return fmt.Errorf("no chain of document %s yet", id)
	})
	return sha, dlqID
}

// wormDocs are the documents keptDocument published, by id: the chain of a
// document's bad event is the chain of every later copy of that event,
// so a test that needs a document's chain shares it.
var (
	wormDocMu sync.Mutex
	wormDocs  = map[string][2]string{}
)

// wormDocument is the document the tests of this file share.
func (e *env) wormDocument(tb testing.TB) (sha, dlqID string) {
	return e.keptDocument(tb, "SHIP-WORM & <Müller> 陈伟", 31_000)
}

// originalOf reads a document event's original bytes as the inspector
// (audit.get with the payload).
func (e *env) originalOf(tb testing.TB, dlqID string) []byte {
	tb.Helper()
	var rep api.GetReply
	if code := e.request(tb, access.DefaultPerson(access.RoleInspector), api.AuditGet,
		api.GetRequest{DLQID: dlqID, IncludePayload: true, Reason: "DSCSA inspection, Müller & Söhne <Großhandel>"}, &rep); code != "" {
		tb.Fatalf("audit.get %s: %s", dlqID, code)
	}
	if len(rep.DocumentBytes) == 0 {
		tb.Fatalf("audit.get %s: no original bytes of the document event", dlqID)
	}
	return rep.DocumentBytes
}

// TestEvidenceRefusesErasure (E1, E3, E4): on every evidence stream and
// bucket, each identity of the default config that may publish there
// (the services' credentials, the publisher through its import) sends
// Nats-Rollup: all and Nats-Rollup: sub, and asks for a purge and a
// message delete; the break-glass admin asks for the purge and the
// delete too. The server refuses each (a rollup with 10111 whoever sends
// it, a purge or delete by the permissions or by the stream's deny
// flags), and the stream holds what it held. verify still passes.
func TestEvidenceRefusesErasure(t *testing.T) {
	natstest.Long(t, "every evidence stream and mirror under every identity, tens of seconds")
	e := startEnv(t)
	ctx := context.Background()
	dlqID := e.quarantine(t, "worm Müller & Söhne <Großhandel>")
	sha, _ := e.wormDocument(t)

	// Each store with the subjects an attacker would roll up: the ones
	// that hold the evidence (a chain, a document's manifest), and fresh
	// ones in every writer's space.
	targets := []struct {
		stream   string
		subjects []string
	}{
		{subjects.EventsStream, []string{subjects.Event("pharmacy", "dispense"), subjects.Redriven("pharmacy", "dispense", dlqID, 99)}},
		{subjects.ReplaysStream, []string{subjects.Replay("pharmacy", "dispense")}},
		{subjects.LedgerStream, []string{subjects.Ledger("pharmacy", "worm-attack")}},
		{subjects.FailuresStream, []string{subjects.Failure("pharmacy")}},
		{subjects.AdvisoriesStream, []string{subjects.MaxDeliveriesAdvisories}},
		{subjects.QuarantineStream, []string{subjects.Quarantine("pharmacy", dlqID)}},
		{subjects.AuditStream, []string{subjects.AuditCheckpoints, subjects.AuditAction("hold", "worm"), subjects.AuditAction("drain", "worm"),
			subjects.AuditAccess(access.Auditor)}},
		{subjects.LegalHoldStream, []string{subjects.LegalHold("pharmacy", dlqID)}},
		{streams.DocumentsStream, []string{streams.DocumentManifestSubject(sha), streams.DocumentChunkSubject(sha, "worm", 0)}},
		{streams.RequestsStream, []string{streams.ApprovalRequestSubject("worm"), streams.DrainStartSubject("worm"), streams.DrainEndSubject("worm")}},
	}
	for _, b := range []string{subjects.IdempotencyBucket, subjects.AttemptsBucket, subjects.DrainsBucket, subjects.ApprovalsBucket, subjects.HoldsBucket} {
		targets = append(targets, struct {
			stream   string
			subjects []string
		}{subjects.BucketStream(b), []string{subjects.BucketKey(b, "worm-attack")}})
	}
	for _, tg := range targets {
		st, err := e.admin.Stream(ctx, tg.stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) && tg.stream == subjects.LegalHoldStream {
			continue // provisioned only when QUARANTINE has a max age
		}
		if err != nil {
			t.Fatal(err)
		}
		if c := st.CachedInfo().Config; !c.DenyDelete || !c.DenyPurge || c.AllowRollup {
			t.Errorf("%s: deny delete %t, deny purge %t, allow rollup %t", tg.stream, c.DenyDelete, c.DenyPurge, c.AllowRollup)
		}
		who := append([]string{string(access.RolePublisher)}, access.ServiceNames()[1:]...)
		rows := 0
		for _, person := range who {
			var allowed []string
			for _, s := range tg.subjects {
				if person == string(access.RolePublisher) && tg.stream == subjects.EventsStream && strings.HasPrefix(s, "events.") ||
					person != string(access.RolePublisher) && mayPublish(person, s) {
					allowed = append(allowed, s)
				}
			}
			if len(allowed) == 0 {
				continue
			}
			rows++
			t.Run(tg.stream+" as "+person, func(t *testing.T) {
				before := state(t, st)
				js, err := jetstream.New(e.conn(t, person))
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range allowed {
					for _, kind := range []string{jetstream.MsgRollupAll, jetstream.MsgRollupSubject} {
						m := nats.NewMsg(s)
						m.Header.Set(jetstream.MsgRollup, kind)
						m.Data = []byte(`{}`)
						_, err := js.PublishMsg(ctx, m)
						var apiErr *jetstream.APIError
						if !errors.As(err, &apiErr) || (apiErr.ErrorCode != errRollupNotPermitted && apiErr.ErrorCode != errMaxMsgsPerSubjectID) {
							t.Errorf("Nats-Rollup: %s on %s: %v, want refused by the stream (%d)", kind, s, err, errRollupNotPermitted)
						}
					}
				}
				erase(t, e.conn(t, person), tg.stream, before.first)
				if after := state(t, st); after.msgs < before.msgs || after.first != before.first {
					t.Errorf("%s held %d messages from %d, now %d from %d", tg.stream, before.msgs, before.first, after.msgs, after.first)
				}
			})
		}
		if tg.stream != subjects.LegalHoldStream && tg.stream != subjects.AdvisoriesStream && rows == 0 {
			t.Errorf("no identity of the default config may publish on %s's subjects %v: the rows test nothing", tg.stream, tg.subjects)
		}
		t.Run(tg.stream+" as the admin", func(t *testing.T) {
			before := state(t, st)
			erase(t, e.conn(t, access.Admin), tg.stream, before.first)
			if after := state(t, st); after.msgs < before.msgs || after.first != before.first {
				t.Errorf("%s held %d messages from %d, now %d from %d", tg.stream, before.msgs, before.first, after.msgs, after.first)
			}
		})
	}
	e.verified(t)
}

// streamState is what an erasure would change.
type streamState struct{ msgs, first uint64 }

func state(tb testing.TB, st jetstream.Stream) streamState {
	tb.Helper()
	in, err := st.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return streamState{in.State.Msgs, in.State.FirstSeq}
}

// erase asks, on nc, for a purge of stream, a purge of every subject and
// a delete of message seq, and fails the test unless each is refused (by
// the permissions: no reply or a permissions error; or by the server).
func erase(tb testing.TB, nc *nats.Conn, stream string, seq uint64) {
	tb.Helper()
	purgeAll, _ := json.Marshal(map[string]string{"filter": ">"})
	del, _ := json.Marshal(map[string]any{"seq": max(seq, 1), "no_erase": true})
	for _, a := range []struct {
		name, subject string
		body          []byte
	}{
		{"purge", "$JS.API.STREAM.PURGE." + stream, nil},
		{"purge of every subject", "$JS.API.STREAM.PURGE." + stream, purgeAll},
		{"message delete", "$JS.API.STREAM.MSG.DELETE." + stream, del},
	} {
		m, err := nc.Request(a.subject, a.body, time.Second)
		if err != nil {
			continue // refused by the permissions
		}
		var rep struct {
			Error *struct {
				ErrCode int `json:"err_code"`
			} `json:"error"`
		}
		if json.Unmarshal(m.Data, &rep) != nil || rep.Error == nil {
			tb.Errorf("%s of %s accepted: %s", a.name, stream, m.Data)
		}
	}
}

// TestSecondDocumentManifest (E2): as the validator (the one service that
// writes DOCUMENTS), a second manifest under a kept document's SHA-256,
// naming chunks of altered bytes, is refused by the server whatever its
// headers; audit.get still hands out the original bytes and verify
// passes.
func TestSecondDocumentManifest(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	sha, dlqID := e.wormDocument(t)
	original := e.originalOf(t, dlqID)
	js, err := jetstream.New(e.conn(t, access.Validator))
	if err != nil {
		t.Fatal(err)
	}
	altered := []byte(strings.Replace(string(original), "2", "9", 1))
	ack, err := js.Publish(ctx, streams.DocumentChunkSubject(sha, "forged", 0), altered)
	if err != nil {
		t.Fatalf("a chunk as the validator: %v", err)
	}
	forged, _ := json.Marshal(streams.DocumentManifest{Version: streams.DocumentManifestVersion, SHA256: sha, Size: int64(len(altered)),
		ChunkSize: streams.DocumentChunkSize, Upload: "forged", Chunks: [][2]uint64{{ack.Sequence, 1}}, Created: time.Now().UTC().Format(time.RFC3339)})
	for _, h := range []nats.Header{{}, {"Nats-Rollup": []string{"sub"}}, {"Nats-Expected-Last-Subject-Sequence": []string{"0"}}, {"Nats-Msg-Id": []string{"x"}}} {
		m := nats.NewMsg(streams.DocumentManifestSubject(sha))
		m.Data, m.Header = forged, h
		_, err := js.PublishMsg(ctx, m)
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) {
			t.Errorf("a second manifest with %v: %v, want refused by the stream", h, err)
		}
	}
	if got := e.originalOf(t, dlqID); string(got) != string(original) {
		t.Errorf("audit.get now hands out other bytes")
	}
	e.verified(t)
}
