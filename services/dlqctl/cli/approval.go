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
	"golang.org/x/term"

	"github.com/deadletter/deadletter/services/dlqctl/internal/client"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/decision"
)

// approvalCommand is `dlqctl approval list|show|approve|reject`: the
// two-person approvals of the redriver (approval.*).
func (a *app) approvalCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approval",
		Short: "Two-person approvals: list, show, approve or reject a pending action (approval.*)",
		Long: `A correction that changes an event's identity, and whatever else the approval
policy names (dlqctl policy show), is not executed when an operator asks for
it: it becomes a pending approval ("pending approval <id>"). Someone else with
the approver role reviews it (show: the identity diff and the corrected
payload, recorded in the access audit) and approves it, re-entering his
password and stating what the signature means; the redriver then seals the
signature into the event's chain and executes the request as its requester.`,
	}
	cmd.AddCommand(a.approvalListCommand(), a.approvalShowCommand(), a.approvalApproveCommand(), a.approvalRejectCommand())
	return group(cmd)
}

func (a *app) approvalListCommand() *cobra.Command {
	var req api.ApprovalListRequest
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List approvals, pending first (approval.list; no values)",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("status", req.Status, []string{api.ApprovalPending, api.ApprovalApproved, api.ApprovalExecuted, api.ApprovalRejected, api.ApprovalExpired, api.ApprovalRefused}); err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			var rep api.ApprovalListReply
			if err := c.Request(cmd.Context(), api.ApprovalList, req, &rep); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(rep)
			}
			t := newTable(a.io.Out, "ID", "ACTION", "DLQ ID", "STATUS", "REQUESTER", "REQUESTED", "EXPIRES", "DECIDER", "OUTCOME")
			for _, ap := range rep.Approvals {
				t.row(ap.ID, ap.Action, dash(ap.DLQID), ap.Status, ap.Requester, fmtTime(ap.RequestedAt), fmtTime(ap.ExpiresAt), dash(ap.Decider), dash(ap.Outcome))
			}
			t.flush()
			if rep.Truncated {
				fmt.Fprintln(a.io.Out, "(more approvals match: raise --limit)")
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Status, "status", "", "only this status: pending, approved, executed, rejected or expired")
	fl.IntVar(&req.Limit, "limit", 0, "at most this many (default and maximum 1000)")
	return cmd
}

func (a *app) approvalShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show an approval: why it is needed and, to an approver, the identity diff and the request (approval.get)",
		Long: `Show an approval. An approver (and a role that reads payloads) sees what he
would sign: the identity fields the correction changes, before and after, and
the request with its corrected payload. The redriver records that read in the
access audit (dlqctl access) before it answers.`,
		Args: exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			var rep api.ApprovalReply
			if err := c.Request(cmd.Context(), api.ApprovalGet, api.ApprovalGetRequest{ID: args[0]}, &rep); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(rep)
			}
			a.printApproval(rep.Approval)
			return nil
		},
	}
}

// printApproval prints an approval as a table, its diff and its request.
func (a *app) printApproval(ap api.Approval) {
	t := newTable(a.io.Out)
	t.row("ID", ap.ID)
	t.row("ACTION", ap.Action)
	if ap.DLQID != "" {
		t.row("DLQ ID", ap.DLQID)
	}
	t.row("STATUS", ap.Status)
	t.row("REQUESTER", ap.Requester+" ("+ap.RequesterRole+") at "+fmtTime(ap.RequestedAt))
	if ap.Reason != "" {
		t.row("REASON", ap.Reason)
	}
	t.row("EXPIRES", fmtTime(ap.ExpiresAt))
	t.row("WHY", strings.Join(ap.Reasons, "; "))
	if len(ap.DiffFields) > 0 {
		t.row("CHANGES", strings.Join(ap.DiffFields, ", "))
	}
	if ap.Decider != "" && ap.DecidedAt != nil {
		t.row("DECIDED", ap.Decider+" at "+fmtTime(*ap.DecidedAt))
		t.row("MEANING", ap.Meaning)
	}
	if ap.Outcome != "" {
		t.row("OUTCOME", ap.Outcome)
	}
	if ap.ChainRecords > 0 {
		t.row("CHAIN", "signature at record "+strconv.Itoa(ap.ChainRecords))
	}
	t.flush()
	if len(ap.Diff) > 0 {
		fmt.Fprintln(a.io.Out, "\nIDENTITY DIFF")
		d := newTable(a.io.Out, "FIELD", "BEFORE", "AFTER")
		for _, c := range ap.Diff {
			d.row(c.Field, c.Before, c.After)
		}
		d.flush()
	}
	if len(ap.Request) > 0 {
		var buf bytes.Buffer
		if json.Indent(&buf, ap.Request, "", "  ") == nil {
			fmt.Fprintf(a.io.Out, "\nREQUEST\n%s\n", buf.String())
		}
	}
}

