package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/services/dlqctl/internal/client"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/exportsheet"
)

// Export formats.
const (
	formatCSV   = "csv"
	formatXLSX  = "xlsx"
	formatJSONL = "jsonl"
	// formatEPCIS: the DSCSA events as one EPCIS 2.0 JSON document
	// (exportsheet.EPCISBuilder); default for an --out ending in .jsonld.
	formatEPCIS = "epcis"
)

// exportFormats lists --format's values.
var exportFormats = []string{formatCSV, formatXLSX, formatJSONL, formatEPCIS}

// exportResult is what an export wrote (the JSON output of dlqctl export).
type exportResult struct {
	File      string `json:"file"`
	Format    string `json:"format"`
	Chains    int    `json:"chains"`
	Records   int    `json:"records"`
	Uncovered int    `json:"uncovered"`
	Pages     int    `json:"pages"`
	// CheckpointSeq is the AUDIT sequence of the signed checkpoint the
	// export is proved against, TreeSize its tree's size.
	CheckpointSeq uint64 `json:"checkpoint_seq"`
	TreeSize      uint64 `json:"tree_size"`
	// Originals is, for the epcis format, the directory holding each
	// event's original bytes (<dlq_id>.json, or .xml for an event of an
	// XML document), and OriginalFiles how many it holds.
	Originals     string `json:"originals,omitempty"`
	OriginalFiles int    `json:"original_files,omitempty"`
}

