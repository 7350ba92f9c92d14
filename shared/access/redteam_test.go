package access_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// attack is one row of the red-team table: something a user sends to the
// bus that must be refused by the server's permissions, for every user of
// the default configuration but those in allowed.
type attack struct {
	// id names the finding of the trust-boundary issue it belongs to
	// (H1...H15) or the variant it tries.
	id, name string
	// publish is the subject to publish a request on (with body), or
	// subscribe the subject to subscribe to.
	publish, subscribe string
	body               any
	header             nats.Header
	// allowed are the users whose permissions let this through (their
	// refusal, if any, comes from elsewhere and is tested elsewhere).
	allowed []string
}

// protected are every stream and bucket stream deadletter provisions.
var protected = []string{
	subjects.ReplaysStream, subjects.EventsStream, subjects.LedgerStream, subjects.FailuresStream, subjects.AdvisoriesStream,
	subjects.QuarantineStream, subjects.AuditStream, subjects.LegalHoldStream,
	"KV_" + subjects.IdempotencyBucket, "KV_" + subjects.AttemptsBucket, "KV_" + subjects.DrainsBucket,
	"KV_" + subjects.ApprovalsBucket, "KV_" + subjects.HoldsBucket,
}

// deliveryTargets are subjects a push consumer, a snapshot or a mirror
// could be aimed at to make the server deliver stored messages there: every
// service endpoint, the stream subjects, and a service's inbox.
func deliveryTargets() []string {
	out := []string{api.QuarantinerAppend, "validator.check.pharmacy.dispense", subjects.AuditCheckpoints,
		"quarantine.pharmacy.forged", "ledger.pharmacy.forged", "dlq.intake.pharmacy", "_INBOX.quarantiner.x"}
	out = append(out, access.RedriverEndpoints()...)
	return append(out, access.AuditorEndpoints()...)
}

