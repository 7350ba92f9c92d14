package exportsheet

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
)

// chainWith returns an exported chain of domain dom: record 0 of payload
// doc (read from a document when d is set), then the records next builds
// from the record before (nil for none), sealed and linked.
func chainWith(tb testing.TB, n int, dom, doc string, d *envelope.Document, next ...func(prev record.Record) record.Record) api.ExportChain {
	tb.Helper()
	at := time.Date(2025, 3, 13, 2, 30, 0, 123e6, time.UTC).Add(time.Duration(n) * time.Minute)
	r := record.FromFailure(record.Failure{
		Class: record.ClassValidation, Code: codes.SchemaValidation, Detail: "schema", Domain: dom,
		Subject: "events." + dom + ".x", Stream: "EVENTS", Seq: uint64(n + 1), Deliveries: 1,
		Published: at, Payload: []byte(doc), FailedAt: at,
		Envelope: &envelope.Envelope{Domain: dom, EventType: "x", IdempotencyKey: fmt.Sprintf("key-%d", n), EventTime: at, Document: d},
	}, at)
	recs := []record.Record{r}
	for _, fn := range next {
		recs = append(recs, fn(recs[len(recs)-1]))
	}
	c := api.ExportChain{DLQID: r.DLQID, Domain: dom}
	for i := range recs {
		if i > 0 {
			recs[i].PrevHash = recs[i-1].AuditHash
		}
		if err := record.Seal(&recs[i]); err != nil {
			tb.Fatal(err)
		}
		b, err := record.Marshal(recs[i])
		if err != nil {
			tb.Fatal(err)
		}
		c.Records = append(c.Records, api.ExportRecord{Seq: uint64(n*10 + i + 1), Record: b})
	}
	if _, err := record.Fold(recs); err != nil {
		tb.Fatalf("the test chain does not fold: %v", err)
	}
	return c
}

// after returns the record that follows prev, of kind k, an hour later.
func after(prev record.Record, k record.Kind) record.Record {
	return record.Record{
		SchemaVersion: record.SchemaVersion, DLQID: prev.DLQID, Index: prev.Index + 1, Kind: k,
		Domain: prev.Domain, Class: prev.Class, ErrorCode: prev.ErrorCode, ErrorDetail: prev.ErrorDetail,
		SourceSubject: prev.SourceSubject, SourceStream: prev.SourceStream, SourceSeq: prev.SourceSeq,
		FirstSeen: prev.FirstSeen, QuarantinedAt: prev.QuarantinedAt.Add(time.Hour),
	}
}

// approved is a second person's signed approval of a correction that
// requester asked for.
func approved(requester, approver string) func(record.Record) record.Record {
	return func(prev record.Record) record.Record {
		r := after(prev, record.KindApproved)
		r.Signature = &record.Signature{ApprovalID: "appr-" + approver, Action: api.ActionCorrect,
			Requester: requester, RequestedAt: r.QuarantinedAt.Add(-time.Minute), Approver: approver, ApproverRole: "approver",
			SignedAt: r.QuarantinedAt, Meaning: "checked the correction against invoice INV-2025-0183 & the DEA 222 form"}
		return r
	}
}

// corrected is a correction by actor with payload doc.
func corrected(actor, doc string) func(record.Record) record.Record {
	return func(prev record.Record) record.Record {
		r := after(prev, record.KindCorrected)
		r.Actor, r.Reason, r.Payload = actor, "NDC typed with a digit missing <per label>", record.NewPayload([]byte(doc))
		return r
	}
}

// resolved closes the chain.
func resolved(prev record.Record) record.Record {
	r := after(prev, record.KindResolved)
	r.Actor, r.Reason = "Zoë Ångström", "replayed by hand"
	return r
}

// sourceDocument is the provenance of the first chain of
// chainColumnChains: an event read from an EPCIS document.
var sourceDocument = &envelope.Document{ID: `RET-2025-0042 <Müller & Söhne> "Nord" 陈伟`, SHA256: strings.Repeat("ab", 32), Format: "xml",
	Index: 4_811, Count: 10_000, Stream: "EVENTS", Seq: 7, Offset: 100, Length: 50}

