package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// shipment is a DSCSA shipping ObjectEvent with the given eventID, as a
// trading partner sends it in JSON: compact IRIs, its eventTime in its own
// offset, a quantity, an extension.
func shipment(eventID string) []byte {
	return fmt.Appendf(nil, `{"@context":["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld",{"example":"https://ns.example.com/epcis/"}],`+
		`"type":"ObjectEvent","eventID":%q,"eventTime":"2024-03-12T09:15:00-05:00","eventTimeZoneOffset":"-05:00",`+
		`"epcList":["urn:epc:id:sgtin:0614141.012345.10016550749981","urn:epc:id:sgtin:0614141.012345.10016550749982"],`+
		`"action":"OBSERVE","bizStep":"cbv:BizStep-shipping","disposition":"cbv:Disp-in_transit",`+
		`"readPoint":{"id":"urn:epc:id:sgln:0614141.00777.0"},`+
		`"bizTransactionList":[{"type":"po","bizTransaction":"urn:epcglobal:cbv:bt:0860001234565:PO-778120"},`+
		`{"type":"desadv","bizTransaction":"urn:epcglobal:cbv:bt:0614141000005:ASN-20240312-0042"}],`+
		`"sourceList":[{"type":"owning_party","source":"urn:epc:id:pgln:0614141.00000"}],`+
		`"quantityList":[{"epcClass":"urn:epc:class:lgtin:0614141.012345.A24B017","quantity":2,"uom":"EA"}],`+
		`"example:shipper":"Müller & Söhne <Großhandel>"}`, eventID)
}

// shipmentXML is the same event in an EPCIS 2.0 XML document: CBV bare
// words, its lists in another order, its eventTime in UTC, a recordTime
// and another prefix for the extension's namespace.
func shipmentXML(eventID string) []byte {
	return fmt.Appendf(nil, `<?xml version="1.0" encoding="UTF-8"?>
<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:2" xmlns:ex="https://ns.example.com/epcis/" schemaVersion="2.0" creationDate="2024-03-12T14:20:00Z">
  <EPCISBody><EventList>
    <ObjectEvent>
      <eventTime>2024-03-12T14:15:00.000Z</eventTime>
      <recordTime>2024-03-13T08:00:00Z</recordTime>
      <eventTimeZoneOffset>-05:00</eventTimeZoneOffset>
      <eventID>%s</eventID>
      <epcList><epc>urn:epc:id:sgtin:0614141.012345.10016550749982</epc><epc>urn:epc:id:sgtin:0614141.012345.10016550749981</epc></epcList>
      <action>OBSERVE</action>
      <bizStep>shipping</bizStep>
      <disposition>in_transit</disposition>
      <readPoint><id>urn:epc:id:sgln:0614141.00777.0</id></readPoint>
      <bizTransactionList><bizTransaction type="desadv">urn:epcglobal:cbv:bt:0614141000005:ASN-20240312-0042</bizTransaction><bizTransaction type="po">urn:epcglobal:cbv:bt:0860001234565:PO-778120</bizTransaction></bizTransactionList>
      <sourceList><source type="owning_party">urn:epc:id:pgln:0614141.00000</source></sourceList>
      <quantityList><quantityElement><epcClass>urn:epc:class:lgtin:0614141.012345.A24B017</epcClass><quantity>2</quantity><uom>EA</uom></quantityElement></quantityList>
      <ex:shipper>Müller &amp; Söhne &lt;Großhandel&gt;</ex:shipper>
    </ObjectEvent>
  </EventList></EPCISBody>
</epcis:EPCISDocument>`, eventID)
}

