package cli

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/shared/api"
)

func (a *app) verifyCommand() *cobra.Command {
	var (
		req        api.VerifyRequest
		anchorFile string
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Prove the quarantine is intact: every seal, chain and checkpoint (audit.verify)",
		Long: `Recompute every record's seal and every chain (index, prev_hash, forks),
report every QUARANTINE sequence without a record, and check the
checkpoints. Exit 0 when intact, 1 when any problem was found.

With --anchor (the auditor's checkpoint export file, kept outside the
store; its last line is used) and --pubkey (the auditor's signing public
key, from your own records, never from the store), the store is also
checked against that signed checkpoint: it must still hold every record
the checkpoint covered, with the same Merkle root. A rewritten record is
named, and a store deleted wholesale is reported.`,
		Example: `  dlqctl verify
  dlqctl verify --anchor /secure/audit-checkpoints.jsonl --pubkey ABC...XYZ`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (anchorFile == "") != (req.PubKey == "") {
				return usageErrorf("--anchor and --pubkey go together")
			}
			if anchorFile != "" {
				line, err := lastLine(anchorFile)
				if err != nil {
					return usageErrorf("--anchor: %v", err)
				}
				req.Anchor = line
			}
			var rep api.VerifyReply
			if err := a.call(cmd.Context(), api.AuditVerify, req, &rep); err != nil {
				return err
			}
			if a.json() {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				verdict := "INTACT"
				if !rep.OK {
					verdict = "PROBLEMS FOUND"
				}
				t := newTable(a.io.Out)
				t.row("VERIFY", verdict)
				t.row("RECORDS", strconv.FormatUint(rep.Records, 10))
				t.row("CHAINS", strconv.Itoa(rep.Chains))
				t.row("LAST SEQ", strconv.FormatUint(rep.LastSeq, 10))
				t.row("CHECKPOINTS", strconv.Itoa(rep.Checkpoints))
				t.row("NEWEST CHECKPOINT", newestCheckpoint(rep))
				if an := rep.Anchor; an != nil {
					verdict := "MATCHED"
					if !an.Matched {
						verdict = "NOT MATCHED"
					}
					t.row("ANCHOR", fmt.Sprintf("%s: %d records up to seq %d, signed %s", verdict, an.TreeSize, an.LastSeq, fmtTime(an.At)))
				}
				t.row("PROBLEMS", strconv.Itoa(rep.ProblemCount))
				t.flush()
				if len(rep.Problems) > 0 {
					fmt.Fprintln(a.io.Out)
					t = newTable(a.io.Out, "SEQ", "KIND", "DLQ ID", "IDX", "DETAIL")
					for _, p := range rep.Problems {
						t.row(strconv.FormatUint(p.Seq, 10), p.Kind, p.DLQID, strconv.Itoa(p.Index), p.Detail)
					}
					t.flush()
				}
			}
			if !rep.OK {
				return failedf("verify: %d problems", rep.ProblemCount)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&req.MaxProblems, "max-problems", 0, "list at most this many problems (default 1000; the count is always complete)")
	cmd.Flags().StringVar(&anchorFile, "anchor", "", "the auditor's checkpoint export file (its last line is the anchor)")
	cmd.Flags().StringVar(&req.PubKey, "pubkey", "", "the auditor's signing public key (nkeys), which the anchor must be signed with")
	return cmd
}

// lastLine returns the last non-empty line of the file at path.
func lastLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := ""
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			line = l
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if line == "" {
		return "", fmt.Errorf("%s holds no checkpoint", path)
	}
	return line, nil
}

// reconcileOrder is the display order of the reconcile categories.
var reconcileOrder = []string{
	api.ReconcileCommitted, api.ReconcileDuplicate, api.ReconcileOpen, api.ReconcileRedriving, api.ReconcilePoison,
	api.ReconcileResolved, api.ReconcileReplay, api.ReconcileConflict, api.ReconcileDocumentPart, api.ReconcilePending, api.ReconcileUnaccounted,
}