// attacks returns the table. A new attack is one row.
func attacks() []attack {
	var rows []attack
	add := func(a attack) { rows = append(rows, a) }
	for _, stream := range protected {
		for _, target := range deliveryTargets() {
			cfg := map[string]any{"stream_name": stream, "config": map[string]any{
				"name": "evil", "deliver_subject": target, "ack_policy": "none", "max_deliver": 1,
			}}
			add(attack{id: "H1/H2/H8", name: "push consumer on " + stream + " delivering to " + target,
				publish: "$JS.API.CONSUMER.CREATE." + stream + ".evil", body: cfg})
		}
		add(attack{id: "H4", name: "legacy create on " + stream + " named validator",
			publish: "$JS.API.CONSUMER.CREATE." + stream,
			body:    map[string]any{"stream_name": stream, "config": map[string]any{"name": subjects.ValidatorConsumer, "filter_subject": "events.none"}}})
		add(attack{id: "H4", name: "durable create on " + stream,
			publish: "$JS.API.CONSUMER.DURABLE.CREATE." + stream + "." + subjects.ValidatorConsumer,
			body:    map[string]any{"stream_name": stream, "config": map[string]any{"durable_name": subjects.ValidatorConsumer}}})
		add(attack{id: "H6", name: "own consumer on " + stream + " with a filter",
			publish: "$JS.API.CONSUMER.CREATE." + stream + ".mine.events.pharmacy.dispense",
			body:    map[string]any{"stream_name": stream, "config": map[string]any{"name": "mine", "max_deliver": 1}}})
		for _, op := range []string{"UPDATE", "DELETE", "PURGE", "MSG.DELETE", "CREATE", "RESTORE"} {
			add(attack{id: "H5", name: op + " " + stream, publish: "$JS.API.STREAM." + op + "." + stream,
				body: map[string]any{"name": stream, "seq": 1}})
		}
		add(attack{id: "H5", name: "snapshot of " + stream + " to the quarantiner",
			publish: "$JS.API.STREAM.SNAPSHOT." + stream, body: map[string]any{"deliver_subject": api.QuarantinerAppend}})
		add(attack{id: "H11", name: "direct get on " + stream, publish: "$JS.API.DIRECT.GET." + stream,
			body: map[string]any{"seq": 1}, allowed: readersOf(stream)})
		add(attack{id: "H11", name: "message get on " + stream, publish: "$JS.API.STREAM.MSG.GET." + stream,
			body: map[string]any{"seq": 1}, allowed: readersOf(stream)})
	}
	for _, c := range []struct{ stream, name string }{
		{subjects.EventsStream, subjects.ValidatorConsumer},
		{subjects.FailuresStream, subjects.FailuresConsumer},
		{subjects.AdvisoriesStream, subjects.AdvisoriesConsumer},
	} {
		sc := c.stream + "." + c.name
		owner := access.Validator
		if c.stream != subjects.EventsStream {
			owner = access.Quarantiner
		}
		for _, op := range []string{"DELETE", "PAUSE", "RESET"} {
			add(attack{id: "H4", name: op + " consumer " + sc, publish: "$JS.API.CONSUMER." + op + "." + sc, body: map[string]any{}})
		}
		add(attack{id: "H4", name: "pull from " + sc, publish: "$JS.API.CONSUMER.MSG.NEXT." + sc,
			body: map[string]any{"batch": 1, "no_wait": true}, allowed: []string{owner}})
		add(attack{id: "H4", name: "forged ack on " + sc, publish: "$JS.ACK." + sc + ".1.1.1.1.0", allowed: []string{owner}})
		add(attack{id: "H4", name: "forged v2 ack on " + sc, publish: "$JS.ACK.dom.hash." + sc + ".1.1.1.1.0.tok", allowed: []string{owner}})
	}
	for _, b := range []string{subjects.IdempotencyBucket, subjects.AttemptsBucket, subjects.DrainsBucket, subjects.ApprovalsBucket, subjects.HoldsBucket} {
		add(attack{id: "H5", name: "write to bucket " + b, publish: "$KV." + b + ".pharmacy_forged", body: "forged",
			allowed: writersOfBucket(b)})
	}
	// I4 (issue #28): the redriver, the approval owner, alone writes
	// APPROVALS and an approval's AUDIT actions; the auditor asks it for a
	// hold lift's pending approval.
	add(attack{id: "I4", name: "approved entry in APPROVALS", publish: "$KV." + subjects.ApprovalsBucket + ".appr-20260101T000000-forged",
		body:    map[string]any{"id": "appr-20260101T000000-forged", "status": "approved", "requester": "operator", "decider": "approver"},
		allowed: []string{access.Redriver}})
	add(attack{id: "I4", name: "forged approval AUDIT action", publish: subjects.AuditAction("approval", "appr-20260101T000000-forged"),
		body: map[string]any{"action": "approved", "object": "approval", "actor": "approver"}, allowed: []string{access.Redriver}})
	add(attack{id: "I4", name: "hold lift approval request", publish: api.ApprovalHoldLift,
		body: map[string]any{"hold_id": "hold-x", "requester": "operator", "requester_role": "operator"}, allowed: []string{access.Auditor}})
	// E5/E6 (issue #38): a person's registry record (roles, enabled
	// state, decision keys) is what every signed decision is checked
	// against; only the server applying the people file writes it, as
	// the admin. No service, even the redriver that writes AUDIT's other
	// actions, and no person may add a key or a role there.
	for _, person := range []string{"chen.wei", "amara.okafor", "陈伟"} {
		add(attack{id: "E5", name: "forged registry record of " + person, publish: subjects.AuditAction("people", person),
			body: map[string]any{"action": "key added", "object": "people", "object_id": person, "actor": "mallory",
				"detail": map[string]any{"person": person, "roles": []string{"approver"}, "keys": []map[string]any{{"scheme": "ed25519", "id": "mallory"}}}}})
	}
	add(attack{id: "H5", name: "create a stream", publish: "$JS.API.STREAM.CREATE.EVIL",
		body: map[string]any{"name": "EVIL", "subjects": []string{"evil.>"}}})
	add(attack{id: "H5", name: "create a stream mirroring QUARANTINE", publish: "$JS.API.STREAM.CREATE.MIRROR",
		body: map[string]any{"name": "MIRROR", "mirror": map[string]any{"name": subjects.QuarantineStream}}})
	add(attack{id: "H5", name: "create a stream sourcing into audit.checkpoints", publish: "$JS.API.STREAM.CREATE.SRC",
		body: map[string]any{"name": "SRC", "subjects": []string{subjects.AuditCheckpoints},
			"sources": []map[string]any{{"name": subjects.EventsStream}}}})
	add(attack{id: "H5", name: "account info", publish: "$JS.API.INFO"})
	add(attack{id: "H5", name: "stream list", publish: "$JS.API.STREAM.LIST"})
	add(attack{id: "H1", name: "forged lifecycle record", publish: api.QuarantinerAppend,
		body: map[string]any{"dlq_id": "x", "domain": "pharmacy", "kind": "resolved", "actor": "mallory"}, allowed: []string{access.Redriver}})
	add(attack{id: "H1", name: "forged hold record", publish: api.QuarantinerHold,
		body: map[string]any{"dlq_id": "x", "domain": "pharmacy", "kind": "hold_lifted", "actor": "mallory"}, allowed: []string{access.Auditor}})
	add(attack{id: "H1", name: "forged legal-hold copy", publish: subjects.LegalHold("pharmacy", "forged"), body: map[string]any{"kind": "quarantined"},
		allowed: []string{access.Auditor}})
	add(attack{id: "H1", name: "forged quarantine record", publish: "quarantine.pharmacy.forged", body: map[string]any{"kind": "quarantined"},
		allowed: []string{access.Quarantiner}})
	add(attack{id: "H8", name: "forged checkpoint", publish: subjects.AuditCheckpoints, body: map[string]any{"count": 0},
		allowed: []string{access.Auditor}})
	add(attack{id: "H3", name: "forged replay", publish: "replay.pharmacy.dispense", body: "{\"broken\":",
		header: nats.Header{"Deadletter-Dlq-Id": []string{"x"}, "Deadletter-Redrive-Count": []string{"9"}}, allowed: []string{access.Redriver}})
	add(attack{id: "H3", name: "forged direct replay", publish: subjects.Redriven("pharmacy", "dispense", "pharmacy_victim", 9), body: "{\"broken\":",
		header: nats.Header{"Deadletter-Dlq-Id": []string{"pharmacy_victim"}, "Deadletter-Redrive-Count": []string{"9"}}, allowed: []string{access.Redriver}})
	add(attack{id: "H1", name: "forged commit", publish: "ledger.pharmacy.forged", body: "{}", allowed: []string{access.Validator}})
	add(attack{id: "H1", name: "forged failure", publish: "dlq.intake.pharmacy", body: "{}", allowed: []string{access.Validator}})
	for _, s := range []string{"_INBOX.>", ">", "_R_.>", "$JS.>", "events.>", subjects.RedrivenAll, subjects.ReplaysAll, "quarantine.>", "$KV.>", api.QuarantinerAppend} {
		add(attack{id: "H10", name: "listen on " + s, subscribe: s, allowed: listenersOf(s)})
	}
	return rows
}