// chainColumnChains are chains whose sheets have chain columns: two DSCSA
// events, one read from a document (sourceDocument), one published alone;
// two pharmacy events corrected, one with a second person's approval and
// then resolved, one without (the policy waived it).
func chainColumnChains(tb testing.TB) []api.ExportChain {
	fixed := strings.Replace(pharmacyEvent, "55150-123-1", "55150-123-10", 1)
	return []api.ExportChain{
		chainWith(tb, 20, "dscsa", dscsaExample, sourceDocument),
		chainWith(tb, 21, "dscsa", dscsaExample, nil),
		chainWith(tb, 22, "pharmacy", pharmacyEvent, nil, approved("Priya Raman", "陈伟"), corrected("Priya Raman", fixed), resolved),
		chainWith(tb, 23, "pharmacy", pharmacyEvent, nil, corrected("Amara O'Kafor", fixed)),
	}
}

const pharmacyEvent = `{"transaction_id":"INV-2025-0183","registrant_dea":"BW4829137","ndc":"55150-123-1","lot":"C4410B","expiry":"2026-09-30",` +
	`"quantity_delta":"-20","unit":"EA","event_type":"transfer_out","dea_schedule":"II","occurred_at":"2025-03-14T10:42:10.250-05:00",` +
	`"actor_id":"Pharmacie Saint-Étienne & Fils"}`

// TestChainColumns: the DSCSA sheet names each event's source document
// (its instance id and the event's position, from the record's
// provenance) and the pharmacy sheet the correcting person (who wrote the
// latest correction, who approved it, when), in the XLSX as a reader that
// did not write it reads the file (zip and encoding/xml, not excelize)
// and in the CSV.
func TestChainColumns(t *testing.T) {
	chains := chainColumnChains(t)
	doc := sourceDocument
	var b Builder
	for _, c := range chains {
		b.Add(c)
	}
	var file bytes.Buffer
	if err := b.WriteXLSX(&file); err != nil {
		t.Fatal(err)
	}
	sheets := readXLSX(t, file.Bytes())
	var csvOut bytes.Buffer
	if err := b.WriteCSV(&csvOut); err != nil {
		t.Fatal(err)
	}
	csvRows, err := csv.NewReader(&csvOut).ReadAll()
	if err != nil {
		t.Fatal(err)
	}

	corrAt := time.Date(2025, 3, 13, 4, 52, 0, 123e6, time.UTC) // chain 22 (02:52), its record 2 two hours on
	for _, tc := range []struct {
		name, sheet string
		row         int // 1-based data row of the sheet
		want        map[string]string
	}{
		{"event of a document", "dscsa", 1, map[string]string{"dlq_id": chains[0].DLQID,
			"dscsa.source_document_id": doc.ID, "dscsa.source_document_event": "4812", "dscsa.source_document_events": "10000"}},
		{"event published alone", "dscsa", 2, map[string]string{"dlq_id": chains[1].DLQID,
			"dscsa.source_document_id": "", "dscsa.source_document_event": "", "dscsa.source_document_events": ""}},
		{"before the correction", "pharmacy", 2, map[string]string{"dlq_id": chains[2].DLQID, "kind": "approved",
			"pharmacy.corrected_by": "", "pharmacy.correction_approved_by": "", "pharmacy.corrected_at": ""}},
		{"the approved correction", "pharmacy", 3, map[string]string{"dlq_id": chains[2].DLQID, "kind": "corrected",
			"pharmacy.corrected_by": "Priya Raman", "pharmacy.correction_approved_by": "陈伟", "pharmacy.corrected_at": serial(corrAt),
			"pharmacy.ndc11": "55150012310"}},
		{"after the correction", "pharmacy", 4, map[string]string{"dlq_id": chains[2].DLQID, "kind": "resolved",
			"pharmacy.corrected_by": "Priya Raman", "pharmacy.correction_approved_by": "陈伟"}},
		{"a correction without approval", "pharmacy", 6, map[string]string{"dlq_id": chains[3].DLQID, "kind": "corrected",
			"pharmacy.corrected_by": "Amara O'Kafor", "pharmacy.correction_approved_by": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := sheets[tc.sheet]
			if len(rows) <= tc.row {
				t.Fatalf("sheet %s has %d rows", tc.sheet, len(rows))
			}
			for col, want := range tc.want {
				i := slices.Index(rows[0], col)
				if i < 0 {
					t.Fatalf("no column %q in %q", col, rows[0])
				}
				if got := rows[tc.row][i]; got != want {
					t.Errorf("%s!%s row %d = %q, want %q", tc.sheet, col, tc.row, got, want)
				}
			}
		})
	}
	t.Run("csv", func(t *testing.T) {
		h := csvRows[0]
		for _, c := range []struct {
			row       int
			col, want string
		}{
			{1, "dscsa.source_document_id", doc.ID}, {1, "dscsa.source_document_event", "4812"},
			{5, "pharmacy.corrected_by", "Priya Raman"}, {5, "pharmacy.correction_approved_by", "陈伟"},
			{5, "pharmacy.corrected_at", corrAt.Format(timeLayout)}, {5, "dscsa.source_document_id", ""},
		} {
			i := slices.Index(h, c.col)
			if i < 0 {
				t.Fatalf("no column %q in %q", c.col, h)
			}
			if got := csvRows[c.row][i]; got != c.want {
				t.Errorf("row %d %s = %q, want %q", c.row, c.col, got, c.want)
			}
		}
	})
}