func (a *app) approvalApproveCommand() *cobra.Command {
	var (
		meaning, passwordFile string
	)
	cmd := &cobra.Command{
		Use:   "approve ID --meaning TEXT [--password-file FILE]",
		Short: "Sign a pending approval, re-entering your password, and have it executed (approval.approve)",
		Long: `Approve a pending approval as the second person. Signing re-authenticates
you (21 CFR 11.200(a)(1)): your NATS password is asked for on the terminal, or
read from --password-file (never from a flag or the command line). --meaning
states what the signature means ("reviewed the correction against the
invoice"); requester, approver, times and meaning are sealed into the event's
chain, then the request is executed as its requester. Approving your own
request is refused (SELF_APPROVAL).`,
		Example: `  dlqctl approval approve appr-20260301T120000-0123456789abcdef --meaning "reviewed the correction against the invoice"`,
		Args:    exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(meaning) == "" {
				return usageErrorf("approve needs --meaning: what the signature means")
			}
			pw, err := a.signingPassword(passwordFile)
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			sd, err := a.signApproval(cmd.Context(), c, args[0], api.DecisionApprove, meaning)
			if err != nil {
				return err
			}
			var rep api.ApprovalReply
			if err := c.Request(cmd.Context(), api.ApprovalApprove, api.ApprovalDecisionRequest{ID: args[0], Meaning: meaning, Password: pw, Signed: sd}, &rep); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(rep)
			}
			a.printApproval(rep.Approval)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&meaning, "meaning", "", "what the signature means (required)")
	fl.StringVar(&passwordFile, "password-file", "", "file holding your password (default: asked on the terminal)")
	return cmd
}

// signApproval signs the decision (approve or reject) on approval id as
// the server shows it (approval.get), with the chain head the approval
// was asked on (its ChainHead: checked here against the record at index
// ChainRecords-1 of audit.get, so that a person never signs a head the
// chain does not have).
func (a *app) signApproval(ctx context.Context, c *client.Client, id, action, meaning string) (*api.SignedDecision, error) {
	var got api.ApprovalReply
	if err := c.Request(ctx, api.ApprovalGet, api.ApprovalGetRequest{ID: id}, &got); err != nil {
		return nil, err
	}
	ap := got.Approval
	head := ""
	if ap.DLQID != "" && ap.ChainRecords > 0 {
		var err error
		if head, err = chainHead(ctx, c, ap.DLQID, ap.ChainRecords-1); err != nil {
			return nil, err
		}
		if ap.ChainHead != "" && ap.ChainHead != head {
			return nil, fmt.Errorf("approval %s names chain head %s, but the record it was asked on is %s: not signed", id, ap.ChainHead, head)
		}
	}
	return a.sign(ctx, c, func(person, role string, at time.Time) api.Decision {
		return decision.ForApproval(ap, action, meaning, person, role, at)
	})
}

// signingPassword reads the signer's password from file, else from the
// terminal without echo. It is never taken from a flag.
func (a *app) signingPassword(file string) (api.Password, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usageErrorf("--password-file: %v", err)
		}
		pw := strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			return "", usageErrorf("--password-file %s is empty", file)
		}
		return api.Password(pw), nil
	}
	f, ok := a.io.In.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", usageErrorf("signing asks for your password on a terminal; without one, give --password-file")
	}
	fmt.Fprint(a.io.Err, "Password (re-authentication for the signature): ")
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(a.io.Err)
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	if len(b) == 0 {
		return "", usageErrorf("no password given")
	}
	return api.Password(b), nil
}

