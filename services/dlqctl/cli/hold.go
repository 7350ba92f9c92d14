package cli

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
)

// holdCommand is `dlqctl hold place|lift|list`: legal holds (served by
// the auditor).
func (a *app) holdCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hold",
		Short: "Place, lift and list legal holds (hold.place, hold.lift, hold.list)",
		Long: `A legal hold keeps events for a case: a held event is never drained,
redriven, released or resolved, and its chain is kept (copied to LEGALHOLD)
past QUARANTINE's max age. A hold on a party or a filter also holds the
events quarantined later that match it. Placing and lifting take a case id
and a reason; the records name the authenticated user (an inspector or an
operator).`,
	}
	cmd.AddCommand(a.holdPlaceCommand(), a.holdLiftCommand(), a.holdListCommand())
	return group(cmd)
}

func (a *app) holdPlaceCommand() *cobra.Command {
	var (
		req          api.HoldPlaceRequest
		filter       api.HoldFilter
		codes        string
		since, until string
		idf          idFlags
	)
	cmd := &cobra.Command{
		Use:   "place [DLQ-ID...]",
		Short: "Place one legal hold on events, a party (--party) or a filter (--domain, --lot, --ndc, --gtin, --sscc, --tlc, --id, --filter-party, --code, --since, --until)",
		Long: `Place one legal hold: on the events named (all of them or none), on a
party's events, or on every event a filter matches, now and later (events
quarantined after it that match it are held too). However many events it
holds, it is one hold: one case, one lift, one second person to approve the
lift. The identifier filters are dlqctl find's (the auditor reads them the
same way, from the events' keys, records and verbatim payloads).`,
		Example: `  dlqctl hold place pharmacy_0123456789abcdef0123456789abcdef --case CASE-2026-17 --reason "subpoena duces tecum"
  dlqctl hold place --party BW4829137 --case CASE-2026-17 --reason "litigation hold"
  dlqctl hold place --ndc 0409-4888-20 --lot 'A1&B<2' --case RECALL-2026-3 --reason "FDA recall Class II"
  dlqctl hold place --domain dscsa --sscc urn:epc:id:sscc:0614141.1234567890 --case RECALL-2026-3 --reason "pallet recalled"
  dlqctl hold place --domain dscsa --since 2026-01-01T00:00:00Z --case AUDIT-7 --reason "FDA inspection"`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1:
				req.Target.DLQID = args[0]
			case len(args) > 1:
				req.Target.DLQIDs = args
			}
			ir, err := idf.request()
			if err != nil {
				return err
			}
			if ir.Registrant != "" || ir.TransactionID != "" {
				ir.Identifiers = withID(withID(ir.Identifiers, "registrant", ir.Registrant), "transaction_id", ir.TransactionID)
			}
			filter.NDC, filter.Lot, filter.GTIN, filter.Serial = ir.NDC, ir.Lot, ir.GTIN, ir.Serial
			filter.SSCC, filter.TLC, filter.Identifiers = ir.SSCC, ir.TLC, ir.Identifiers
			if codes != "" {
				filter.ErrorCodes = strings.Split(codes, ",")
			}
			// The times people type, read as dlqctl ls and drain read them
			// (package when: RFC 3339, a date, "2h ago").
			now := a.now()
			for _, t := range []struct {
				flag, v string
				dst     **time.Time
			}{{"since", since, &filter.Since}, {"until", until, &filter.Until}} {
				at, err := parseTime(t.v, now)
				if err != nil {
					return usageErrorf("--%s: %v", t.flag, err)
				}
				if !at.IsZero() {
					*t.dst = &at
				}
			}
			if filter.Domain != "" || filter.PartyID != "" || len(filter.ErrorCodes) > 0 || filter.Since != nil || filter.Until != nil || filter.HasIdentifiers() {
				req.Target.Filter = &filter
			}
			return a.holdRequest(cmd, api.HoldPlace, req)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.CaseID, "case", "", "the case (legal matter) the hold is placed for (required)")
	fl.StringVar(&req.Reason, "reason", "", "why (required)")
	fl.StringVar(&req.Target.PartyID, "party", "", "hold every event of this party (supplier, registrant), later ones too")
	fl.StringVar(&filter.Domain, "domain", "", "filter: events of this domain")
	fl.StringVar(&filter.PartyID, "filter-party", "", "filter: events of this party")
	fl.StringVar(&codes, "code", "", "filter: events whose latest error code is one of these (comma separated)")
	fl.StringVar(&since, "since", "", "filter: events first seen at or after this time (RFC 3339)")
	fl.StringVar(&until, "until", "", "filter: events first seen before this time (RFC 3339)")
	idf.add(cmd)
	fl.BoolVar(&req.Confirm, "confirm", false, "place a party or filter hold that matches no stored event yet (refused HOLD_MATCHES_NOTHING without it)")
	return cmd
}