// readersOf are the service users that read a stream.
func readersOf(stream string) []string {
	var out []string
	for _, s := range access.Specs() {
		if slices.Contains(s.Publish.Allow, "$JS.API.DIRECT.GET."+stream) {
			out = append(out, s.Name)
		}
	}
	return out
}

// writersOfBucket are the service users that write a bucket.
func writersOfBucket(b string) []string {
	var out []string
	for _, s := range access.Specs() {
		if slices.Contains(s.Publish.Allow, "$KV."+b+".>") {
			out = append(out, s.Name)
		}
	}
	return out
}

// listenersOf are the service users whose subscribe allow-list holds s.
func listenersOf(s string) []string {
	var out []string
	for _, sp := range access.Specs() {
		if slices.Contains(sp.Subscribe.Allow, s) {
			out = append(out, sp.Name)
		}
	}
	return out
}

// TestRedTeam runs every attack of the table as every user of the default
// configuration (the admin is break-glass and is not among them) and
// checks that the server refused it by permissions, and that afterwards
// every stream, bucket and consumer is as it was.
func TestRedTeam(t *testing.T) {
	e := startEnv(t, 3)
	ctx := testCtx(t, 5*time.Minute)
	if err := provisionConsumers(ctx, e.admin); err != nil {
		t.Fatal(err)
	}
	before := storeState(t, e.admin)
	rows := attacks()
	matrix := map[string]map[string]string{}
	for _, user := range users() {
		if user == access.Admin {
			continue
		}
		t.Run(user, func(t *testing.T) {
			v := newViolations()
			nc := e.conn(t, user, v)
			for _, a := range rows {
				if slices.Contains(a.allowed, user) {
					continue
				}
				v.reset()
				if a.subscribe != "" {
					sub, err := nc.SubscribeSync(a.subscribe)
					if err == nil {
						_ = nc.Flush()
						defer sub.Unsubscribe()
					}
					if !v.wait(fmt.Sprintf("subscription to %q", a.subscribe)) {
						t.Errorf("%s %s: subscribing was not refused", a.id, a.name)
						continue
					}
				} else {
					m := nats.NewMsg(a.publish)
					m.Header = a.header
					m.Data = body(t, a.body)
					m.Reply = nc.NewRespInbox()
					if err := nc.PublishMsg(m); err != nil {
						t.Fatalf("%s %s: %v", a.id, a.name, err)
					}
					if !v.wait(fmt.Sprintf("publish to %q", a.publish)) {
						t.Errorf("%s %s: publishing was not refused", a.id, a.name)
						continue
					}
				}
				row := matrix[a.id+" "+a.name]
				if row == nil {
					row = map[string]string{}
					matrix[a.id+" "+a.name] = row
				}
				row[user] = "permissions"
			}
		})
	}
	if after := storeState(t, e.admin); after != before {
		t.Errorf("the store changed under attack:\nbefore %s\nafter  %s", before, after)
	}
	t.Logf("%d attacks × %d users refused by permissions; store unchanged", len(rows), len(users())-1)
}