func (a *app) approvalRejectCommand() *cobra.Command {
	var meaning string
	cmd := &cobra.Command{
		Use:   "reject ID --meaning TEXT",
		Short: "Reject a pending approval: it is never executed (approval.reject)",
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(meaning) == "" {
				return usageErrorf("reject needs --meaning: why")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			sd, err := a.signApproval(cmd.Context(), c, args[0], api.DecisionReject, meaning)
			if err != nil {
				return err
			}
			var rep api.ApprovalReply
			if err := c.Request(cmd.Context(), api.ApprovalReject, api.ApprovalDecisionRequest{ID: args[0], Meaning: meaning, Signed: sd}, &rep); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(rep)
			}
			a.printApproval(rep.Approval)
			return nil
		},
	}
	cmd.Flags().StringVar(&meaning, "meaning", "", "why it is rejected (required)")
	return cmd
}

// policyCommand is `dlqctl policy show|set` (policy.get, policy.set).
func (a *app) policyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "The approval policy: which actions need a second person (policy.get, policy.set)",
	}
	cmd.AddCommand(a.policyShowCommand(), a.policySetCommand())
	return group(cmd)
}

func (a *app) policyShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "show",
		Aliases: []string{"get"},
		Short:   "Show the approval policy in force, each setting in words (policy.get)",
		Long: `Show the approval policy in force: each setting, its value and what it
means, which actions wait for a second person (an approver) and how long
such a request stays open, and who set the policy and when (never: the
default policy). -o json prints policy.get's reply, the "policy" of which
'dlqctl policy set --file' takes.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			var rep api.PolicyReply
			if err := c.Request(cmd.Context(), api.PolicyGet, struct{}{}, &rep); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(rep)
			}
			a.printPolicy(rep)
			return nil
		},
	}
}

// printPolicy writes the policy as a table of its settings, each with
// its value and what it means (the semantics of shared/approval.Needs).
func (a *app) printPolicy(rep api.PolicyReply) {
	t := newTable(a.io.Out, "SETTING", "VALUE", "WHAT IT MEANS")
	for _, s := range policyWords(rep.Policy) {
		t.row(s.name, s.value, s.meaning)
	}
	switch {
	case rep.Default:
		t.row("SET", "never: the default policy")
	case rep.SetAt != nil:
		t.row("SET", rep.SetBy+" at "+fmtTime(*rep.SetAt)+", AUDIT seq "+strconv.FormatUint(rep.Revision, 10))
	}
	t.flush()
}

// policySetting is one setting of a policy in words.
type policySetting struct{ name, value, meaning string }

// policyWords says what each setting of p means, in the order of
// 'dlqctl policy set's flags. A correction that changes an event's
// identity needs a second person whatever the policy says.
func policyWords(p api.Policy) []policySetting {
	needs := func(on bool, action string) string {
		if on {
			return action + " needs a second person"
		}
		return action + " needs no second person"
	}
	var corrections string
	switch p.Corrections {
	case approval.CorrectionsAll:
		corrections = "every correction needs a second person"
	case approval.CorrectionsIdentity:
		corrections = "a correction needs a second person only when it changes the event's identity (its key, ordering key, domain or event type)"
	case approval.CorrectionsControlled:
		corrections = "a correction needs a second person when it changes the event's identity (its key, ordering key, domain or event type), and for a pharmacy event whenever its record or the correction names a DEA schedule (II–V) or it changes the quantity, NDC, lot or registrant"
	default:
		corrections = "a value this dlqctl does not know: a correction that changes the event's identity needs a second person; see -o json"
	}
	drainMax := "no drain needs a second person for its size"
	if p.DrainMaxSelected > 0 {
		drainMax = "a drain selecting more than " + strconv.Itoa(p.DrainMaxSelected) + " events needs a second person"
	}
	return []policySetting{
		{"CORRECTIONS", p.Corrections, corrections},
		{"RELEASE POISON", strconv.FormatBool(p.ReleasePoison), needs(p.ReleasePoison, "releasing a poison event")},
		{"DRAIN MAX SELECTED", strconv.Itoa(p.DrainMaxSelected), drainMax},
		{"DRAIN VALIDATION", strconv.FormatBool(p.DrainValidation), needs(p.DrainValidation, "a drain including validation-class events")},
		{"IGNORE ORDER", strconv.FormatBool(p.IgnoreOrder), needs(p.IgnoreOrder, "a drain that waives per-key order (--ignore-order)")},
		{"HOLD LIFT", strconv.FormatBool(p.HoldLift), needs(p.HoldLift, "lifting a legal hold")},
		{"DISMISS WITHOUT APPROVAL", strconv.FormatBool(p.DismissWithoutApproval), needs(!p.DismissWithoutApproval, "dismissing an event")},
		{"PENDING TTL", p.PendingTTL, "a request waiting for a second person expires after " + dash(p.PendingTTL) + " unless approved or rejected"},
	}
}

func (a *app) policySetCommand() *cobra.Command {
	var (
		reason, file string
		p            api.Policy
	)
	cmd := &cobra.Command{
		Use:   "set --reason TEXT [--file POLICY.json | flags]",
		Short: "Change the approval policy (policy role; recorded in AUDIT) (policy.set)",
		Long: `Change the approval policy: the policy in force with the flags given changed,
