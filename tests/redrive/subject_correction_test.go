package redrive

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// The people of the secured pipeline's two-person corrections.
var (
	corrOperator = access.DefaultPerson(access.RoleOperator)
	corrApprover = access.DefaultPerson(access.RoleApprover)
)

// securedEnv is env on a secured server (natstest.StartSecured): each
// service as its own user and each person through his role's account, so
// that a correction that changes the event's identity goes through a real
// second person (re-authenticating), as in production. The embedded env's
// connection is the administrator's.
type securedEnv struct {
	*env
	sec    *natstest.Secured
	people map[string]*nats.Conn
}

// newSecuredEnv starts the secured pipeline: a validator posting to the
// controllable downstream, a quarantiner and a redriver signing approvals
// with the deployment's key.
func newSecuredEnv(tb testing.TB) *securedEnv {
	tb.Helper()
	sec := natstest.StartSecured(tb, streams.DefaultOptions())
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	e := &securedEnv{env: &env{srv: sec.Server, nc: sec.ConnectAs(tb, access.Admin), down: newDownstream(tb), gate: g},
		sec: sec, people: map[string]*nats.Conn{}}
	if e.js, err = jetstream.New(e.nc); err != nil {
		tb.Fatal(err)
	}
	if e.kv, err = e.js.KeyValue(context.Background(), subjects.IdempotencyBucket); err != nil {
		tb.Fatal(err)
	}
	vcfg := validator.DefaultConfig()
	vcfg.Provision, vcfg.CreateConsumer = false, false
	vcfg.DownstreamURL, vcfg.DownstreamTimeout = e.down.URL, time.Second
	vcfg.MaxDeliver = 2
	vcfg.BackoffBase, vcfg.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	vcfg.AckWait, vcfg.ClaimLease = 2*time.Second, 2*time.Second
	qcfg := quarantiner.DefaultConfig()
	qcfg.Provision, qcfg.CreateConsumer = false, false
	qcfg.AckWait, qcfg.RetryDelay, qcfg.TerminatedGrace = 2*time.Second, 100*time.Millisecond, 200*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := stack.ProvisionConsumers(ctx, e.js, vcfg, qcfg); err != nil {
		tb.Fatal(err)
	}
	v, err := validator.New(sec.ConnectAs(tb, access.Validator), vcfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	natstest.Run(tb, "validator", v.Run)
	q, err := quarantiner.New(sec.ConnectAs(tb, access.Quarantiner), qcfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	natstest.Run(tb, "quarantiner", q.Run)
	rcfg := redriver.DefaultConfig()
	rcfg.Provision = false
	rcfg.OutcomeTimeout, rcfg.RedriveWait = 15*time.Second, 10*time.Second
	rcfg.PollMax, rcfg.DrainLease = 500*time.Millisecond, 2*time.Second
	rcfg.InstanceID = "redriver-correction-test"
	r, err := redriver.New(sec.ConnectAs(tb, access.Redriver), rcfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	natstest.Run(tb, "redriver", r.Run)
	for _, p := range []string{corrOperator, corrApprover} {
		e.people[p] = sec.ConnectAs(tb, p)
	}
	// Discovery through a person's account: the services answer only
	// requests that come through an import.
	natstest.WaitServing(tb, e.people[corrOperator], access.Validator, access.Quarantiner, access.Redriver)
	return e
}

// call sends v (JSON bytes as they are, anything else marshalled) to
// subject as user: the reply body, or the service's error.
func (e *securedEnv) call(tb testing.TB, user, subject string, v any) ([]byte, error) {
	tb.Helper()
	b, ok := v.([]byte)
	if !ok {
		b = marshal(tb, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	return endpoint.CallRaw(ctx, e.people[user], subject, b)
}

// ok calls subject as user and decodes its successful reply into out.
func (e *securedEnv) ok(tb testing.TB, user, subject string, v, out any) {
	tb.Helper()
	data, err := e.call(tb, user, subject, v)
	if err != nil {
		tb.Fatalf("%s as %s: %v", subject, user, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		tb.Fatalf("%s: reply %s: %v", subject, data, err)
	}
}

// redriveBody is a redrive request carrying payload byte for byte, as
// dlqctl redrive --payload sends it (json.Marshal of a json.RawMessage
// would compact it and escape '&', '<' and '>').
func redriveBody(tb testing.TB, req api.RedriveRequest, payload []byte) []byte {
	tb.Helper()
	req.Payload = nil
	b := marshal(tb, req)
	return slices.Concat([]byte(`{"payload":`), payload, []byte(","), b[1:])
}

// readJSON reads a test file of the schemas' examples.
func readJSON(tb testing.TB, path string) map[string]any {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		tb.Fatal(err)
	}
	return doc
}

// marshal is json.Marshal without HTML escaping: '&', '<' and '>' stay
// as the trade writes them.
func marshal(tb testing.TB, v any) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		tb.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// with returns a copy of doc with the members of set.
func with(doc map[string]any, set map[string]any) map[string]any {
	out := make(map[string]any, len(doc)+len(set))
	for k, v := range doc {
		out[k] = v
	}
	for k, v := range set {
		out[k] = v
	}
	return out
}

// misspelledShipping is the DSCSA pallet shipment of the examples (SSCCs,
// business transactions "PO-2026-11-0042&A<1>" and
// `INV-"Müller & Söhne"-7781`, a carrier "Müller & Söhne <Spedition> 陈伟
// Logistics") with its own eventID, as sent with the bizStep misspelled
// (EPCIS 1.2 URN "shiping") and as corrected.
func misspelledShipping(tb testing.TB, eventID string) (broken, fixed map[string]any) {
	tb.Helper()
	good := with(readJSON(tb, "../../schemas/testdata/dscsa/valid/shipping-pallets-sscc.json"), map[string]any{"eventID": eventID})
	return with(good, map[string]any{"bizStep": "urn:epcglobal:cbv:bizstep:shiping"}),
		with(good, map[string]any{"bizStep": "urn:epcglobal:cbv:bizstep:shipping"})
}

// epcisDocument is an EPCIS 2.0 JSON document of events, as a partner
// sends it.
func epcisDocument(events ...map[string]any) map[string]any {
	list := make([]any, len(events))
	for i, ev := range events {
		ev = with(ev, nil)
		delete(ev, "@context")
		list[i] = ev
	}
	return map[string]any{
		"@context":      []any{"https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld", map[string]any{"example": "https://ns.example.com/epcis/"}},
		"type":          "EPCISDocument",
		"schemaVersion": "2.0",
		"creationDate":  "2026-11-03T11:20:00Z",
		"epcisBody":     map[string]any{"eventList": list},
	}
}

// subjectCorrection is an event quarantined for a fault in what selects
// its subject, and its correction, which names another subject.
type subjectCorrection struct {
	name string
	// publish is what the publisher sent, on subject.
	subject string
	publish []byte
	// original is the quarantined event's payload (the event itself, or
	// the document's event), quarantined on source with code.
	original []byte
	source   string
	code     codes.Code
	// fixed is the correction, whose domain and event type name the
	// replay's subject.
	fixed           []byte
	domain, evType  string
	identityChanges []string
}

// subjectCorrections are the corrections of issue #39 (T10) in the three
// domains.
func subjectCorrections(tb testing.TB) []subjectCorrection {
	tb.Helper()
	var out []subjectCorrection

	// A shipment of a partner's document: its event with a misspelled
	// bizStep is read from the document on events.dscsa.other (it names
	// no business step) and refused INVALID_BIZSTEP.
	broken, fixed := misspelledShipping(tb, "urn:uuid:3f5d1c7e-0b8a-4c2e-9d41-6a0e5f7b2c11")
	doc := marshal(tb, epcisDocument(broken))
	var original []byte
	if _, err := document.Scan(doc, func(ev document.Event) error { original = ev.Data; return nil }); err != nil || original == nil {
		tb.Fatalf("the test document does not read: %v", err)
	}
	out = append(out, subjectCorrection{name: "dscsa event of a document, bizStep shiping corrected to shipping",
		subject: subjects.Event(dscsa.Name, subjects.DocumentType), publish: doc,
		original: original, source: subjects.Event(dscsa.Name, "other"), code: dscsa.InvalidBizStep,
		fixed: marshal(tb, fixed), domain: dscsa.Name, evType: "shipping",
		identityChanges: []string{approval.FieldEventType}})

	// The same mistake in an event published alone, on the subject its
	// sender derived from the misspelled field.
	broken, fixed = misspelledShipping(tb, "urn:uuid:8c2b4e90-5d17-4a3f-b6e2-0f9d3a1c7e58")
	b := marshal(tb, broken)
	out = append(out, subjectCorrection{name: "dscsa event alone on events.dscsa.shiping, bizStep corrected",
		subject: subjects.Event(dscsa.Name, "shiping"), publish: b,
		original: b, source: subjects.Event(dscsa.Name, "shiping"), code: dscsa.InvalidBizStep,
		fixed: marshal(tb, fixed), domain: dscsa.Name, evType: "shipping",
		identityChanges: []string{approval.FieldEventType}})

	// An FSMA shipment (shipped to a customer from its location) sent as
	// a receiving CTE: receiving requires the ship_from it lacks; the CTE
	// type is corrected to shipping.
	ship := with(readJSON(tb, "../../schemas/testdata/fsma/valid/shipping-gln.json"), map[string]any{
		"product_description":   `Romaine hearts "Müller & Söhne" <Bio> 陈伟 Farms, 3 count`,
		"traceability_lot_code": "00860001000030-RL250312-T10",
	})
	delete(ship, "ship_from")
	b = marshal(tb, with(ship, map[string]any{"cte_type": "receiving"}))
	out = append(out, subjectCorrection{name: "fsma receiving corrected to shipping",
		subject: subjects.Event(fsma.Name, "receiving"), publish: b,
		original: b, source: subjects.Event(fsma.Name, "receiving"), code: fsma.MissingKDE,
		fixed: marshal(tb, ship), domain: fsma.Name, evType: "shipping",
		identityChanges: []string{approval.FieldIdempotencyKey, approval.FieldEventType}})

	// A pharmacy receipt of 500 sent as a dispense: the sign is wrong for
	// a dispense; the event type is corrected to receive.
	rx := map[string]any{
		"transaction_id": "TX-T10-0001", "registrant_dea": "BW4829137", "ndc": "00406-0512-01",
		"drug_name": `Oxycodone & APAP <5/325> "Percocet" — Müller & Söhne 陈伟`,
		"lot":       "LOT-T10-0001", "expiry": "2026-09-30", "quantity_delta": "500", "unit": "EA",
		"event_type": "dispense", "dea_schedule": "II", "occurred_at": "2025-03-14T15:42:10Z", "actor_id": "RPH-0412",
	}
	b = marshal(tb, rx)
	out = append(out, subjectCorrection{name: "pharmacy dispense corrected to receive",
		subject: subjects.Event(pharmacy.Name, "dispense"), publish: b,
		original: b, source: subjects.Event(pharmacy.Name, "dispense"), code: pharmacy.QuantitySignMismatch,
		fixed: marshal(tb, with(rx, map[string]any{"event_type": "receive"})), domain: pharmacy.Name, evType: "receive",
		identityChanges: []string{approval.FieldEventType}})
	return out
}

// TestCorrectionReplaysOnItsSubject (issue #39, T10): an event quarantined
// for what selects its subject (a misspelled DSCSA bizStep, of a
// document's event or of one published alone, an FSMA CTE type, a
// pharmacy event type) and corrected: the check of the original's subject
// answers SUBJECT_MISMATCH (what the console asked); the redriver's dry
// run checks it on the subject the correction names, accepts it and says
// it needs a second person (its event type changes) without writing
// anything; the redrive as dlqctl sends it (redrive --payload) is
// answered APPROVAL_REQUIRED, and once approved the chain records the
// signature, the correction and its replay, published on the corrected
// subject, and the event is committed once.
func TestCorrectionReplaysOnItsSubject(t *testing.T) {
	e := newSecuredEnv(t)
	for _, tc := range subjectCorrections(t) {
		t.Run(tc.name, func(t *testing.T) {
			e.publish(t, event{subject: tc.subject, data: tc.publish})
			id := record.PayloadDLQID(tc.domain, tc.source, tc.original)
			e.waitState(t, id, func(st record.State) bool { return st.Class == record.ClassValidation }, "validation")
			recs, st, err := e.chain(t, id)
			if err != nil || recs[0].ErrorCode != tc.code || st.SourceSubject != tc.source {
				t.Fatalf("quarantined %s on %s (%v), want %s on %s", recs[0].ErrorCode, st.SourceSubject, err, tc.code, tc.source)
			}
			// What the console checked: the original's subject.
			if _, err := e.gate.Check(tc.source, tc.fixed); codes.Of(err) != codes.SubjectMismatch {
				t.Fatalf("the correction on the original's subject: %v, want %s", err, codes.SubjectMismatch)
			}
			const reason = `bizStep, CTE or event type as on the partner's ASN "ASN-7781" <Müller & Söhne>, 陈伟`
			want := api.RedriveCheck{Subject: subjects.Event(tc.domain, tc.evType), Domain: tc.domain, EventType: tc.evType,
				OK: true, ApprovalRequired: true, IdentityChanges: tc.identityChanges}
			_, want.OriginalEventType, _ = subjects.ParseEvent(tc.source)
			var dry api.RedriveReply
			began := time.Now()
			e.ok(t, corrOperator, api.Redrive, redriveBody(t, api.RedriveRequest{DLQID: id, Reason: reason, DryRun: true}, tc.fixed), &dry)
			t.Logf("dry run answered in %s", time.Since(began).Round(100*time.Microsecond))
			if c := dry.Check; c == nil || c.Subject != want.Subject || c.Domain != want.Domain || c.EventType != want.EventType ||
				c.OriginalEventType != want.OriginalEventType || !c.OK || c.Code != "" || !c.ApprovalRequired || len(c.ApprovalReasons) == 0 ||
				!slices.Equal(c.IdentityChanges, want.IdentityChanges) || dry.Outcome != "" || dry.Status != string(record.StatusOpen) {
				t.Fatalf("dry run %+v check %+v, want %+v", dry, dry.Check, want)
			}
			if recs, _, _ := e.chain(t, id); len(recs) != 1 {
				t.Fatalf("the dry run changed the chain: %d records", len(recs))
			}

			// As dlqctl redrive --payload sends it.
			_, err = e.call(t, corrOperator, api.Redrive, redriveBody(t, api.RedriveRequest{DLQID: id, Reason: reason}, tc.fixed))
			ae := api.AsError(err)
			if ae == nil || ae.Code != api.ErrApprovalRequired || ae.Approval == nil || !slices.Contains(ae.Approval.DiffFields, approval.FieldEventType) {
				t.Fatalf("redrive with the correction: %v, want %s naming %s", err, api.ErrApprovalRequired, approval.FieldEventType)
			}
			var signed api.ApprovalReply
			defer func(began time.Time) {
				t.Logf("approval.approve (signature checked, correction, replay committed) answered in %s", time.Since(began).Round(time.Millisecond))
			}(time.Now())
			// The approver signs with a key of their own (registered in AUDIT).
			signer := approvaltest.Register(t, e.js, corrApprover, access.RoleApprover)
			e.ok(t, corrApprover, api.ApprovalApprove, signer.ApproveRequest(t, e.js, ae.Approval.ID, "checked against the shipment's ASN", time.Now()), &signed)
			if signed.Approval.Status != api.ApprovalExecuted || signed.Approval.Outcome != api.OutcomeReplayed {
				t.Fatalf("approved %+v", signed.Approval)
			}

			e.waitState(t, id, func(st record.State) bool { return st.Status == record.StatusResolved }, "resolved")
			recs, _, err = e.chain(t, id)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []record.Kind
			for _, r := range recs {
				kinds = append(kinds, r.Kind)
			}
			wantKinds := []record.Kind{record.KindQuarantined, record.KindApproved, record.KindCorrected, record.KindRedriveRequested, record.KindReplayed}
			if !slices.Equal(kinds, wantKinds) {
				t.Fatalf("chain %v, want %v", kinds, wantKinds)
			}
			if p, _ := recs[2].Payload.Bytes(); !bytes.Equal(p, tc.fixed) || recs[2].Actor != corrOperator || recs[2].Reason != reason {
				t.Errorf("corrected record by %s (%q), payload equal %v", recs[2].Actor, recs[2].Reason, bytes.Equal(p, tc.fixed))
			}
			replayed := recs[4]
			es, err := e.js.Stream(context.Background(), subjects.EventsStream)
			if err != nil {
				t.Fatal(err)
			}
			m, err := es.GetMsg(context.Background(), replayed.SourceSeq)
			if err != nil || replayed.SourceStream != subjects.EventsStream {
				t.Fatalf("replayed record at %s %d: %v", replayed.SourceStream, replayed.SourceSeq, err)
			}
			if wantSubj := subjects.Redriven(tc.domain, tc.evType, id, 1); m.Subject != wantSubj || !bytes.Equal(m.Data, tc.fixed) {
				t.Errorf("replay on %s (payload equal %v), want %s", m.Subject, bytes.Equal(m.Data, tc.fixed), wantSubj)
			}
			env, err := e.gate.Check(subjects.Event(tc.domain, tc.evType), tc.fixed)
			if err != nil {
				t.Fatal(err)
			}
			e.committedOnce(t, []event{{subject: subjects.Event(tc.domain, tc.evType), data: tc.fixed, key: env.IdempotencyKey, dlq: id}})
		})
	}
}

// TestCorrectionDryRun: a redrive's dry run answers the subject the
// replay would be checked on, the gate's verdict there and whether a
// second person would be needed, for corrections right and wrong, and
// refuses what the redrive would refuse; no dry run writes a record or
// publishes a replay.
func TestCorrectionDryRun(t *testing.T) {
	e := newEnv(t)
	e.startRedriver(t, redriverConfig())
	broken, fixed := misspelledShipping(t, "urn:uuid:c41e7a93-6f20-4b8d-a5e1-2d9f0b7c3e64")
	shipment := marshal(t, broken)
	e.publish(t, event{subject: subjects.Event(dscsa.Name, "shiping"), data: shipment})
	ship := record.PayloadDLQID(dscsa.Name, subjects.Event(dscsa.Name, "shiping"), shipment)
	rx := map[string]any{
		"transaction_id": "TX-T10-DRY", "registrant_dea": "BW4829137", "ndc": "00406-0512-01",
		"drug_name": `Hydrocodone & APAP <10/325> "Norco" — Apotheke Müller & Söhne 陈伟`,
		"lot":       "LOT-T10-DRY", "expiry": "2026-09-30", "quantity_delta": "-30", "unit": "EA",
		"event_type": "dispense", "dea_schedule": "2", "occurred_at": "2025-03-14T15:42:10Z", "actor_id": "RPH-0412",
	}
	dispense := marshal(t, rx)
	e.publish(t, event{subject: subjects.Event(pharmacy.Name, "dispense"), data: dispense})
	rxID := record.PayloadDLQID(pharmacy.Name, subjects.Event(pharmacy.Name, "dispense"), dispense)
	for _, id := range []string{ship, rxID} {
		e.waitState(t, id, func(st record.State) bool { return st.Class == record.ClassValidation }, "validation")
	}
	badSSCC := with(fixed, map[string]any{"epcList": []any{"https://id.gs1.org/00/303040940000098717"}})
	const reason = `per the ASN of "Müller & Söhne" <Spedition> & 陈伟`
	for _, tc := range []struct {
		name    string
		id      string
		req     api.RedriveRequest
		payload []byte
		// noReason sends the correction without its reason.
		noReason bool
		code     string // the request's error code, or ""
		want     api.RedriveCheck
	}{
		{name: "bizStep corrected", id: ship, payload: marshal(t, fixed),
			want: api.RedriveCheck{Subject: "events.dscsa.shipping", EventType: "shipping", OK: true, ApprovalRequired: true,
				IdentityChanges: []string{approval.FieldEventType}}},
		{name: "bizStep corrected as a GS1 web URI", id: ship, payload: marshal(t, with(fixed, map[string]any{"bizStep": "https://ref.gs1.org/cbv/BizStep-shipping"})),
			want: api.RedriveCheck{Subject: "events.dscsa.shipping", EventType: "shipping", OK: true, ApprovalRequired: true,
				IdentityChanges: []string{approval.FieldEventType}}},
		{name: "bizStep still misspelled", id: ship, payload: marshal(t, with(broken, map[string]any{"example:carrier": "Spedition <Nord> & Co"})),
			want: api.RedriveCheck{Subject: "events.dscsa.shiping", EventType: "shiping", Code: string(dscsa.InvalidBizStep)}},
		{name: "bizStep corrected, an SSCC's check digit wrong", id: ship, payload: marshal(t, badSSCC),
			want: api.RedriveCheck{Subject: "events.dscsa.shipping", EventType: "shipping", Code: string(dscsa.InvalidEPC), ApprovalRequired: true,
				IdentityChanges: []string{approval.FieldOrderingKey, approval.FieldEventType}}},
		// A Schedule II correction: a second person under the default
		// policy (issue #40), though the identity stays.
		{name: "pharmacy schedule corrected, same subject and identity", id: rxID, payload: marshal(t, with(rx, map[string]any{"dea_schedule": "II"})),
			want: api.RedriveCheck{Subject: "events.pharmacy.dispense", EventType: "dispense", OK: true, ApprovalRequired: true}},
		{name: "pharmacy original with include_validation", id: rxID, req: api.RedriveRequest{IncludeValidation: true},
			want: api.RedriveCheck{Subject: "events.pharmacy.dispense", EventType: "dispense", Code: string(pharmacy.InvalidDEASchedule)}},
		{name: "pharmacy original, validation class", id: rxID, code: api.ErrNotRedrivable},
		{name: "no reason", id: ship, payload: marshal(t, fixed), noReason: true, code: api.ErrBadRequest},
		{name: "payload no object", id: ship, payload: []byte(`["urn:epcglobal:cbv:bizstep:shipping"]`), code: api.ErrBadRequest},
		{name: "unknown chain", id: "dscsa_0123456789abcdef0123456789abcdef", payload: marshal(t, fixed), code: api.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.DLQID, req.DryRun = tc.id, true
			if !tc.noReason && tc.payload != nil {
				req.Reason = reason
			}
			body := marshal(t, req)
			if tc.payload != nil {
				body = redriveBody(t, req, tc.payload)
			}
			data, code := e.request(t, api.Redrive, body)
			if code != tc.code {
				t.Fatalf("code %q (%s), want %q", code, data, tc.code)
			}
			if tc.code != "" {
				return
			}
			var rep api.RedriveReply
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			c := rep.Check
			orig := map[string]string{ship: "shiping", rxID: "dispense"}[tc.id]
			if c == nil || c.Subject != tc.want.Subject || c.EventType != tc.want.EventType || c.OriginalEventType != orig || c.OK != tc.want.OK ||
				c.Code != tc.want.Code || (c.Code != "") == (c.Detail == "") || c.ApprovalRequired != tc.want.ApprovalRequired ||
				!slices.Equal(c.IdentityChanges, tc.want.IdentityChanges) || rep.Outcome != "" || rep.Status != string(record.StatusOpen) {
				t.Fatalf("dry run %+v check %+v, want %+v", rep, c, tc.want)
			}
		})
	}
	for _, id := range []string{ship, rxID} {
		if recs, _, err := e.chain(t, id); err != nil || len(recs) != 1 {
			t.Errorf("%s: dry runs left %d records (%v), want 1", id, len(recs), err)
		}
	}
	es, err := e.js.Stream(context.Background(), subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := es.Info(context.Background(), jetstream.WithSubjectFilter(subjects.RedrivenAll))
	if err != nil || len(info.State.Subjects) != 0 {
		t.Errorf("replays published by dry runs: %v (%v)", info.State.Subjects, err)
	}

	t.Run("resolved", func(t *testing.T) {
		e.identityCorrections(t)
		var rep api.RedriveReply
		e.requestJSON(t, api.Redrive, api.RedriveRequest{DLQID: rxID, Payload: marshal(t, with(rx, map[string]any{"dea_schedule": "II"})), Reason: reason}, &rep)
		if rep.Outcome != api.OutcomeReplayed {
			t.Fatalf("redrive %+v", rep)
		}
		data, code := e.request(t, api.Redrive, redriveBody(t, api.RedriveRequest{DLQID: rxID, Reason: reason, DryRun: true}, dispense))
		if code != api.ErrNotRedrivable {
			t.Fatalf("dry run of a resolved event: %q %s, want %s", code, data, api.ErrNotRedrivable)
		}
	})
}
