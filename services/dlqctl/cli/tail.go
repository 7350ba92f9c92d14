package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/services/dlqctl/internal/client"
	"github.com/deadletter/deadletter/services/dlqctl/output"
	"github.com/deadletter/deadletter/shared/api"
)

func (a *app) tailCommand() *cobra.Command {
	var (
		o     client.TailOptions
		since string
		count int
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow the quarantine's lifecycle records live, PHI-free (audit.list, records after a sequence)",
		Long: `Print each record written to QUARANTINE as it arrives: time, QUARANTINE
sequence, kind, dlq id, domain, class, code, failed redrives, drain, the
person whose decision it records, and audit hash. Never payloads, headers or
details: the auditor's records list (audit.list with records and after_seq)
leaves them out, so any role that may call audit.list, a viewer included, can
tail. dlqctl asks for the records after the last sequence it printed every
--interval. New records only by default; --since starts earlier, --all at the
first record. Stops on Ctrl-C or after --count records.`,
		Example: `  dlqctl tail
  dlqctl tail --domain pharmacy --since 1h
  dlqctl tail --all --count 100 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("domain", o.Domain, domains); err != nil {
				return err
			}
			var err error
			if o.Since, err = parseTime(since, a.now()); err != nil {
				return usageErrorf("--since: %v", err)
			}
			if count < 0 {
				return usageErrorf("--count must not be negative")
			}
			if o.Interval < 10*time.Millisecond {
				return usageErrorf("--interval must be at least 10ms")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			enc := json.NewEncoder(a.io.Out)
			n := 0
			ready := func() {
				fmt.Fprintln(a.io.Err, "dlqctl: following QUARANTINE (Ctrl-C to stop)")
			}
			return c.Tail(cmd.Context(), o, ready, func(r api.RecordSummary) bool {
				rec := output.TailRecord{
					Seq: r.Seq, DLQID: r.DLQID, Index: r.Index, Kind: r.Kind, Domain: r.Domain, Class: r.Class,
					Code: r.ErrorCode, RedriveCount: r.RedriveCount, DrainID: r.DrainID, Actor: r.Actor,
					At: r.QuarantinedAt.UTC(), Hash: r.AuditHash,
				}
				if a.json() {
					_ = enc.Encode(rec)
				} else {
					textf(a.io.Out, "%s seq=%d %-17s %s #%d domain=%s class=%s code=%s redrives=%d%s%s hash=%s\n",
						fmtTime(rec.At), rec.Seq, rec.Kind, rec.DLQID, rec.Index, rec.Domain, rec.Class, rec.Code,
						rec.RedriveCount, drainField(rec.DrainID), actorField(rec.Actor), short(rec.Hash))
				}
				n++
				return count == 0 || n < count
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Domain, "domain", "", "one domain")
	fl.StringVar(&o.DLQID, "dlq-id", "", "one chain")
	fl.StringVar(&since, "since", "", "start at records written since: RFC 3339, a date, or a duration ago (1h)")
	fl.BoolVar(&o.All, "all", false, "start at the first record")
	fl.IntVar(&count, "count", 0, "stop after this many records (0: never)")
	fl.DurationVar(&o.Interval, "interval", time.Second, "how often the auditor is asked for new records once caught up")
	_ = cmd.RegisterFlagCompletionFunc("domain", fixedCompletion(domains...))
	return cmd
}

func actorField(actor string) string {
	if actor == "" {
		return ""
	}
	return " by=" + actor
}

func drainField(id string) string {
	if id == "" {
		return ""
	}
	return " drain=" + id
}