// serial is t as a spreadsheet date-time serial, as the XLSX stores it
// (days since 1899-12-30), compared to the millisecond.
func serial(t time.Time) string {
	return strconv.FormatFloat(roundSerial(float64(t.Sub(time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC)))/float64(24*time.Hour)), 'f', -1, 64)
}

func roundSerial(days float64) float64 { return float64(int64(days*86400e3+0.5)) / 86400e3 }

// readXLSX reads every worksheet of an XLSX file with archive/zip and
// encoding/xml alone (no spreadsheet library): by sheet name, rows of cell
// texts, a number cell as its value (a date-time's serial rounded to the
// millisecond by serial's rule), empty cells as "".
func readXLSX(tb testing.TB, data []byte) map[string][][]string {
	tb.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		tb.Fatal(err)
	}
	part := func(name string) []byte {
		for _, f := range zr.File {
			if f.Name == name {
				rc, err := f.Open()
				if err != nil {
					tb.Fatal(err)
				}
				defer func() { _ = rc.Close() }()
				b, err := io.ReadAll(rc)
				if err != nil {
					tb.Fatal(err)
				}
				return b
			}
		}
		return nil
	}
	var wb struct {
		Sheets []struct {
			Name string `xml:"name,attr"`
			RID  string `xml:"http://schemas.openxmlformats.org/officeDocument/2006/relationships id,attr"`
		} `xml:"sheets>sheet"`
	}
	var rels struct {
		Rels []struct {
			ID     string `xml:"Id,attr"`
			Target string `xml:"Target,attr"`
		} `xml:"Relationship"`
	}
	var shared struct {
		SI []struct {
			T string `xml:"t"`
			R []struct {
				T string `xml:"t"`
			} `xml:"r"`
		} `xml:"si"`
	}
	for name, v := range map[string]any{"xl/workbook.xml": &wb, "xl/_rels/workbook.xml.rels": &rels, "xl/sharedStrings.xml": &shared} {
		if b := part(name); b != nil {
			if err := xml.Unmarshal(b, v); err != nil {
				tb.Fatalf("%s: %v", name, err)
			}
		}
	}
	sharedText := func(i int) string {
		si := shared.SI[i]
		s := si.T
		for _, r := range si.R {
			s += r.T
		}
		return s
	}
	out := map[string][][]string{}
	for _, s := range wb.Sheets {
		target := ""
		for _, r := range rels.Rels {
			if r.ID == s.RID {
				target = path.Join("xl", strings.TrimPrefix(r.Target, "/xl/"))
			}
		}
		var ws struct {
			Rows []struct {
				R     int `xml:"r,attr"`
				Cells []struct {
					Ref    string `xml:"r,attr"`
					T      string `xml:"t,attr"`
					V      string `xml:"v"`
					Inline string `xml:"is>t"`
				} `xml:"c"`
			} `xml:"sheetData>row"`
		}
		if err := xml.Unmarshal(part(target), &ws); err != nil {
			tb.Fatalf("sheet %s (%s): %v", s.Name, target, err)
		}
		var rows [][]string
		for _, r := range ws.Rows {
			for len(rows) < r.R {
				rows = append(rows, nil)
			}
			var row []string
			for _, c := range r.Cells {
				col := 0
				for _, ch := range c.Ref {
					if ch < 'A' || ch > 'Z' {
						break
					}
					col = col*26 + int(ch-'A'+1)
				}
				for len(row) < col-1 {
					row = append(row, "")
				}
				v := c.V
				switch c.T {
				case "inlineStr":
					v = c.Inline
				case "s":
					i, _ := strconv.Atoi(c.V)
					v = sharedText(i)
				case "", "n":
					if f, err := strconv.ParseFloat(c.V, 64); err == nil && strings.Contains(c.V, ".") {
						v = strconv.FormatFloat(roundSerial(f), 'f', -1, 64)
					}
				}
				row = append(row, v)
			}
			rows[r.R-1] = row
		}
		width := len(rows[0])
		for i := range rows {
			for len(rows[i]) < width {
				rows[i] = append(rows[i], "")
			}
		}
		out[s.Name] = rows
	}
	return out
}