func (a *app) reconcileCommand() *cobra.Command {
	var (
		req      api.ReconcileRequest
		from, to string
	)
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Prove every event is accounted for: committed, duplicate, quarantined... (audit.reconcile)",
		Long: `Account for every event received on EVENTS in a time range (default: all of
it) and domain: committed, duplicate, open in quarantine (by class),
redriving, poison, resolved, a replay, a conflict (its key committed with
other content, quarantined IDEMPOTENCY_CONFLICT), pending (younger than the
grace period) or unaccounted. Then walk LEDGER back: every entry stored in
the range must name the EVENTS message it was committed from, with its
content and key; the others are listed unsourced. Exit 0 when nothing is
unaccounted and no LEDGER entry unsourced, 1 otherwise.

With --repair (operators; what to run after an incident), every
unaccounted event the validator will never deliver again is given its
outcome: the quarantiner seals its record (class exhausted, its verbatim
bytes, "no outcome after N deliveries"), the repair recorded in AUDIT as
yours. The auditor does the same on its own at each periodic
reconciliation. Exit 0 when every unaccounted event was repaired.`,
		Example: `  dlqctl reconcile
  dlqctl reconcile --domain pharmacy --since 2026-11-01 --until 2026-11-02
  dlqctl reconcile --grace 0s --ids -o json
  dlqctl reconcile --since 24h --repair`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("domain", req.Domain, domains); err != nil {
				return err
			}
			var err error
			if req.From, err = parseTime(from, a.now()); err != nil {
				return usageErrorf("--since: %v", err)
			}
			if req.To, err = parseTime(to, a.now()); err != nil {
				return usageErrorf("--until: %v", err)
			}
			if req.Grace != "" {
				if d, err := time.ParseDuration(req.Grace); err != nil || d < 0 {
					return usageErrorf("--grace: %q is not a duration: use 30s, 5m or 1h", req.Grace)
				}
			}
			var rep api.ReconcileReply
			if err := a.call(cmd.Context(), api.AuditReconcile, req, &rep); err != nil {
				return err
			}
			unaccounted := rep.Counts[api.ReconcileUnaccounted]
			if req.Repair && rep.RepairDeferred == 0 && len(rep.Repaired)+rep.RepairFound == unaccounted {
				unaccounted = 0 // every one has its record now
			}
			if a.json() {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				a.printReconcile(rep)
			}
			switch unsourced := rep.Ledger.Unsourced; {
			case unaccounted > 0 && unsourced > 0:
				return failedf("reconcile: %d events unaccounted, %d LEDGER entries unsourced", unaccounted, unsourced)
			case unaccounted > 0:
				return failedf("reconcile: %d events unaccounted", unaccounted)
			case unsourced > 0:
				return failedf("reconcile: %d LEDGER entries unsourced", unsourced)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Domain, "domain", "", "one domain (default: every domain)")
	fl.StringVar(&from, "since", "", "received at or after: RFC 3339, a date, or a duration ago (24h)")
	fl.StringVar(&to, "until", "", "received before (same forms; default now)")
	fl.StringVar(&req.Grace, "grace", "", "override the grace period (e.g. 0s, 5m)")
	fl.BoolVar(&req.IDs, "ids", false, "list the events of every category (JSON), not only the unaccounted")
	fl.IntVar(&req.MaxIDs, "max-ids", 0, "events listed per category (default 1000)")
	fl.BoolVar(&req.Repair, "repair", false, "give every unaccounted event the validator has settled its quarantine record (operators; recorded in AUDIT)")
	_ = cmd.RegisterFlagCompletionFunc("domain", fixedCompletion(domains...))
	return cmd
}