func (a *app) exportCommand() *cobra.Command {
	var (
		req                  api.ExportRequest
		since, until, format string
		out                  string
		idf                  idFlags
	)
	cmd := &cobra.Command{
		Use:   "export --reason TEXT --out FILE",
		Short: "Inspection export: the records of a filter as CSV, XLSX or verifiable JSONL (audit.export)",
		Long: `Write every record of the quarantined events matching a filter (domain,
party, status, quarantine time range) to --out:

  csv, xlsx  a sortable spreadsheet, one row per stored record: the event's
             key fields, the failure (class, code, detail), the status after
             the record and its seal (audit_hash, prev_hash). xlsx: that
             "records" sheet and one sheet per domain present with the
             fields an inspector asks about as typed columns (pharmacy: NDC-11,
             lot, expiry, quantity...; dscsa: GTIN, serial, lot, expiry,
             locations...; fsma: every KDE of the CTE types present,
             locations one column per member); csv: one table, the domain
             columns prefixed with their domain (fsma.event_time).
  jsonl      the chains themselves with the signed checkpoint and each
             record's inclusion proof: dlqctl verify-export checks it with
             no server.
  epcis      the DSCSA events (each chain's latest correction, else its
             original payload) as one EPCIS 2.0 JSON document, CBV 1.2
             URNs written in EPCIS 2.0's forms, to send a reviewed
             shipment back to a trading partner (default for an --out
             ending in .jsonld); the originals, byte for byte, beside it.
             Other domains' chains, payloads that are no event and events
             EPCIS 2.0 cannot express (each named on stderr) are left out.

An export reads payloads: it needs the inspector or operator role and a
--reason, and every page is recorded in the access audit (dlqctl access)
before it is sent. The export is proved against a checkpoint written when
it starts; records stored after it are left out and counted. The
identifier filters are dlqctl find's and hold place's, read by the auditor
the same way in every domain (--lot is a pharmacy or DSCSA lot or an FSMA
TLC); a filter the --domain does not search by is refused, naming it. The
auditor selects the chains, so a JSONL export of a lot is the signed, whole
answer to its filter.`,
		Example: `  dlqctl export --domain fsma --lot TLC-2026-0042 --since 2026-11-01 --until 2026-11-03 \
      --reason "FDA records request 2026-117" --out lot-0042.xlsx
  dlqctl export --domain pharmacy --ndc 0409-4888-20 --lot 'A1&B<2' --reason "DEA recall" --out lot.jsonl
  dlqctl export --domain pharmacy --reason "DEA inspection" --out pharmacy.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErrorf("--out is required")
			}
			if strings.TrimSpace(req.Reason) == "" {
				return usageErrorf("--reason is required: an export reads payloads")
			}
			if format == "" {
				format = strings.TrimPrefix(strings.ToLower(filepath.Ext(out)), ".")
				if format == "jsonld" {
					format = formatEPCIS
				}
			}
			if err := oneOf("format", format, exportFormats); err != nil || format == "" {
				return usageErrorf("--format must be one of %s", strings.Join(exportFormats, ", "))
			}
			if err := oneOf("domain", req.Filter.Domain, domains); err != nil {
				return err
			}
			ir, err := idf.request()
			if err != nil {
				return err
			}
			f := &req.Filter
			f.NDC, f.Lot, f.Registrant, f.TransactionID, f.GTIN = ir.NDC, ir.Lot, ir.Registrant, ir.TransactionID, ir.GTIN
			f.Serial, f.SSCC, f.TLC, f.Identifiers = ir.Serial, ir.SSCC, ir.TLC, ir.Identifiers
			if req.Filter.From, err = parseTime(since, a.now()); err != nil {
				return usageErrorf("--since: %v", err)
			}
			if req.Filter.To, err = parseTime(until, a.now()); err != nil {
				return usageErrorf("--until: %v", err)
			}
			res, err := a.export(cmd.Context(), req, format, out)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(res)
			}
			t := newTable(a.io.Out)
			t.row("FILE", res.File)
			t.row("FORMAT", res.Format)
			t.row("CHAINS", strconv.Itoa(res.Chains))
			t.row("RECORDS", strconv.Itoa(res.Records))
			t.row("CHECKPOINT", fmt.Sprintf("AUDIT seq %d, %d records", res.CheckpointSeq, res.TreeSize))
			t.row("LEFT OUT", fmt.Sprintf("%d records stored after the checkpoint", res.Uncovered))
			if res.Originals != "" {
				t.row("ORIGINALS", fmt.Sprintf("%s (%d files: each event's original bytes)", res.Originals, res.OriginalFiles))
			}
			t.flush()
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Filter.Domain, "domain", "", "only this domain")
	fl.StringVar(&req.Filter.Party, "party", "", "only this supplier or registrant (party id)")
	fl.StringVar(&req.Filter.Status, "status", "", "only this status (open, redriving, resolved, poison)")
	fl.StringVar(&since, "since", "", "quarantined at or after (RFC 3339, a date, or a duration ago)")
	fl.StringVar(&until, "until", "", "quarantined at or before")
	fl.StringVar(&req.Reason, "reason", "", "why the payloads are read (required; recorded)")
	idf.add(cmd)
	fl.StringVar(&format, "format", "", "csv, xlsx, jsonl or epcis (default: from --out's extension; .jsonld: epcis)")
	fl.StringVar(&out, "out", "", "the file to write (required)")
	fl.IntVar(&req.Limit, "page", 0, "chains per page (default and most 1000)")
	return cmd
}

// export pages audit.export and writes the file as the pages arrive
// (JSONL), or their rows once the last has (CSV, XLSX: the columns depend
// on the CTE types present).
func (a *app) export(ctx context.Context, req api.ExportRequest, format, out string) (res exportResult, err error) {
	res = exportResult{File: out, Format: format}
	c, err := a.connect()
	if err != nil {
		return res, err
	}
	defer c.Close()
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return res, usageErrorf("--out: %v", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("export: write %s: %w", out, cerr)
		}
		if err != nil {
			_ = os.Remove(out) // no partial export is left behind
		}
	}()
	var (
		cp    api.ExportedCheckpoint
		jsonl *export.Writer
		table exportsheet.Builder
		epcis exportsheet.EPCISBuilder
	)
	for {
		var rep api.ExportReply
		if err := c.Request(ctx, api.AuditExport, req, &rep); err != nil {
			return res, err
		}
		if res.Pages == 0 {
			cp = rep.Checkpoint
			res.CheckpointSeq, res.TreeSize = cp.AuditSeq, cp.TreeSize
			if format == formatJSONL {
				h := api.ExportHeader{Format: api.ExportFormat, ExportedAt: a.now().UTC(), Filter: req.Filter, Reason: req.Reason, Key: cp.Key}
				if jsonl, err = export.NewWriter(f, h, cp); err != nil {
					return res, fmt.Errorf("export: write %s: %w", out, err)
				}
			}
		} else if rep.Checkpoint.AuditSeq != cp.AuditSeq {
			return res, failedf("export: page %d is proved against another checkpoint", res.Pages+1)
		}
		res.Pages++
		res.Uncovered += rep.Uncovered
		if jsonl != nil {
			// Every chain of the page, and its signed manifest: the file
			// proves that nothing of the filter was left out.
			if err := jsonl.Page(rep); err != nil {
				return res, fmt.Errorf("export: write %s: %w", out, err)
			}
		}
		for _, ch := range rep.Chains {
			res.Chains++
			res.Records += len(ch.Records)
			switch {
			case format == formatEPCIS:
				epcis.Add(ch)
			case jsonl == nil:
				table.Add(ch)
			}
		}
		if rep.NextCursor == "" {
			break
		}
		req.Cursor = rep.NextCursor
	}
	switch format {
	case formatJSONL:
		err = jsonl.Close(res.Uncovered)
	case formatCSV:
		err = table.WriteCSV(f)
	case formatXLSX:
		err = table.WriteXLSX(f)
	case formatEPCIS:
		if err = epcis.WriteEPCIS(f, a.now()); err == nil {
			err = a.writeOriginals(ctx, c, req.Reason, out, epcis.Originals, &res)
		}
		// An event that cannot be written as EPCIS 2.0 is left out of the
		// document, never silently: each is named (dlq id and code; its
		// original is beside the document, byte for byte).
		for _, r := range epcis.Refused {
			fmt.Fprintf(a.io.Err, "left out of the EPCIS document: %s: %v\n", r.DLQID, r.Err)
		}
		if n := len(epcis.Refused); n > 0 {
			fmt.Fprintf(a.io.Err, "%d DSCSA events left out of the EPCIS document (their originals are in the export's originals)\n", n)
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return res, fmt.Errorf("export: write %s: %w", out, err)
	}
	return res, nil
}

// The spreadsheet writers are package exportsheet's (shared with the
// console); these names keep the package's tests.
var (
	writeCSV = exportsheet.WriteCSV
	csvCell  = exportsheet.InertCell
)

func (a *app) verifyExportCommand() *cobra.Command {
	var pubKey string
	cmd := &cobra.Command{
		Use:   "verify-export FILE --pubkey KEY",
		Short: "Verify a JSONL inspection export offline: seals, chains, checkpoint signature, inclusion proofs",
		Long: `Check a JSONL export (dlqctl export --format jsonl) with no server: the
checkpoint's signature by --pubkey (the auditor's signing public key, from
your own records, never from the file), every record's seal, every chain's
links, and each record's inclusion proof in the signed Merkle tree. Exit 0
when it verifies, 1 with the first reason it does not.`,
		Example: `  dlqctl verify-export pharmacy.jsonl --pubkey ABC...XYZ`,
		Args:    exactArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pubKey == "" {
				return usageErrorf("--pubkey is required")
			}
			f, err := os.Open(args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			defer func() { _ = f.Close() }()
			rep, err := export.Verify(f, pubKey)
			if err != nil {
				return failedf("%v", err)
			}
			if a.json() {
				return a.printJSON(map[string]any{"ok": true, "chains": rep.Chains, "records": rep.Records,
					"uncovered": rep.Uncovered, "checkpoint": rep.Checkpoint})
			}
			t := newTable(a.io.Out)
			t.row("EXPORT", "VERIFIED")
			t.row("CHAINS", strconv.Itoa(rep.Chains))
			t.row("RECORDS", strconv.Itoa(rep.Records))
			t.row("CHECKPOINT", fmt.Sprintf("AUDIT seq %d, %d records up to seq %d, signed %s",
				rep.Checkpoint.AuditSeq, rep.Checkpoint.TreeSize, rep.Checkpoint.LastSeq, fmtTime(rep.Checkpoint.At)))
			t.row("LEFT OUT", fmt.Sprintf("%d records stored after the checkpoint", rep.Uncovered))
			t.flush()
			return nil
		},
	}
	cmd.Flags().StringVar(&pubKey, "pubkey", "", "the auditor's signing public key (required)")
	return cmd
}

func (a *app) accessCommand() *cobra.Command {
	var (
		req          api.AccessRequest
		since, until string
		all          bool
	)
	cmd := &cobra.Command{
		Use:   "access",
		Short: "The access audit: who read which payloads, when and why (audit.access)",
		Long: `List the payload reads recorded in AUDIT (dlqctl show --payload, exports),
newest first: who, in which role, when, which records (or the filter, count
and hash of the ids of a big export), and the reason given.`,
		Example: `  dlqctl --context data/contexts/elif.yilmaz.json access --user jonas.mueller --since 7d`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if req.Since, err = parseTime(since, a.now()); err != nil {
				return usageErrorf("--since: %v", err)
			}
			if req.Until, err = parseTime(until, a.now()); err != nil {
				return usageErrorf("--until: %v", err)
			}
			var items []api.AccessEntry
			for {
				var rep api.AccessReply
				if err := a.call(cmd.Context(), api.AuditAccess, req, &rep); err != nil {
					return err
				}
				items = append(items, rep.Items...)
				if !all || rep.NextCursor == "" {
					break
				}
				req.Cursor = rep.NextCursor
			}
			if a.json() {
				return a.printJSON(api.AccessReply{Items: items})
			}
			t := newTable(a.io.Out, "SEQ", "AT", "USER", "ROLE", "ACTION", "COUNT", "RECORDS", "REASON")
			for _, e := range items {
				recs := recordsCell(e)
				t.row(strconv.FormatUint(e.Seq, 10), fmtTime(e.At), e.User, e.Role, e.Action, strconv.Itoa(e.Count), recs, e.Reason)
			}
			t.flush()
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.User, "user", "", "only this person's reads (a person's name, e.g. jonas.mueller; here --user is not the connection's user: connect with --context)")
	fl.StringVar(&since, "since", "", "at or after (RFC 3339, a date, or a duration ago)")
	fl.StringVar(&until, "until", "", "at or before")
	fl.IntVar(&req.Limit, "limit", 0, "page size (default 100)")
	fl.BoolVar(&all, "all", false, "every page")
	return cmd
}

// accessShown is how many ids an access row shows before "+N more" (the
// JSON output has them all).
const accessShown = 3

// recordsCell is the RECORDS cell of an access row: the first ids read
// and how many more, or the hash of the ids of a big export.
func recordsCell(e api.AccessEntry) string {
	ids := e.DLQIDs
	switch {
	case len(ids) == 0 && e.Count > 0:
		return "sha256:" + short(e.IDsHash)
	case len(ids) > accessShown:
		return strings.Join(ids[:accessShown], ",") + fmt.Sprintf(" +%d more", len(ids)-accessShown)
	}
	return strings.Join(ids, ",")
}

// writeOriginals writes, beside an EPCIS export out, the directory
// out.originals holding each exported event's original bytes, as the
// partner sent them: record 0's payload, or, for an event read from an
// EPCIS document, its exact bytes in that document (an XML element for an
// XML document), read with audit.get (a payload read, recorded with the
// export's reason).
func (a *app) writeOriginals(ctx context.Context, c *client.Client, reason, out string, originals []exportsheet.Original, res *exportResult) error {
	if len(originals) == 0 {
		return nil
	}
	dir := out + ".originals"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, o := range originals {
		data, ext := o.Payload, ".json"
		if d := o.Document; d != nil {
			var g api.GetReply
			if err := c.Request(ctx, api.AuditGet, api.GetRequest{DLQID: o.DLQID, IncludePayload: true, Reason: reason}, &g); err != nil {
				return err
			}
			if len(g.DocumentBytes) > 0 {
				data = g.DocumentBytes
				if d.Format == "xml" {
					ext = ".xml"
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, o.DLQID+ext), data, 0o600); err != nil {
			return err
		}
		res.OriginalFiles++
	}
	res.Originals = dir
	return nil
}