// TestContentIdentityDSCSA: DSCSA's content rule follows the CBV 2.0
// event hash ID and the event's exact content end to end. An event whose
// eventID is committed is a duplicate when its event hash ID and its exact
// content are the committed one's (the same event as an EPCIS 2.0 XML
// document; its lists reordered, CBV URNs, its eventTime in UTC, a
// recordTime; a quantity 2.0 for 2) and an IDEMPOTENCY_CONFLICT when a
// hashed field differs (bizStep, quantity) or a value the hash does not
// see (E10: a quantity 9007199254740993 for 9007199254740992, or
// 2.0000000000000001 for 2; an extension's text as {"#text"}). Keys
// committed before (a LEDGER entry and key state carrying the RFC 8785
// hash and no identity; or the event hash ID alone, identity
// cbv2-event-hash, as computed then) keep their meaning: the same event is
// still a duplicate, other content still a conflict, and their entries
// still sourced. Reconciliation accounts for every event, and every LEDGER
// entry is sourced.
func TestContentIdentityDSCSA(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	const dom = dscsa.Name
	shipping := subjects.Event(dom, "shipping")
	keyOf := func(data []byte) string {
		t.Helper()
		env, err := g.Check(shipping, data)
		if err != nil {
			t.Fatal(err)
		}
		return env.IdempotencyKey
	}
	publish := func(subject string, data []byte) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx, subject, data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	replace := func(b []byte, old, new string) []byte {
		t.Helper()
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("event lacks %q", old)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
	same := func(b []byte) []byte { // lists reordered, CBV URNs, eventTime in UTC, a recordTime
		b = replace(b, `"urn:epc:id:sgtin:0614141.012345.10016550749981","urn:epc:id:sgtin:0614141.012345.10016550749982"`,
			`"urn:epc:id:sgtin:0614141.012345.10016550749982","urn:epc:id:sgtin:0614141.012345.10016550749981"`)
		b = replace(b, `"cbv:BizStep-shipping"`, `"urn:epcglobal:cbv:bizstep:shipping"`)
		b = replace(b, `"cbv:Disp-in_transit"`, `"urn:epcglobal:cbv:disp:in_transit"`)
		return replace(b, `"eventTime":"2024-03-12T09:15:00-05:00"`, `"eventTime":"2024-03-12T14:15:00.000Z","recordTime":"2024-03-13T08:00:00Z"`)
	}

	kv, err := js.KeyValue(ctx, subjects.IdempotencyBucket)
	if err != nil {
		t.Fatal(err)
	}
	// commitAs writes an event's LEDGER entry and key state as the
	// validator wrote them before: with hash, recorded by identity ("" for
	// none).
	commitAs := func(event []byte, hash, identity string) {
		t.Helper()
		key := keyOf(event)
		seq := publish(shipping, event)
		m := nats.NewMsg(subjects.Ledger(dom, key))
		m.Data = event
		m.Header.Set(envelope.IdempotencyKey, key)
		m.Header.Set(envelope.EventType, "shipping")
		m.Header.Set(envelope.SourceStream, subjects.EventsStream)
		m.Header.Set(envelope.SourceSeq, strconv.FormatUint(seq, 10))
		m.Header.Set(envelope.ContentHash, hash)
		if identity != "" {
			m.Header.Set(envelope.ContentIdentity, identity)
		}
		m.Header.Set(jetstream.MsgIDHeader, key)
		lack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := json.Marshal(idempotency.KeyState{State: idempotency.StateCommitted, Domain: dom, EventType: "shipping", SourceSeq: seq,
			LedgerSeq: lack.Sequence, CommittedAt: time.Now().UTC(), ContentHash: hash, ContentIdentity: identity})
		if _, err := kv.Create(ctx, key, st); err != nil {
			t.Fatal(err)
		}
	}
	// A key committed before the content identity was recorded: its
	// LEDGER entry and key state carry the canonical JSON's hash and no
	// identity.
	legacy := shipment("urn:uuid:0b7e6a52-1c1e-4f0e-9a51-legacy000001")
	commitAs(legacy, idempotency.CanonicalHash(legacy), "")
	// A key committed by the event hash ID alone, as computed before the
	// exact content was added (identity cbv2-event-hash).
	const hashOnlyID = "urn:uuid:0b7e6a52-1c1e-4f0e-9a51-hashonly0001"
	hashOnly := shipment(hashOnlyID)
	doc, err := gate.Decode(hashOnly)
	if err != nil {
		t.Fatal(err)
	}
	legacyDigest, _ := eventhash.Digest(eventhash.LegacyID(doc, nil))
	commitAs(hashOnly, legacyDigest, dscsa.ContentIdentityEventHash)

	startReconcilers(t, srv)
	natstest.WaitServing(t, nc, access.Validator, access.Quarantiner, access.Auditor)

	rows := []struct {
		name     string
		eventID  string // "" the legacy key's, hashOnlyID that key's
		subject  string
		first    func(eventID string) []byte // nil: shipment
		second   func(eventID string) []byte
		conflict bool
	}{
		{"JSON, then its XML twin in a document", "urn:uuid:7d1f0c1e-5b3a-4c8e-8f41-0c9a2b7e0001", subjects.Event(dom, subjects.DocumentType), nil,
			shipmentXML, false},
		{"JSON, then lists reordered, CBV URNs, eventTime in UTC, a recordTime", "urn:uuid:7d1f0c1e-5b3a-4c8e-8f41-0c9a2b7e0002", shipping, nil,
			func(id string) []byte { return same(shipment(id)) }, false},
		{"JSON, then another bizStep", "urn:uuid:7d1f0c1e-5b3a-4c8e-8f41-0c9a2b7e0003", subjects.Event(dom, "receiving"), nil,
			func(id string) []byte {
				return replace(shipment(id), `"cbv:BizStep-shipping"`, `"cbv:BizStep-receiving"`)
			}, true},
		{"JSON, then another quantity", "urn:uuid:7d1f0c1e-5b3a-4c8e-8f41-0c9a2b7e0004", shipping, nil,
			func(id string) []byte { return replace(shipment(id), `"quantity":2,`, `"quantity":20,`) }, true},
		{"a key committed before the identity, then the same event", "", shipping, nil,
			func(string) []byte { return same(legacy) }, false},
		{"a key committed before the identity, then another quantity", "", shipping, nil,
			func(string) []byte { return replace(legacy, `"quantity":2,`, `"quantity":20,`) }, true},
		{"E10: quantity 2, then 2.0000000000000001 (one event hash ID)", "urn:uuid:7d1f0c1e-5b3a-4c8e-8f41-0c9a2b7e0005", shipping, nil,
			func(id string) []byte {
				return replace(shipment(id), `"quantity":2,`, `"quantity":2.0000000000000001,`)
			}, true},
		{"E10: quantity 9007199254740993, then 9007199254740992", "urn:uuid:7d1f0c1e-5b3a-4c8e-8f41-0c9a2b7e0006", shipping,
			func(id string) []byte { return replace(shipment(id), `"quantity":2,`, `"quantity":9007199254740993,`) },
			func(id string) []byte { return replace(shipment(id), `"quantity":2,`, `"quantity":9007199254740992,`) }, true},
		{"E10: an extension's text, then the same text as {\"#text\"}", "urn:uuid:7d1f0c1e-5b3a-4c8e-8f41-0c9a2b7e0007", shipping, nil,
			func(id string) []byte {
				return replace(shipment(id), `"example:shipper":"Müller & Söhne <Großhandel>"`, `"example:shipper":{"#text":"Müller & Söhne <Großhandel>"}`)
			}, true},
		{"quantity 2, then 2.0 (one decimal value)", "urn:uuid:7d1f0c1e-5b3a-4c8e-8f41-0c9a2b7e0008", shipping, nil,
			func(id string) []byte { return replace(shipment(id), `"quantity":2,`, `"quantity":2.0,`) }, false},
		{"a key committed by the event hash ID alone, then the same event reordered", hashOnlyID, shipping, nil,
			func(id string) []byte { return same(shipment(id)) }, false},
		{"a key committed by the event hash ID alone, then its XML twin", hashOnlyID, subjects.Event(dom, subjects.DocumentType), nil,
			shipmentXML, false},
		{"a key committed by the event hash ID alone, then 2.0000000000000001", hashOnlyID, shipping, nil,
			func(id string) []byte {
				return replace(shipment(id), `"quantity":2,`, `"quantity":2.0000000000000001,`)
			}, true},
	}
	// A conflict row's two events race through the validator's workers:
	// whichever commits first is the committed content, the other the
	// conflict. partner names the other event of the row.
	wantOpen, partner := map[uint64]string{}, map[uint64]uint64{}
	committed, duplicates := 2, 0 // the keys committed before
	for _, r := range rows {
		id := r.eventID
		var first uint64
		switch id {
		case "":
			id = "urn:uuid:0b7e6a52-1c1e-4f0e-9a51-legacy000001"
		case hashOnlyID:
		default:
			ev := shipment(id)
			if r.first != nil {
				ev = r.first(id)
			}
			first = publish(shipping, ev)
			committed++
		}
		seq := publish(r.subject, r.second(id))
		if r.conflict {
			wantOpen[seq] = r.name
			if first != 0 {
				partner[seq], partner[first] = first, seq
				wantOpen[first] = r.name
			}
		} else {
			duplicates++
		}
	}
	conflicts := len(wantOpen) - len(partner)/2
	want := map[string]int{api.ReconcileCommitted: committed, api.ReconcileDuplicate: duplicates, api.ReconcileConflict: conflicts}
	var rep api.ReconcileReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		rep = api.ReconcileReply{}
		request(t, nc, api.AuditReconcile, api.ReconcileRequest{Grace: "0s", IDs: true}, &rep)
		if fmt.Sprint(rep.Counts) != fmt.Sprint(want) || rep.Ledger.Entries != committed {
			return fmt.Errorf("counts %v, LEDGER %+v; want %v and %d entries; unaccounted %+v", rep.Counts, rep.Ledger, want, committed, rep.Unaccounted)
		}
		return nil
	})
	if l := rep.Ledger; l.Sourced != committed || l.Unsourced != 0 || len(rep.Unaccounted) != 0 {
		t.Fatalf("reconcile: LEDGER %+v, unaccounted %+v; want every entry sourced", l, rep.Unaccounted)
	}
	for _, e := range rep.IDs[api.ReconcileConflict] {
		name, ok := wantOpen[e.Seq]
		if !ok {
			t.Errorf("EVENTS %d is a conflict, not a conflict row", e.Seq)
			continue
		}
		delete(wantOpen, e.Seq)
		delete(wantOpen, partner[e.Seq])
		var got api.GetReply
		request(t, nc, api.AuditGet, api.GetRequest{DLQID: e.DLQID}, &got)
		if got.State.ErrorCode != codes.IdempotencyConflict {
			t.Errorf("%s: chain %s, code %s, want %s", name, e.DLQID, got.State.ErrorCode, codes.IdempotencyConflict)
		}
	}
	if len(wantOpen) != 0 {
		t.Errorf("conflicts not reported: %v", slices.Collect(maps.Values(wantOpen)))
	}
}