// TestNoCredentialsRefused checks that a connection without credentials is
// refused: there is no no_auth_user.
func TestNoCredentialsRefused(t *testing.T) {
	e := startEnv(t, 0)
	_, err := nats.Connect(e.srv.ClientURL())
	if !errors.Is(err, nats.ErrAuthorization) && (err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization")) {
		t.Fatalf("connect without credentials: %v, want an authorization violation", err)
	}
}

func body(tb testing.TB, v any) []byte {
	switch b := v.(type) {
	case nil:
		return nil
	case string:
		return []byte(b)
	default:
		out, err := json.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		return out
	}
}

// provisionConsumers creates the services' durable consumers with their
// default settings, as the admin's provisioning does.
func provisionConsumers(ctx context.Context, js jetstream.JetStream) error {
	for _, c := range []struct {
		stream string
		cfg    jetstream.ConsumerConfig
	}{
		{subjects.EventsStream, jetstream.ConsumerConfig{Durable: subjects.ValidatorConsumer, AckPolicy: jetstream.AckExplicitPolicy}},
		{subjects.FailuresStream, jetstream.ConsumerConfig{Durable: subjects.FailuresConsumer, AckPolicy: jetstream.AckExplicitPolicy}},
		{subjects.AdvisoriesStream, jetstream.ConsumerConfig{Durable: subjects.AdvisoriesConsumer, AckPolicy: jetstream.AckExplicitPolicy}},
	} {
		if err := streams.EnsureConsumer(ctx, js, c.stream, c.cfg); err != nil {
			return err
		}
	}
	return nil
}

// storeState describes every stream (its state, configuration, consumers)
// and the list of streams, as the admin sees them.
func storeState(tb testing.TB, js jetstream.JetStream) string {
	tb.Helper()
	ctx := testCtx(tb, 10*time.Second)
	var b strings.Builder
	names := js.StreamNames(ctx)
	var all []string
	for n := range names.Name() {
		all = append(all, n)
	}
	if err := names.Err(); err != nil {
		tb.Fatal(err)
	}
	slices.Sort(all)
	for _, n := range all {
		s, err := js.Stream(ctx, n)
		if err != nil {
			tb.Fatal(err)
		}
		in := s.CachedInfo()
		cfg, _ := json.Marshal(in.Config)
		fmt.Fprintf(&b, "%s msgs=%d first=%d last=%d deleted=%d consumers=%d cfg=%x;", n, in.State.Msgs,
			in.State.FirstSeq, in.State.LastSeq, in.State.NumDeleted, in.State.Consumers, sha256.Sum256(cfg))
		cl := s.ListConsumers(ctx)
		for c := range cl.Info() {
			fmt.Fprintf(&b, " %s(delivered=%d,acked=%d)", c.Name, c.Delivered.Stream, c.AckFloor.Stream)
		}
	}
	return b.String()
}
