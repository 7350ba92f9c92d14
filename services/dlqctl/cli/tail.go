package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/services/dlqctl/internal/client"
	"github.com/deadletter/deadletter/services/dlqctl/output"
)

// tailFields is the part of a record tail decodes: no payload, headers,
// details or attempts are ever read, so none can be printed.
type tailFields struct {
	DLQID        string    `json:"dlq_id"`
	Index        int       `json:"index"`
	Kind         string    `json:"kind"`
	Domain       string    `json:"domain"`
	Class        string    `json:"class"`
	ErrorCode    string    `json:"error_code"`
	RedriveCount int       `json:"redrive_count"`
	DrainID      string    `json:"drain_id"`
	At           time.Time `json:"quarantined_at"`
	AuditHash    string    `json:"audit_hash"`
}

func (a *app) tailCommand() *cobra.Command {
	var (
		o     client.TailOptions
		since string
		count int
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow the quarantine's lifecycle records live, PHI-free (QUARANTINE, ordered consumer)",
		Long: `Print each record written to QUARANTINE as it arrives: time, QUARANTINE
sequence, kind, dlq id, domain, class, code, failed redrives, drain and audit
hash. Never payloads, headers or details. New records only by default;
--since starts earlier, --all at the first record. Stops on Ctrl-C or after
--count records.`,
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
			return c.Tail(cmd.Context(), o, ready, func(seq uint64, data []byte) bool {
				var f tailFields
				rec := output.TailRecord{Seq: seq, Kind: "(unreadable)"}
				if err := json.Unmarshal(data, &f); err == nil {
					rec = output.TailRecord{
						Seq: seq, DLQID: f.DLQID, Index: f.Index, Kind: f.Kind, Domain: f.Domain, Class: f.Class,
						Code: f.ErrorCode, RedriveCount: f.RedriveCount, DrainID: f.DrainID, At: f.At.UTC(), Hash: f.AuditHash,
					}
				}
				if a.json() {
					_ = enc.Encode(rec)
				} else {
					fmt.Fprintf(a.io.Out, "%s seq=%d %-17s %s #%d domain=%s class=%s code=%s redrives=%d%s hash=%s\n",
						fmtTime(rec.At), rec.Seq, rec.Kind, rec.DLQID, rec.Index, rec.Domain, rec.Class, rec.Code,
						rec.RedriveCount, drainField(rec.DrainID), short(rec.Hash))
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
	_ = cmd.RegisterFlagCompletionFunc("domain", fixedCompletion(domains...))
	return cmd
}

func drainField(id string) string {
	if id == "" {
		return ""
	}
	return " drain=" + id
}
