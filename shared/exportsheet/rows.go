// Package exportsheet is the one owner of the spreadsheet forms of an
// inspection export (audit.export pages): the rows of its records
// (Builder), the CSV and XLSX writers (WriteCSV, WriteXLSX, with cells made
// inert for a spreadsheet) and the FSMA 204 lot filter (ChainHasLot).
// dlqctl export and the console's Audit page both write with it; the JSONL
// form is services/auditor's ExportWriter.
package exportsheet

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/record"
)

// baseColumns are the columns of every row of a CSV or XLSX export: one
// row per stored record, with the event's key fields, the failure, the
// chain's status after the record and the record's seal.
var baseColumns = []string{
	"dlq_id", "domain", "record_index", "kind", "quarantine_seq", "status", "class", "error_code", "error_detail",
	"party_id", "event_type", "idempotency_key", "ordering_key", "event_time", "first_seen", "recorded_at",
	"redrive_count", "actor", "reason", "payload_sha256", "audit_hash", "prev_hash",
}

// fsmaKeyColumns are the FSMA 204 identity fields, always present in an
// export that holds FSMA events.
var fsmaKeyColumns = []string{"supplier_id", "traceability_lot_code", "cte_type"}

// exportRow is one record's row: the base values and the payload's
// values of the domain columns.
type exportRow struct {
	base []string
	kdes map[string]string
}

// Builder turns chains into a spreadsheet, a page at a time: one
// row per record. For FSMA 204 events the columns include supplier_id,
// traceability_lot_code, cte_type and every KDE (21 CFR 1.1325-1.1350) of
// the CTE types present in the export ("a or b" KDEs as two columns); a
// value that is an object or array is its compact JSON. Only the rows'
// cells are kept, not the chains.
type Builder struct {
	rows    []exportRow
	ctes    map[string]bool
	hasFSMA bool
}

// Add adds the rows of one chain.
func (b *Builder) Add(c api.ExportChain) {
	if b.ctes == nil {
		b.ctes = map[string]bool{}
	}
	var recs []record.Record
	for _, er := range c.Records {
		r, err := record.Parse(er.Record)
		if err != nil {
			continue // verify-export reports it
		}
		recs = append(recs, r)
		st, _ := record.Fold(recs)
		doc := payloadDoc(st.Payload)
		env := envelopeOf(c.Domain, doc)
		row := exportRow{base: []string{
			c.DLQID, c.Domain, strconv.Itoa(r.Index), string(r.Kind), strconv.FormatUint(er.Seq, 10), string(st.Status),
			string(st.Class), string(st.ErrorCode), st.ErrorDetail, firstNonEmpty(st.PartyID, env.PartyID),
			env.EventType, firstNonEmpty(st.IdempotencyKey, env.IdempotencyKey), firstNonEmpty(st.OrderingKey, env.OrderingKey),
			timeCell(st.EventTime), st.FirstSeen.UTC().Format(time.RFC3339Nano), r.QuarantinedAt.UTC().Format(time.RFC3339Nano),
			strconv.Itoa(st.RedriveCount), r.Actor, r.Reason, payloadHash(st.Payload), r.AuditHash, r.PrevHash,
		}}
		if c.Domain == fsma.Name && doc != nil {
			b.hasFSMA = true
			row.kdes = map[string]string{}
			for _, f := range fsmaKeyColumns {
				row.kdes[f] = cell(doc[f])
			}
			if env.EventType != "" {
				b.ctes[env.EventType] = true
				for _, f := range kdeFields(env.EventType) {
					row.kdes[f] = cell(doc[f])
				}
			}
		}
		b.rows = append(b.rows, row)
	}
}

// Table returns the header and the rows.
func (b *Builder) Table() (header []string, rows [][]string) {
	header = slices.Clone(baseColumns)
	var extra []string
	if b.hasFSMA {
		extra = append(extra, fsmaKeyColumns...)
		for _, cte := range fsma.CTETypes() {
			if !b.ctes[cte] {
				continue
			}
			for _, f := range kdeFields(cte) {
				if !slices.Contains(extra, f) {
					extra = append(extra, f)
				}
			}
		}
	}
	header = append(header, extra...)
	rows = make([][]string, len(b.rows))
	for i, r := range b.rows {
		rows[i] = r.base
		for _, f := range extra {
			rows[i] = append(rows[i], r.kdes[f])
		}
	}
	return header, rows
}

// kdeFields returns the payload fields of a CTE's KDEs ("a or b" is two).
func kdeFields(cte string) []string {
	var out []string
	for _, k := range fsma.RequiredKDEs(cte) {
		out = append(out, strings.Split(k, " or ")...)
	}
	return out
}

// payloadDoc decodes a payload that is a JSON object (nil otherwise).
func payloadDoc(p *record.Payload) domain.Doc {
	if p == nil {
		return nil
	}
	b, err := p.Bytes()
	if err != nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc domain.Doc
	if dec.Decode(&doc) != nil {
		return nil
	}
	return doc
}

// envelopeOf derives the identity of doc by its domain's rules.
func envelopeOf(dom string, doc domain.Doc) (env struct{ EventType, PartyID, IdempotencyKey, OrderingKey string }) {
	spec, ok := registry.Lookup(dom)
	if !ok || doc == nil {
		return env
	}
	e := spec.Checker.Identify(doc)
	env.EventType, env.PartyID, env.IdempotencyKey, env.OrderingKey = e.EventType, e.PartyID, e.IdempotencyKey, e.OrderingKey
	return env
}

// cell is a payload value as a spreadsheet cell.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func timeCell(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func payloadHash(p *record.Payload) string {
	if p == nil {
		return ""
	}
	return p.SHA256
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
