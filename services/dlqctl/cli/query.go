package cli

import (
	"github.com/deadletter/deadletter/shared/domain/registry"

	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/services/dlqctl/output"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/telemetry"
)

func (a *app) lsCommand() *cobra.Command {
	var (
		req          api.ListRequest
		since, until string
		all          bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List quarantined events, newest first (audit.list)",
		Long: `List quarantined events, newest first, one line each: dlq id, domain, class,
state, error code, failed redrives, supplier or registrant, quarantine time.
Without --all one page (--limit, default 100) is shown and the command to get
the next page is printed.`,
		Example: `  dlqctl ls --domain fsma --class exhausted --state open
  dlqctl ls --code INVALID_NDC --since 24h
  dlqctl ls --supplier BW4829137 --all -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, c := range []struct {
				flag, v string
				allowed []string
			}{
				{"domain", req.Domain, domains}, {"class", req.Class, classes}, {"state", req.Status, statuses},
			} {
				if err := oneOf(c.flag, c.v, c.allowed); err != nil {
					return err
				}
			}
			var err error
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
			t := newTable(a.io.Out, "DLQ ID", "DOMAIN", "CLASS", "STATE", "CODE", "REDRIVES", "PARTY", "QUARANTINED")
			for _, s := range out.Items {
				t.row(s.DLQID, s.Domain, s.Class, s.Status, s.ErrorCode, strconv.Itoa(s.RedriveCount), s.PartyID, fmtTime(s.QuarantinedAt))
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
	fl.StringVar(&req.Domain, "domain", "", "domain: "+strings.Join(registry.NamesAndUnknown(), ", "))
	fl.StringVar(&req.Class, "class", "", "failure class: validation, exhausted or poison")
	fl.StringVar(&req.Code, "code", "", "error code, e.g. INVALID_NDC")
	fl.StringVar(&req.Supplier, "supplier", "", "supplier id or registrant (DEA number, GLN)")
	fl.StringVar(&req.Publisher, "publisher", "", "publisher of the original event (the token the server wrote into its subject)")
	fl.StringVar(&req.Status, "state", "", "state: open, redriving, poison, resolved or invalid")
	fl.StringVar(&since, "since", "", "quarantined at or after: RFC 3339, a date, or a duration ago (24h, 7d)")
	fl.StringVar(&until, "until", "", "quarantined before (same forms as --since)")
	fl.IntVar(&req.Limit, "limit", 100, "page size (at most 1000)")
	fl.StringVar(&req.Cursor, "cursor", "", "the next-page cursor of a previous ls")
	fl.BoolVar(&all, "all", false, "follow the cursors and list every match")
	_ = cmd.RegisterFlagCompletionFunc("domain", fixedCompletion(domains...))
	_ = cmd.RegisterFlagCompletionFunc("class", fixedCompletion(classes...))
	_ = cmd.RegisterFlagCompletionFunc("state", fixedCompletion(statuses...))
	_ = cmd.RegisterFlagCompletionFunc("code", fixedCompletion(codeNames()...))
	return cmd
}

func (a *app) groupsCommand() *cobra.Command {
	var (
		req     api.GroupsRequest
		parties bool
	)
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "The triage view: quarantined events grouped by cause, most open first (audit.groups)",
		Long: `Group the quarantined events by fingerprint (domain, error code, class), most
open first: open and total counts, the age of the oldest open event, when the
last one arrived, and a sample dlq id. --parties adds, under each group, the
suppliers or registrants it concerns.`,
		Example: `  dlqctl groups
  dlqctl groups --open-only --parties --domain pharmacy`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("domain", req.Domain, domains); err != nil {
				return err
			}
			var out api.GroupsReply
			if err := a.call(cmd.Context(), api.AuditGroups, req, &out); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(out)
			}
			t := newTable(a.io.Out, "OPEN", "TOTAL", "DOMAIN", "CODE", "CLASS", "OLDEST", "LAST SEEN", "SAMPLE")
			open := 0
			for _, g := range out.Groups {
				open += g.Open
				t.row(strconv.Itoa(g.Open), strconv.Itoa(g.Total), g.Domain, g.Code, g.Class, oldest(g), fmtTime(g.LastSeen), first(g.Samples))
				if !parties {
					continue
				}
				for _, p := range g.Parties {
					party := p.Party
					if party == "" {
						party = "(unknown)"
					}
					t.row(strconv.Itoa(p.Open), strconv.Itoa(p.Total), "  └ "+party, "", "", oldest(p), fmtTime(p.LastSeen), first(p.Samples))
				}
			}
			t.flush()
			fmt.Fprintf(a.io.Out, "%d groups, %d open\n", len(out.Groups), open)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Domain, "domain", "", "domain: "+strings.Join(registry.NamesAndUnknown(), ", "))
	fl.BoolVar(&req.OpenOnly, "open-only", false, "only groups with open events")
	fl.IntVar(&req.Samples, "samples", 0, "sample dlq ids per group in JSON (default 5)")
	fl.BoolVar(&parties, "parties", false, "show each group's suppliers or registrants")
	_ = cmd.RegisterFlagCompletionFunc("domain", fixedCompletion(domains...))
	return cmd
}

// oldest is the age of a group's oldest open event ("-" without one).
func oldest(g api.Group) string {
	if g.Open == 0 {
		return "-"
	}
	return fmtAge(time.Duration(g.OldestOpenSeconds * float64(time.Second)))
}

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

func (a *app) showCommand() *cobra.Command {
	var (
		req      api.GetRequest
		traceURL string
	)
	cmd := &cobra.Command{
		Use:   "show DLQ-ID",
		Short: "One quarantined event: state, chain, attempts, trace link (audit.get)",
		Long: `Show one quarantined event: its current state, every record of its chain
(with QUARANTINE sequence, kind, class, code, who and why), the failed
attempts, the integrity problems if any, and the link to the failure's trace.
The payload (original and corrected) is shown only with --payload, which
needs --reason: the read is recorded in the access audit (dlqctl access)
before the payload is sent.`,
		Example: `  dlqctl show pharmacy_0123456789abcdef0123456789abcdef
  dlqctl show pharmacy_0123456789abcdef0123456789abcdef --payload --reason "DEA inspection 2026-11" -o json`,
		Args: exactArgs(1, "DLQ-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.DLQID = args[0]
			if req.IncludePayload && strings.TrimSpace(req.Reason) == "" {
				return usageErrorf("--payload needs --reason: every payload read is recorded with its reason")
			}
			var rep api.GetReply
			if err := a.call(cmd.Context(), api.AuditGet, req, &rep); err != nil {
				return err
			}
			out := output.Show{GetReply: rep, TraceURL: telemetry.TraceURL(traceURL, rep.State.TraceID)}
			if a.json() {
				return a.printJSON(out)
			}
			a.printShow(out, req.IncludePayload)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&req.IncludePayload, "payload", false, "include the payloads (original and corrected; needs --reason, recorded in the access audit)")
	fl.StringVar(&req.Reason, "reason", "", "why the payload is read (required with --payload)")
	fl.StringVar(&req.Domain, "domain", "", "the event's domain (optional: narrows the lookup)")
	fl.StringVar(&traceURL, "trace-url", envOr(EnvTraceURL, telemetry.DefaultTraceURLBase), "trace view base URL (env "+EnvTraceURL+")")
	return cmd
}

func (a *app) printShow(s output.Show, payload bool) {
	st := s.State
	w := a.io.Out
	t := newTable(w)
	t.row("DLQ ID", st.DLQID)
	t.row("DOMAIN", st.Domain)
	t.row("STATE", string(st.Status))
	t.row("CLASS", string(st.Class))
	t.row("CODE", string(st.ErrorCode))
	t.row("DETAIL", st.ErrorDetail)
	t.row("REDRIVES", strconv.Itoa(st.RedriveCount)+" failed")
	t.row("RESOLUTION", string(st.Resolution))
	t.row("KEY", st.IdempotencyKey)
	t.row("ORDERING KEY", st.OrderingKey)
	t.row(strings.ToUpper(registry.PartyLabel(st.Domain)), st.PartyID)
	t.row("PUBLISHER", st.Publisher)
	if st.EventTime != nil {
		t.row("EVENT TIME", fmtTime(*st.EventTime))
	}
	t.row("SOURCE", fmt.Sprintf("%s seq %d (%s)", st.SourceStream, st.SourceSeq, st.SourceSubject))
	if st.EventHashID != "" {
		t.row("EVENT HASH ID", st.EventHashID)
	}
	if d := st.Document; d != nil {
		// The document's identity is the partner's text: the table
		// escapes every cell (safetext).
		doc := d.Position() + " of document " + d.ID
		if d.Sender != "" {
			doc += " from " + d.Sender
		}
		if d.Receiver != "" {
			doc += " to " + d.Receiver
		}
		if d.Created != "" {
			doc += ", created " + d.Created
		}
		t.row("DOCUMENT", doc+" ("+d.Format+")")
		t.row("ORIGINAL BYTES", d.Original())
	}
	t.row("FIRST SEEN", fmtTime(st.FirstSeen))
	t.row("QUARANTINED", fmtTime(st.QuarantinedAt))
	t.row("LAST CHANGE", fmtTime(st.LastChange))
	t.row("CORRECTED", strconv.FormatBool(st.Corrected))
	t.row("TRACE", s.TraceURL)
	t.flush()

	fmt.Fprintln(w, "\nCHAIN")
	t = newTable(w, "IDX", "SEQ", "KIND", "CLASS", "CODE", "REDRIVES", "AT", "BY", "REASON", "HASH")
	for _, cr := range s.Records {
		var r record.Record
		if err := json.Unmarshal(cr.Record, &r); err != nil {
			t.row("?", strconv.FormatUint(cr.Seq, 10), "(unreadable)", "", "", "", "", "", "", "")
			continue
		}
		by := joinNonEmpty(" ", r.Actor, drainRef(r.DrainID))
		t.row(strconv.Itoa(r.Index), strconv.FormatUint(cr.Seq, 10), string(r.Kind), string(r.Class), string(r.ErrorCode),
			strconv.Itoa(r.RedriveCount), fmtTime(r.QuarantinedAt), by, r.Reason, short(r.AuditHash))
	}
	t.flush()

	if len(st.Attempts) > 0 {
		fmt.Fprintln(w, "\nATTEMPTS")
		t = newTable(w, "AT", "STAGE", "CODE", "DELIVERY", "REASON")
		for _, at := range st.Attempts {
			d := ""
			if at.Delivery > 0 {
				d = strconv.FormatUint(at.Delivery, 10)
			}
			t.row(fmtTime(at.At), at.Stage, string(at.Code), d, at.Reason)
		}
		t.flush()
	}
	if len(s.Problems) > 0 {
		fmt.Fprintln(w, "\nPROBLEMS")
		t = newTable(w, "IDX", "SEQ", "KIND", "DETAIL")
		for _, p := range s.Problems {
			t.row(strconv.Itoa(p.Index), strconv.FormatUint(p.Seq, 10), p.Kind, p.Detail)
		}
		t.flush()
	}
	if payload {
		if st.Corrected && st.OriginalPayload != nil {
			printPayload(w, "ORIGINAL PAYLOAD", st.OriginalPayload)
			printPayload(w, "CORRECTED PAYLOAD", st.Payload)
		} else {
			printPayload(w, "PAYLOAD", st.Payload)
		}
	}
}

func drainRef(id string) string {
	if id == "" {
		return ""
	}
	return "(" + id + ")"
}

func printPayload(w interface{ Write([]byte) (int, error) }, title string, p *record.Payload) {
	if p == nil {
		fmt.Fprintf(w, "\n%s: (not stored)\n", title)
		return
	}
	fmt.Fprintf(w, "\n%s (%d bytes, sha256 %s)\n", title, p.Size, p.SHA256)
	b, err := p.Bytes()
	if err != nil {
		textf(w, "(unreadable: %v)\n", err)
		return
	}
	if utf8.Valid(b) {
		fmt.Fprintln(w, strings.TrimRight(string(b), "\n"))
		return
	}
	fmt.Fprintf(w, "(not UTF-8, base64) %s\n", base64.StdEncoding.EncodeToString(b))
}

// exactArgs requires n positional arguments, named for the message.
func exactArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s needs %d argument(s): %s (got %d)", cmd.CommandPath(), n, strings.Join(names, " "), len(args))
		}
		return nil
	}
}
