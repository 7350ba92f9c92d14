package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/registry"
)

func (a *app) findCommand() *cobra.Command {
	var (
		req          api.ListRequest
		since, until string
		all          bool
		idf          idFlags
	)
	cmd := &cobra.Command{
		Use:   "find",
		Short: "Find quarantined events by business identifiers: NDC, lot, registrant, GTIN, serial, TLC (audit.list)",
		Long: `Find the quarantined events of a product, lot, item or transaction, the way a
recall or a suspect-product investigation starts: open and resolved events
alike, newest first, one line each with its identifiers (NDC-11 and lot,
GTIN and serial, TLC), supplier or registrant, state, class, code and
quarantine time. No payload is read or shown.

Paste identifiers as you hold them; the auditor normalizes them as the
domains do: --ndc in any FDA layout (4-4-2, 5-3-2, 5-4-1, 5-4-2, 11 digits),
--registrant a DEA number in any case, --transaction-id (alone it finds the
events whose records name it; with --registrant older records too),
--gtin a GTIN-8/12/13/14 or a whole SGTIN EPC URN or GS1 Digital Link URI
(which gives the serial too), --sscc an aggregation's container (18 digits,
an SSCC EPC URN or a Digital Link /00/ URI), --lot a pharmacy or DSCSA lot or
an FSMA traceability lot code; --id name=value any domain's search field,
those without a flag of their own included. Every filter given must match.
An event is found by the identifiers its keys and records name and those
its verbatim payload holds, whatever it failed on. --document lists every
quarantined event of one EPCIS document (a shipment) with its code;
--code narrows it to one code.`,
		Example: `  dlqctl find --ndc 0409-4888-20 --lot 'A1&B<2'
  dlqctl find --registrant BW4829137 --transaction-id INV-2025-0182
  dlqctl find --gtin 'https://id.gs1.org/01/10614141073464/21/SN%2F0042?17=270101'
  dlqctl find --gtin urn:epc:id:sgtin:0614141.107346.400
  dlqctl find --tlc 00860001000030-RL250312A --supplier SUP-00417 --all -o json
  dlqctl find --document "$DOCUMENT_SHA256" --code INVALID_EPC --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ir, err := idf.request()
			if err != nil {
				return err
			}
			req.NDC, req.Lot, req.Registrant, req.TransactionID = ir.NDC, ir.Lot, ir.Registrant, ir.TransactionID
			req.GTIN, req.Serial, req.SSCC, req.TLC, req.Identifiers = ir.GTIN, ir.Serial, ir.SSCC, ir.TLC, ir.Identifiers
			req.Document = strings.ToLower(strings.TrimSpace(req.Document))
			if !req.HasIdentifiers() && req.Supplier == "" && req.Document == "" {
				return usageErrorf("give at least one identifier: --ndc, --lot, --registrant, --gtin, --serial, --sscc, --tlc, --id, --supplier or --document")
			}
			for _, c := range []struct {
				flag, v string
				allowed []string
			}{{"domain", req.Domain, domains}, {"state", req.Status, statuses}} {
				if err := oneOf(c.flag, c.v, c.allowed); err != nil {
					return err
				}
			}
			if req.From, err = parseTime(since, a.now()); err != nil {
				return usageErrorf("--since: %v", err)
			}
			if req.To, err = parseTime(until, a.now()); err != nil {
				return usageErrorf("--until: %v", err)
			}
			if req.Limit < 0 || req.Limit > 1000 {
				return usageErrorf("--limit must be 1..1000")
			}
			out, err := a.listPages(cmd.Context(), req, all)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(out)
			}
			if d := out.Document; d != nil {
				documentRows(a, d)
			}
			t := newTable(a.io.Out, "DLQ ID", "DOMAIN", "STATE", "CLASS", "CODE", "IDENTIFIERS", "SUPPLIER", "QUARANTINED")
			for _, s := range out.Items {
				t.row(s.DLQID, s.Domain, s.Status, s.Class, s.ErrorCode, identifiersText(s.Identifiers), s.PartyID, fmtTime(s.QuarantinedAt))
			}
			t.flush()
			fmt.Fprintf(a.io.Out, "%d of %d\n", len(out.Items), out.Total)
			if out.NextCursor != "" {
				textf(a.io.Out, "next page: the same command with --cursor '%s' (or --all)\n", out.NextCursor)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	idf.add(cmd)
	fl.StringVar(&req.Supplier, "supplier", "", "supplier id or registrant (party id, exactly as listed)")
	fl.StringVar(&req.Document, "document", "", "every quarantined event of one EPCIS document: its SHA-256 (dlqctl groups --by document)")
	fl.StringVar(&req.Code, "code", "", "only events whose latest error code is this one")
	fl.StringVar(&req.Domain, "domain", "", "domain: "+strings.Join(registry.Names(), ", "))
	fl.StringVar(&req.Status, "state", "", "state: open, redriving, poison, resolved or invalid")
	fl.StringVar(&since, "since", "", "quarantined at or after: RFC 3339, a date, or a duration ago (24h, 7d)")
	fl.StringVar(&until, "until", "", "quarantined before (same forms as --since)")
	fl.IntVar(&req.Limit, "limit", 100, "page size (at most 1000)")
	fl.StringVar(&req.Cursor, "cursor", "", "the next-page cursor of a previous find")
	fl.BoolVar(&all, "all", false, "follow the cursors and list every match")
	_ = cmd.RegisterFlagCompletionFunc("domain", fixedCompletion(domains...))
	_ = cmd.RegisterFlagCompletionFunc("state", fixedCompletion(statuses...))
	return cmd
}

// listPages asks audit.list for req's page, or with all for every page
// (following the cursors).
func (a *app) listPages(ctx context.Context, req api.ListRequest, all bool) (api.ListReply, error) {
	c, err := a.connect()
	if err != nil {
		return api.ListReply{}, err
	}
	defer c.Close()
	var out api.ListReply
	for {
		var page api.ListReply
		if err := c.Request(ctx, api.AuditList, req, &page); err != nil {
			return api.ListReply{}, err
		}
		out.Items = append(out.Items, page.Items...)
		out.Total, out.NextCursor = page.Total, page.NextCursor
		if out.Document == nil {
			out.Document = page.Document // the first page's
		}
		if !all || page.NextCursor == "" {
			break
		}
		req.Cursor = page.NextCursor
	}
	if out.Items == nil {
		out.Items = []api.Summary{}
	}
	return out, nil
}

// identifiersText shows a listing's identifiers as "name=value" pairs in
// a fixed order (the table escapes the cell).
func identifiersText(ids map[string]string) string {
	order := []string{"ndc11", "lot", "gtin", "serial", "sscc", "tlc"}
	var parts []string
	for _, k := range order {
		if v, ok := ids[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		if !slices.Contains(order, k) {
			parts = append(parts, k+"="+ids[k])
		}
	}
	return strings.Join(parts, " ")
}

// documentRows prints every event of a document with its outcome
// (find --document), before its quarantined events.
func documentRows(a *app, d *api.DocumentOutcomes) {
	var counts []string
	for _, o := range slices.Sorted(maps.Keys(d.Counts)) {
		counts = append(counts, fmt.Sprintf("%s %d", o, d.Counts[o]))
	}
	textf(a.io.Out, "document %s (%d events): %s\n", d.Document.ID, d.Document.Events, strings.Join(counts, ", "))
	t := newTable(a.io.Out, "POSITION", "OUTCOME", "DLQ ID", "CODE")
	for _, ev := range d.Events {
		t.row(strconv.Itoa(ev.Index+1), ev.Outcome, ev.DLQID, ev.ErrorCode)
	}
	t.flush()
	if d.Truncated {
		textf(a.io.Out, "(the first %d events)\n", len(d.Events))
	}
	fmt.Fprintln(a.io.Out)
}