func (a *app) printReconcile(rep api.ReconcileReply) {
	w := a.io.Out
	verdict := "EVERY EVENT ACCOUNTED FOR"
	switch {
	case rep.Counts[api.ReconcileUnaccounted] > 0 && rep.Ledger.Unsourced > 0:
		verdict = "UNACCOUNTED EVENTS, UNSOURCED LEDGER ENTRIES"
	case rep.Counts[api.ReconcileUnaccounted] > 0:
		verdict = "UNACCOUNTED EVENTS"
	case rep.Ledger.Unsourced > 0:
		verdict = "UNSOURCED LEDGER ENTRIES"
	}
	dom := rep.Domain
	if dom == "" {
		dom = "all"
	}
	t := newTable(w)
	t.row("RECONCILE", verdict)
	t.row("DOMAIN", dom)
	t.row("RANGE", fmtTime(rep.From)+" .. "+fmtTime(rep.To))
	t.row("GRACE", rep.Grace)
	t.row("EVENTS", strconv.Itoa(rep.Events))
	ledger := fmt.Sprintf("%d (%d sourced, %d unsourced", rep.Ledger.Entries, rep.Ledger.Sourced, rep.Ledger.Unsourced)
	if rep.Ledger.SourceExpired > 0 {
		ledger += fmt.Sprintf(", %d source expired", rep.Ledger.SourceExpired)
	}
	if rep.Ledger.Rekeyed > 0 {
		ledger += fmt.Sprintf(", %d keyed otherwise now", rep.Ledger.Rekeyed)
	}
	t.row("LEDGER ENTRIES", ledger+")")
	t.flush()
	fmt.Fprintln(w)
	t = newTable(w, "CATEGORY", "EVENTS")
	for _, c := range reconcileOrder {
		n := strconv.Itoa(rep.Counts[c])
		if c == api.ReconcileOpen && len(rep.OpenByClass) > 0 {
			n += " (" + fmtCounts(rep.OpenByClass) + ")"
		}
		t.row(c, n)
	}
	t.flush()
	if len(rep.Unaccounted) > 0 {
		fmt.Fprintln(w, "\nUNACCOUNTED")
		t = newTable(w, "SEQ", "SUBJECT", "KEY", "DLQ ID", "RECEIVED")
		for _, e := range rep.Unaccounted {
			t.row(strconv.FormatUint(e.Seq, 10), e.Subject, e.Key, e.DLQID, fmtTime(e.Received))
		}
		t.flush()
	}
	if len(rep.Repaired) > 0 || rep.RepairDeferred > 0 {
		fmt.Fprintf(w, "\nREPAIRED (sealed now; %d found sealed meanwhile; %d left to the validator, repaired once it settles them)\n",
			rep.RepairFound, rep.RepairDeferred)
		t = newTable(w, "SEQ", "SUBJECT", "DLQ ID", "RECEIVED")
		for _, e := range rep.Repaired {
			t.row(strconv.FormatUint(e.Seq, 10), e.Subject, e.DLQID, fmtTime(e.Received))
		}
		t.flush()
	}
	if len(rep.Ledger.UnsourcedEntries) > 0 {
		fmt.Fprintln(w, "\nUNSOURCED LEDGER ENTRIES")
		t = newTable(w, "LEDGER SEQ", "SUBJECT", "SOURCE SEQ", "REASON", "STORED")
		for _, e := range rep.Ledger.UnsourcedEntries {
			t.row(strconv.FormatUint(e.Seq, 10), e.Subject, strconv.FormatUint(e.SourceSeq, 10), e.Reason, fmtTime(e.Stored))
		}
		t.flush()
	}
	if len(rep.Ledger.RekeyedEntries) > 0 {
		// Entries whose event the gate keys otherwise now: the same
		// event published again is committed again under CURRENT KEY.
		fmt.Fprintln(w, "\nLEDGER ENTRIES KEYED OTHERWISE NOW (the same event published again commits under CURRENT KEY)")
		t = newTable(w, "LEDGER SEQ", "SUBJECT", "CURRENT KEY", "REASON", "STORED")
		for _, e := range rep.Ledger.RekeyedEntries {
			t.row(strconv.FormatUint(e.Seq, 10), e.Subject, e.CurrentKey, e.Reason, fmtTime(e.Stored))
		}
		t.flush()
	}
}

func (a *app) checkpointCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoint",
		Short: "Append a tamper-evidence checkpoint of QUARANTINE to AUDIT now (audit.checkpoint)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep api.CheckpointReply
			if err := a.call(cmd.Context(), api.AuditCheckpoint, api.CheckpointRequest{}, &rep); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(rep)
			}
			state := "written"
			if rep.Unchanged {
				state = "unchanged (no record since the last one)"
			}
			t := newTable(a.io.Out)
			t.row("CHECKPOINT", state)
			t.row("AUDIT SEQ", strconv.FormatUint(rep.Seq, 10))
			t.row("COVERS", fmt.Sprintf("QUARANTINE 1..%d (%d records)", rep.Checkpoint.LastSeq, rep.Checkpoint.Count))
			t.row("DIGEST", rep.Checkpoint.Algorithm+" "+rep.Checkpoint.Digest)
			t.row("PREV", rep.Checkpoint.Prev)
			t.row("AT", fmtTime(rep.Checkpoint.At))
			t.flush()
			return nil
		},
	}
}

// newestCheckpoint describes verify's newest checkpoint: when it was
// written, how long before the verification, and what it covers.
func newestCheckpoint(rep api.VerifyReply) string {
	if rep.NewestCheckpointAt == nil {
		return "none"
	}
	age := time.Duration(rep.NewestCheckpointAgeSeconds * float64(time.Second))
	return fmt.Sprintf("%s (%s ago), covers up to seq %d", fmtTime(*rep.NewestCheckpointAt),
		strings.TrimSpace(fmtAge(age)), rep.NewestCheckpointLastSeq)
}
