package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/services/dlqctl/internal/client"
	"github.com/deadletter/deadletter/services/dlqctl/output"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/record"
)

func (a *app) redriveCommand() *cobra.Command {
	var (
		req     api.RedriveRequest
		payload string
	)
	cmd := &cobra.Command{
		Use:   "redrive DLQ-ID",
		Short: "Replay one quarantined event, optionally with a corrected payload (redrive)",
		Long: `Replay one quarantined event through the validator. With --payload FILE
('-': stdin) the corrected event is first stored as a new record of the chain
(byte for byte; the original stays), then replayed; a correction needs
--reason. The records name the authenticated user (an operator) as the one
who decided; the table shows who the service recorded.

Prints the outcome: replayed (committed), skipped_duplicate (already
committed), replay_failed, poisoned (failed at the redrive cap: release it
first), pending (no outcome yet; the redriver keeps watching). Exit 0 for
replayed, skipped_duplicate, resolved_elsewhere and pending; 1 otherwise.

With --dry-run nothing is written, no approval is asked for and nothing is
published: the redriver checks the redrive as it would run and dlqctl
prints what would happen: the subject the replay is checked on (the one a
corrected bizStep, CTE type or event type names), the gate's verdict there
(the code and detail the replay would be quarantined with again), the
identity fields the correction changes, and whether a second person would
have to approve it under the policy in force (and which rules ask it). A
redrive the redriver would refuse (held, poison, in flight, resolved) is
refused the same way. A corrected payload needs --reason here too (the
redriver checks the request as it would run it). Exit 0 when the gate
accepts the payload, 1 when it refuses it.`,
		Example: `  dlqctl redrive pharmacy_0123456789abcdef0123456789abcdef
  dlqctl redrive pharmacy_0123456789abcdef0123456789abcdef --payload corrected.json --reason "NDC fixed from the invoice"
  dlqctl redrive pharmacy_0123456789abcdef0123456789abcdef --payload corrected.json --reason "NDC fixed from the invoice" --dry-run`,
		Args: exactArgs(1, "DLQ-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.DLQID = args[0]
			var body []byte
			if payload != "" {
				b, err := a.readPayload(payload)
				if err != nil {
					return err
				}
				if req.Reason == "" {
					return usageErrorf("a corrected payload needs --reason")
				}
				body, err = redriveBody(req, b)
				if err != nil {
					return err
				}
			} else {
				b, err := json.Marshal(req)
				if err != nil {
					return err
				}
				body = b
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			var rep api.RedriveReply
			if err := c.Request(cmd.Context(), api.Redrive, body, &rep); err != nil {
				return err
			}
			if req.DryRun {
				return a.printRedriveCheck(rep)
			}
			actor := recordedActor(cmd.Context(), c, rep.DLQID, -1)
			if a.json() {
				if err := a.printJSON(output.Redrive{RedriveReply: rep, Actor: actor}); err != nil {
					return err
				}
			} else {
				t := newTable(a.io.Out)
				t.row("DLQ ID", rep.DLQID)
				t.row("OUTCOME", rep.Outcome)
				t.row("STATE", rep.Status)
				t.row("CLASS", rep.Class)
				t.row("REDRIVES", strconv.Itoa(rep.RedriveCount)+" failed")
				if rep.Corrected != nil {
					t.row("CORRECTED", "record "+strconv.Itoa(*rep.Corrected))
				}
				if rep.EventsSeq > 0 {
					t.row("REPLAY", "EVENTS seq "+strconv.FormatUint(rep.EventsSeq, 10))
				}
				t.row("BY", actor)
				t.flush()
			}
			switch rep.Outcome {
			case api.OutcomeReplayed, api.OutcomeSkippedDuplicate, api.OutcomeResolvedElsewhere, api.OutcomePending:
				return nil
			}
			return failedf("redrive of %s: %s", rep.DLQID, rep.Outcome)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&payload, "payload", "", "corrected event: a JSON file ('-': stdin)")
	fl.StringVar(&req.Reason, "reason", "", "why (required with --payload)")
	addActorFlag(cmd, &req.Actor)
	fl.BoolVar(&req.IncludeValidation, "include-validation", false, "replay a validation-class event without a correction")
	fl.BoolVar(&req.DryRun, "dry-run", false, "check the redrive as it would run and print what would happen; change nothing")
	return cmd
}

// printRedriveCheck prints a redrive's dry run (api.RedriveCheck): what
// the redrive would do, and fails (exit 1) when the gate refuses the
// payload. Its values are names, codes and the gate's detail: never a
// payload value beyond what the gate's detail quotes.
func (a *app) printRedriveCheck(rep api.RedriveReply) error {
	c := rep.Check
	if c == nil {
		return &exitError{status: ExitFailed, code: api.ErrUnavailable, err: fmt.Errorf("the redriver's answer to the dry run of %s holds no check (an older redriver?)", rep.DLQID)}
	}
	if a.json() {
		if err := a.printJSON(output.Redrive{RedriveReply: rep}); err != nil {
			return err
		}
	} else {
		t := newTable(a.io.Out)
		t.row("DLQ ID", rep.DLQID)
		t.row("DRY RUN", "nothing written, no approval asked for, nothing published")
		t.row("STATE", rep.Status)
		t.row("CLASS", rep.Class)
		t.row("REDRIVES", strconv.Itoa(rep.RedriveCount)+" failed")
		t.row("SUBJECT", c.Subject)
		t.row("EVENT TYPE", eventTypeText(c))
		t.row("GATE", gateText(c))
		t.row("IDENTITY", identityText(c.IdentityChanges))
		t.row("APPROVAL", approvalText(c))
		t.flush()
	}
	if !c.OK {
		return failedf("the dry run of %s: the gate refuses the payload: %s", rep.DLQID, orUnknown(c.Code))
	}
	return nil
}

// eventTypeText says the event type the replay is checked as, and the
// original's when the correction changes it.
func eventTypeText(c *api.RedriveCheck) string {
	if c.OriginalEventType != "" && c.OriginalEventType != c.EventType {
		return c.EventType + " (the original: " + c.OriginalEventType + "; the correction moves the event to this subject)"
	}
	return c.EventType
}

// gateText is the gate's verdict on the payload at the check's subject.
func gateText(c *api.RedriveCheck) string {
	what := "the payload"
	if c.Document {
		what = "the EPCIS document, event by event"
	}
	if c.OK {
		return "accepts " + what
	}
	s := "refuses " + what + ": " + orUnknown(c.Code)
	if c.Detail != "" {
		s += ": " + c.Detail
	}
	return s + " (the replay would be quarantined again)"
}

// identityText names the identity fields a correction changes.
func identityText(fields []string) string {
	if len(fields) == 0 {
		return "unchanged"
	}
	return "changes " + strings.Join(fields, ", ")
}

// approvalText says whether a second person would have to approve.
func approvalText(c *api.RedriveCheck) string {
	if !c.ApprovalRequired {
		return "not needed: the redrive would run at once"
	}
	s := "a second person must approve it first (the redrive would answer APPROVAL_REQUIRED with a pending approval)"
	if len(c.ApprovalReasons) > 0 {
		s += ": " + strings.Join(c.ApprovalReasons, "; ")
	}
	return s
}

// readPayload reads a corrected payload: a file, or stdin for "-". It must
// be one JSON value.
func (a *app) readPayload(name string) ([]byte, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(a.io.In)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, usageErrorf("--payload: %v", err)
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return nil, usageErrorf("--payload %s is not valid JSON (the redrive endpoint takes the corrected event as a JSON value)", name)
	}
	return b, nil
}

// redriveBody encodes a redrive request with payload spliced in verbatim:
// json.Marshal would compact a json.RawMessage and escape <, > and &, and
// the corrected event is stored byte for byte.
func redriveBody(req api.RedriveRequest, payload []byte) ([]byte, error) {
	req.Payload = nil
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	// b is {"dlq_id":...}: insert "payload":<bytes> after the opening brace.
	var out bytes.Buffer
	out.WriteString(`{"payload":`)
	out.Write(payload)
	out.WriteByte(',')
	out.Write(b[1:])
	return out.Bytes(), nil
}

func (a *app) releaseCommand() *cobra.Command {
	var req api.ReleaseRequest
	cmd := &cobra.Command{
		Use:   "release DLQ-ID --reason TEXT",
		Short: "A person's decision: move a poison event back to redrivable (release)",
		Long: `Release a poison event: a record stating who (the authenticated user, an
operator) and why (--reason) is appended to its chain, and the event returns
to the class it had before it was poisoned (or --class). Redrive or drain it
afterwards.`,
		Example: `  dlqctl release pharmacy_0123456789abcdef0123456789abcdef --reason "supplier confirmed the lot"`,
		Args:    exactArgs(1, "DLQ-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.DLQID = args[0]
			if req.Reason == "" {
				return usageErrorf("release needs --reason")
			}
			if err := oneOf("class", req.Class, []string{string(record.ClassExhausted), string(record.ClassValidation)}); err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			head, err := chainHead(cmd.Context(), c, req.DLQID, -1)
			if err != nil {
				return err
			}
			if req.Signed, err = a.sign(cmd.Context(), c, func(person, role string, at time.Time) api.Decision {
				return decision.ForRelease(req, head, person, role, at)
			}); err != nil {
				return err
			}
			var rep api.AppendReply
			if err := c.Request(cmd.Context(), api.Release, req, &rep); err != nil {
				return err
			}
			actor := recordedActor(cmd.Context(), c, rep.DLQID, rep.Index)
			if a.json() {
				return a.printJSON(output.Release{AppendReply: rep, Actor: actor})
			}
			textf(a.io.Out, "%s released by %s: record %d, state %s, class %s, hash %s\n",
				rep.DLQID, orUnknown(actor), rep.Index, rep.Status, rep.Class, short(rep.AuditHash))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Reason, "reason", "", "why (required)")
	addActorFlag(cmd, &req.Actor)
	fl.StringVar(&req.Class, "class", "", "class to restore: exhausted or validation (default: the one before poison)")
	_ = cmd.RegisterFlagCompletionFunc("class", fixedCompletion(string(record.ClassExhausted), string(record.ClassValidation)))
	return cmd
}

// recordedActor reads back, from the chain of dlqID (audit.get, without
// payloads), the actor the redriver recorded: that of the record at index,
// or with index -1 that of the chain's newest record naming one. The
// redriver records the authenticated caller, whatever the request's actor
// field said. It returns "" when the chain cannot be read.
func recordedActor(ctx context.Context, c *client.Client, dlqID string, index int) string {
	if dlqID == "" {
		return ""
	}
	var rep api.GetReply
	if err := c.Request(ctx, api.AuditGet, api.GetRequest{DLQID: dlqID}, &rep); err != nil {
		return ""
	}
	for i := len(rep.Records) - 1; i >= 0; i-- {
		var r struct {
			Index int    `json:"index"`
			Actor string `json:"actor"`
		}
		if json.Unmarshal(rep.Records[i].Record, &r) != nil {
			continue
		}
		if (index < 0 && r.Actor != "") || (index >= 0 && r.Index == index) {
			return r.Actor
		}
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

func (a *app) dismissCommand() *cobra.Command {
	var req api.DismissRequest
	cmd := &cobra.Command{
		Use:   "dismiss DLQ-ID --reason TEXT",
		Short: "A person's decision: close an event for good without committing it (dismiss)",
		Long: `Dismiss an open or poison event (junk, a test, an event its publisher may not
publish): a dismissed record stating who (the authenticated user, an operator)
and why (--reason) closes its chain. It is never replayed, no longer holds the
later events of its ordering key, and stays in every export. Under the default
policy a second person approves it first (dlqctl approval approve).`,
		Example: `  dlqctl dismiss pharmacy_0123456789abcdef0123456789abcdef --reason "test event of the onboarding, not a dispense"`,
		Args:    exactArgs(1, "DLQ-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.DLQID = args[0]
			if req.Reason == "" {
				return usageErrorf("dismiss needs --reason")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			head, err := chainHead(cmd.Context(), c, req.DLQID, -1)
			if err != nil {
				return err
			}
			if req.Signed, err = a.sign(cmd.Context(), c, func(person, role string, at time.Time) api.Decision {
				return decision.ForDismiss(req, head, person, role, at)
			}); err != nil {
				return err
			}
			var rep api.AppendReply
			if err := c.Request(cmd.Context(), api.Dismiss, req, &rep); err != nil {
				return err
			}
			actor := recordedActor(cmd.Context(), c, rep.DLQID, rep.Index)
			if a.json() {
				return a.printJSON(output.Release{AppendReply: rep, Actor: actor})
			}
			textf(a.io.Out, "%s dismissed by %s: record %d, state %s, hash %s\n",
				rep.DLQID, orUnknown(actor), rep.Index, rep.Status, short(rep.AuditHash))
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Reason, "reason", "", "why (required)")
	return cmd
}