func (a *app) holdLiftCommand() *cobra.Command {
	var req api.HoldLiftRequest
	cmd := &cobra.Command{
		Use:     "lift HOLD-ID",
		Short:   "Lift a legal hold",
		Example: `  dlqctl hold lift hold-20260301T120000-0123456789abcdef --case CASE-2026-17 --reason "case closed"`,
		Args:    exactArgs(1, "HOLD-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.ID = args[0]
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			if req.Signed, err = a.sign(cmd.Context(), c, func(person, role string, at time.Time) api.Decision {
				return decision.ForHold(req, person, role, at)
			}); err != nil {
				return err
			}
			return a.holdRequest(cmd, api.HoldLift, req)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.CaseID, "case", "", "the hold's case (required: a check that the right hold is lifted)")
	fl.StringVar(&req.Reason, "reason", "", "why (required)")
	return cmd
}

// holdRequest sends a place or lift and prints the hold.
func (a *app) holdRequest(cmd *cobra.Command, subject string, req any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	var rep api.HoldReply
	if err := c.Request(cmd.Context(), subject, body, &rep); err != nil {
		return err
	}
	if a.json() {
		return a.printJSON(rep)
	}
	t := newTable(a.io.Out)
	holdRows(t, rep.HeldHold)
	if len(rep.Failed) > 0 {
		t.row("NOT YET", strings.Join(rep.Failed, " ")+" (the auditor retries)")
	}
	t.flush()
	return nil
}

// holdRows prints a hold.
func holdRows(t *table, h api.HeldHold) {
	t.row("HOLD", h.Hold.ID)
	t.row("CASE", h.Hold.CaseID)
	t.row("STATUS", h.Hold.Status)
	t.row("TARGET", targetText(h.Hold.Target))
	t.row("PLACED", h.Hold.PlacedBy+" at "+h.Hold.PlacedAt.Format(time.RFC3339)+": "+h.Hold.Reason)
	if h.Hold.LiftedAt != nil {
		t.row("LIFTED", h.Hold.LiftedBy+" at "+h.Hold.LiftedAt.Format(time.RFC3339)+": "+h.Hold.LiftReason)
	}
	holds := strconv.Itoa(max(h.Count, len(h.DLQIDs))) + " events " + strings.Join(h.DLQIDs, " ")
	if h.Truncated {
		holds += " ... (hold get ID lists them all)"
	}
	t.row("HOLDS", holds)
	if n := max(h.PendingCount, len(h.Pending)); n > 0 {
		t.row("PENDING", strconv.Itoa(n)+" being recorded")
	}
}

// withID returns m with name=v added when v is set.
func withID(m map[string]string, name, v string) map[string]string {
	if v == "" {
		return m
	}
	if m == nil {
		m = map[string]string{}
	}
	m[name] = v
	return m
}

// targetText describes a hold's target.
func targetText(t api.HoldTarget) string {
	switch {
	case t.DLQID != "":
		return "event " + t.DLQID
	case t.DLQIDs != nil:
		return strconv.Itoa(len(t.DLQIDs)) + " events"
	case t.PartyID != "":
		return "party " + t.PartyID
	case t.Filter != nil:
		var parts []string
		f := t.Filter
		for _, p := range [][2]string{{"domain", f.Domain}, {"party", f.PartyID}, {"codes", strings.Join(f.ErrorCodes, ",")}} {
			if p[1] != "" {
				parts = append(parts, p[0]+"="+p[1])
			}
		}
		ids := f.Search().IdentifierFilters()
		for _, k := range slices.Sorted(maps.Keys(ids)) {
			parts = append(parts, k+"="+ids[k])
		}
		if f.Since != nil {
			parts = append(parts, "since="+f.Since.Format(time.RFC3339))
		}
		if f.Until != nil {
			parts = append(parts, "until="+f.Until.Format(time.RFC3339))
		}
		return "filter " + strings.Join(parts, " ")
	}
	return ""
}

func (a *app) holdListCommand() *cobra.Command {
	var req api.HoldListRequest
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the legal holds, each with the events it holds",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := json.Marshal(req)
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			var rep api.HoldListReply
			if err := c.Request(cmd.Context(), api.HoldList, body, &rep); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(rep)
			}
			t := newTable(a.io.Out)
			t.row("HOLD", "CASE", "STATUS", "TARGET", "EVENTS", "PLACED BY")
			for _, h := range rep.Holds {
				t.row(h.Hold.ID, h.Hold.CaseID, h.Hold.Status, targetText(h.Hold.Target), strconv.Itoa(max(h.Count, len(h.DLQIDs))), h.Hold.PlacedBy)
			}
			t.flush()
			return nil
		},
	}
	cmd.Flags().BoolVar(&req.IncludeLifted, "all", false, "list the lifted holds too")
	return cmd
}