or the policy of --file (JSON, as 'dlqctl policy show -o json' prints its
"policy"). The change is conditional on the policy read first (a concurrent
change is CONFLICT) and recorded in AUDIT with who, when and --reason.`,
		Example: `  dlqctl policy set --drain-max-selected 1000 --pending-ttl 24h --reason "CAPA-112: large drains need a second person"`,
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErrorf("policy set needs --reason")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			var cur api.PolicyReply
			if err := c.Request(cmd.Context(), api.PolicyGet, struct{}{}, &cur); err != nil {
				return err
			}
			next := cur.Policy
			if file != "" {
				b, err := readFileOrStdin(a.io.In, file)
				if err != nil {
					return usageErrorf("--file: %v", err)
				}
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&next); err != nil {
					return usageErrorf("--file %s is not a policy: %v", file, err)
				}
			}
			fl := cmd.Flags()
			for _, f := range []struct {
				name string
				set  func()
			}{
				{"corrections", func() { next.Corrections = p.Corrections }},
				{"release-poison", func() { next.ReleasePoison = p.ReleasePoison }},
				{"drain-max-selected", func() { next.DrainMaxSelected = p.DrainMaxSelected }},
				{"drain-validation", func() { next.DrainValidation = p.DrainValidation }},
				{"ignore-order", func() { next.IgnoreOrder = p.IgnoreOrder }},
				{"hold-lift", func() { next.HoldLift = p.HoldLift }},
				{"dismiss-without-approval", func() { next.DismissWithoutApproval = p.DismissWithoutApproval }},
				{"pending-ttl", func() { next.PendingTTL = p.PendingTTL }},
			} {
				if fl.Changed(f.name) {
					f.set()
				}
			}
			rev := cur.Revision
			var rep api.PolicyReply
			if err := c.Request(cmd.Context(), api.PolicySet, api.PolicySetRequest{Policy: next, Reason: reason, ExpectedRevision: &rev}, &rep); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(rep)
			}
			a.printPolicy(rep)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&reason, "reason", "", "why the policy changes (required)")
	fl.StringVar(&file, "file", "", "the whole policy as JSON ('-': stdin)")
	fl.StringVar(&p.Corrections, "corrections", "", "identity, controlled or all")
	fl.BoolVar(&p.ReleasePoison, "release-poison", false, "every release of a poison event needs approval")
	fl.IntVar(&p.DrainMaxSelected, "drain-max-selected", 0, "a drain selecting more events needs approval (0: no limit)")
	fl.BoolVar(&p.DrainValidation, "drain-validation", false, "a drain including validation-class events needs approval")
	fl.BoolVar(&p.IgnoreOrder, "ignore-order", false, "a drain with ignore_order needs approval")
	fl.BoolVar(&p.HoldLift, "hold-lift", false, "lifting a legal hold needs approval")
	fl.BoolVar(&p.DismissWithoutApproval, "dismiss-without-approval", false, "a dismissal needs no second person (default: it does)")
	fl.StringVar(&p.PendingTTL, "pending-ttl", "", "how long a pending approval stays open, 1m to 720h (e.g. 30m, 24h)")
	return cmd
}

// readFileOrStdin reads name, or in for "-".
func readFileOrStdin(in io.Reader, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(in)
	}
	return os.ReadFile(name)
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
