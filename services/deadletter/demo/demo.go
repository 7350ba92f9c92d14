// Package demo tells deadletter's outage story in one command (`make demo`,
// or `deadletter demo`): against the embedded stack, with a downstream
// system of record that is down and then comes back, it publishes events,
// lets the failures be quarantined, triages them, drains them exactly once,
// corrects one, isolates a poison one, and proves that every event is
// accounted for and that the quarantine is intact. It prints what happens in
// plain words and ends with a one-screen summary.
package demo

import (
	"github.com/deadletter/deadletter/services/deadletter/downstream"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Config configures the demo.
type Config struct {
	// Events is how many events are published. Default 1000.
	Events int
	// MalformedEvery makes every n-th event malformed. Default 20 (5 %).
	MalformedEvery int
	// Rate is the drain's ceiling in replays per second. Default 400.
	Rate float64
	// DataDir is the store of the demo's own embedded server (a fresh
	// temporary directory when empty; removed afterwards).
	DataDir string
	// Out receives the story. Default os.Stdout.
	Out io.Writer
	// PasswordCost is the bcrypt cost of the people's passwords (default
	// the stack's): tests under the race detector lower it, since every
	// person's connection pays one check.
	PasswordCost int
}

func (c *Config) defaults() {
	if c.Events <= 0 {
		c.Events = 1000
	}
	if c.MalformedEvery <= 0 {
		c.MalformedEvery = 20
	}
	if c.Rate <= 0 {
		c.Rate = 400
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
}

// Summary is what the demo proved.
type Summary struct {
	Published, Valid, Malformed int
	QuarantinedValidation       int
	QuarantinedExhausted        int
	Drained                     api.DrainCounts
	DrainedBy                   string  // the drain's recorded starter
	DrainRate                   float64 // the drain's current_rate when it finished
	Committed                   uint64  // events in LEDGER
	DownstreamKeys              int     // distinct keys the downstream accepted
	DownstreamDoubles           int     // keys it received more than once after acceptance
	Corrected                   string  // outcome of the corrected redrive
	Poisoned                    string  // outcome of the last failing redrive
	Unaccounted                 int
	VerifyOK                    bool
	VerifyRecords               uint64
	Elapsed                     time.Duration
}

// Run runs the story and returns its summary; the error names the step that
// did not go as told.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	cfg.defaults()
	start := time.Now()
	out := cfg.Out
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	var sum Summary

	dir := cfg.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "deadletter-demo-")
		if err != nil {
			return sum, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	down := downstream.New(false) // down until step 4
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return sum, err
	}
	hs := &http.Server{Handler: down, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(l) }()
	defer hs.Close()

	// The auditor's signing key and checkpoint export live outside the
	// store, as they must.
	anchors, err := os.MkdirTemp("", "deadletter-demo-anchors-")
	if err != nil {
		return sum, err
	}
	defer os.RemoveAll(anchors)

	scfg := stack.DefaultConfig()
	scfg.DataDir, scfg.AnchorDir, scfg.Port, scfg.SyncAlways, scfg.MetricsAddr = dir, anchors, -1, false, ""
	scfg.Validator.DownstreamURL = "http://" + l.Addr().String() + "/capture"
	scfg.Validator.MaxDeliver = 3
	scfg.Validator.BackoffBase, scfg.Validator.BackoffMax = 50*time.Millisecond, 200*time.Millisecond
	scfg.Validator.DownstreamTimeout, scfg.Validator.ClaimLease = time.Second, 3*time.Second
	scfg.PasswordCost = cfg.PasswordCost
	st, err := stack.New(scfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return sum, err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	stopped := make(chan error, 1)
	go func() { stopped <- st.Run(sctx) }()
	defer func() { stop(); <-stopped }()
	select {
	case <-st.Ready():
	case err := <-stopped:
		stopped <- err // for the deferred wait: the stack has stopped
		return sum, fmt.Errorf("demo: stack: %w", err)
	case <-time.After(2 * time.Minute):
		return sum, errors.New("demo: stack did not start within 2 minutes")
	}
	// The story's people, each a user of its role's account with no
	// JetStream API: the publisher publishes through the import of
	// events.>, the viewer triages and proves (no payloads), the operator
	// drains, corrects and redrives (and is recorded as the actor).
	conns := map[access.Role]*client{}
	for _, r := range []access.Role{access.RolePublisher, access.RoleViewer, access.RoleOperator, access.RoleApprover} {
		// A generous connect timeout: a person's password is checked
		// against its bcrypt hash, slow on a loaded machine.
		nc, err := st.ConnectAs(access.DefaultPerson(r), nats.Name("deadletter-demo-"+access.DefaultPerson(r)), nats.Timeout(30*time.Second))
		if err != nil {
			return sum, fmt.Errorf("demo: connect as %s: %w", r, err)
		}
		defer nc.Close()
		conns[r] = &client{nc: nc}
	}
	viewer, operator, approver := conns[access.RoleViewer], conns[access.RoleOperator], conns[access.RoleApprover]
	// The people the story names (each a person of their own).
	viewerName, operatorName, approverName := access.DefaultPerson(access.RoleViewer), access.DefaultPerson(access.RoleOperator), access.DefaultPerson(access.RoleApprover)
	js, err := jetstream.New(conns[access.RolePublisher].nc)
	if err != nil {
		return sum, err
	}

	say("deadletter demo: an outage at the downstream system of record, told step by step.")
	say("NATS %s (embedded, store in %s)\n", st.ClientURL(), dir)

	// 1. Publish while the downstream is down.
	samples, err := sample.Load()
	if err != nil {
		return sum, err
	}
	var malformed []int
	for i := range cfg.Events {
		var e sample.Event
		if i%cfg.MalformedEvery == cfg.MalformedEvery-1 {
			e = samples.Invalid(len(malformed))
			malformed = append(malformed, i)
		} else if e, err = samples.Valid(i); err != nil {
			return sum, err
		}
		if _, err := js.PublishAsync(e.Subject, e.Data); err != nil {
			return sum, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return sum, errors.New("demo: publishes not acknowledged")
	}
	sum.Published, sum.Malformed = cfg.Events, len(malformed)
	sum.Valid = sum.Published - sum.Malformed
	say("1. The publisher published %d events across pharmacy, DSCSA and FSMA: %d valid, %d malformed.", sum.Published, sum.Valid, sum.Malformed)
	say("   The downstream system of record is DOWN (HTTP 503).")

	// 2. Failures are quarantined: malformed at once, the rest after their
	// retries. The auditor's groups follow QUARANTINE a moment later: wait
	// until they count every event.
	var groups api.GroupsReply
	if err := waitFor(ctx, 60*time.Second, func() (bool, error) {
		groups = api.GroupsReply{}
		if err := viewer.call(api.AuditGroups, api.GroupsRequest{OpenOnly: true, Samples: 1}, &groups); err != nil {
			return false, err
		}
		sum.QuarantinedValidation, sum.QuarantinedExhausted = 0, 0
		for _, g := range groups.Groups {
			switch record.Class(g.Class) {
			case record.ClassValidation:
				sum.QuarantinedValidation += g.Open
			case record.ClassExhausted:
				sum.QuarantinedExhausted += g.Open
			}
		}
		return sum.QuarantinedValidation+sum.QuarantinedExhausted >= sum.Published, nil
	}); err != nil {
		return sum, fmt.Errorf("demo: quarantine: %w", err)
	}
	say("2. Every failure is quarantined as a sealed record: %d malformed at once (never retried),", sum.QuarantinedValidation)
	say("   %d valid events after exhausting their retries (via the max-deliveries advisory).", sum.QuarantinedExhausted)
	say("3. What is failing, by cause (audit.groups, as the viewer %s: ids and codes, never payloads):", viewerName)
	sort.Slice(groups.Groups, func(i, j int) bool { return groups.Groups[i].Open > groups.Groups[j].Open })
	for i, g := range groups.Groups {
		if i == 8 {
			say("     ... and %d more groups", len(groups.Groups)-i)
			break
		}
		say("     %-9s %-26s %-10s %5d open", g.Domain, g.Code, g.Class, g.Open)
	}

	// 3. The downstream recovers; plan, then drain.
	down.SetUp(true)
	say("4. The downstream system of record is back UP.")
	var plan api.DrainStartReply
	if err := operator.call(api.DrainStart, api.DrainStartRequest{DryRun: true}, &plan); err != nil {
		return sum, err
	}
	if plan.Plan != nil {
		say("5. Dry run, by the operator %s, of a drain of exhausted events: %d selected (%s), %d would be skipped as duplicates, %d excluded.",
			operatorName, plan.Plan.Selected, counts(plan.Plan.ByDomain), plan.Plan.WouldSkipDuplicate, total(plan.Plan.Excluded))
	}
	rate := cfg.Rate
	var started api.DrainStartReply
	if err := operator.call(api.DrainStart, api.DrainStartRequest{RatePerSecond: &rate, Burst: 20, MaxConcurrency: 64,
		Reason: "downstream recovered"}, &started); err != nil {
		return sum, err
	}
	say("6. %s (operator) started drain %s at %.0f replays/s, every replay through the full validation gate:", operatorName, started.DrainID, rate)
	var ds api.DrainState
	last := time.Time{}
	if err := waitFor(ctx, 2*time.Minute, func() (bool, error) {
		if err := viewer.call(api.DrainStatus, api.DrainIDRequest{DrainID: started.DrainID}, &ds); err != nil {
			return false, err
		}
		if time.Since(last) > time.Second || ds.Status != api.DrainRunning && ds.Status != api.DrainSelecting {
			last = time.Now()
			say("     %4d/%-4d done  %6.0f/s  replayed %d  committed %d  skipped %d  failed %d  poisoned %d",
				ds.Done(), ds.Selected, ds.CurrentRate, ds.Replayed, ds.Committed, ds.SkippedDuplicate, ds.ReplayFailed, ds.Poisoned)
		}
		return ds.Status != api.DrainRunning && ds.Status != api.DrainSelecting, nil
	}); err != nil {
		return sum, fmt.Errorf("demo: drain: %w", err)
	}
	sum.Drained, sum.DrainedBy = ds.DrainCounts, ds.StartedBy
	say("   Recorded as started by %q: the user the server authenticated, not a name in the request.", ds.StartedBy)
	// One rate: the drain's own current_rate as it finished (its pace over
	// its last seconds of replays, the figure of the last line above), not a
	// second measure that also counts the selection and the wait for the
	// last outcomes.
	sum.DrainRate = ds.CurrentRate

	// 4. Correct one malformed event; another keeps failing until poison.
	var list api.ListReply
	if err := viewer.call(api.AuditList, api.ListRequest{Class: string(record.ClassValidation), Status: string(record.StatusOpen), Limit: 2}, &list); err != nil {
		return sum, err
	}
	if len(list.Items) < 2 {
		return sum, errors.New("demo: fewer than two malformed events to correct")
	}
	// The publisher re-sends the event, fixed, in the same domain.
	fixed, err := samples.ValidFor(list.Items[0].Domain, cfg.Events+1)
	if err != nil {
		return sum, err
	}
	var rep api.RedriveReply
	err = operator.redrive(ctx, viewer, api.RedriveRequest{DLQID: list.Items[0].DLQID, Payload: fixed.Data,
		Reason: "publisher re-sent the corrected event"}, &rep)
	if ae := api.AsError(err); ae != nil && ae.Code == api.ErrApprovalRequired && ae.Approval != nil {
		// The correction changes the event's identity: a second person
		// reviews it and signs, re-entering his password.
		id := ae.Approval.ID
		say("7. %s's correction of a malformed event (%s) changes its identity (%s): it waits for a second person (%s).",
			operatorName, list.Items[0].ErrorCode, strings.Join(ae.Approval.DiffFields, ", "), id)
		var review, signed api.ApprovalReply
		if err := approver.call(api.ApprovalGet, api.ApprovalGetRequest{ID: id}, &review); err != nil {
			return sum, err
		}
		pw := api.Password(st.Secrets().Users[access.DefaultPerson(access.RoleApprover)].Password)
		// He signs with his own key (make run's example key, beside his
		// context): the decision as the server showed it.
		const meaning = "reviewed the correction against the re-sent event"
		sd, err := signApproval(st, review.Approval, approverName, meaning)
		if err != nil {
			return sum, err
		}
		if err := approver.call(api.ApprovalApprove, api.ApprovalDecisionRequest{ID: id, Password: pw,
			Meaning: meaning, Signed: sd}, &signed); err != nil {
			return sum, err
		}
		rep.Outcome = signed.Approval.Outcome
		if rep.Outcome == api.OutcomePending {
			if err := awaitOutcome(ctx, viewer, list.Items[0].DLQID, &rep); err != nil {
				return sum, err
			}
		}
		say("   %s (approver) reviewed the identity diff (recorded in the access audit) and signed: the signature is sealed in the chain, then the correction ran as %s's: %s.", approverName, operatorName, rep.Outcome)
	} else if err != nil {
		return sum, err
	} else {
		say("7. %s (operator) corrected and redrove one malformed event (%s): %s; its original bytes stay in its chain.", operatorName, list.Items[0].ErrorCode, rep.Outcome)
	}
	sum.Corrected = rep.Outcome
	// Replayed as it is (a "correction" with another event's bytes would
	// change its identity and wait for a second person).
	for n := 1; ; n++ {
		if err := operator.redrive(ctx, viewer, api.RedriveRequest{DLQID: list.Items[1].DLQID, IncludeValidation: true,
			Reason: fmt.Sprintf("replay attempt %d", n)}, &rep); err != nil {
			return sum, err
		}
		if rep.Outcome == api.OutcomePoisoned || n == 10 {
			break
		}
	}
	sum.Poisoned = rep.Outcome
	say("8. Another one was replayed as it is %d times and failed each time: %s, isolated, never replayed again without a release.",
		rep.RedriveCount, rep.Outcome)

	// 5. Prove it.
	var rec api.ReconcileReply
	if err := viewer.call(api.AuditReconcile, api.ReconcileRequest{Grace: "0s"}, &rec); err != nil {
		return sum, err
	}
	sum.Unaccounted = rec.Counts[api.ReconcileUnaccounted]
	say("9. Reconcile (as the viewer): %d events received, %s; unaccounted: %d.", rec.Events, counts(rec.Counts), sum.Unaccounted)
	var ver api.VerifyReply
	if err := viewer.call(api.AuditVerify, api.VerifyRequest{}, &ver); err != nil {
		return sum, err
	}
	sum.VerifyOK, sum.VerifyRecords = ver.OK, ver.Records
	say("10. Verify: %d sealed records in %d chains recomputed: ok=%v.", ver.Records, ver.Chains, ver.OK)

	// People have no JetStream: LEDGER is counted with the auditor's
	// read-only service credential (this process owns the stack).
	if sum.Committed, err = ledgerCount(ctx, st); err != nil {
		return sum, err
	}
	dst := down.Status()
	sum.DownstreamKeys, sum.DownstreamDoubles = dst.Accepted, dst.Doubles
	sum.Elapsed = time.Since(start)
	printSummary(out, sum)
	return sum, sum.check()
}

func (s Summary) check() error {
	var problems []string
	if s.Unaccounted != 0 {
		problems = append(problems, fmt.Sprintf("%d unaccounted events", s.Unaccounted))
	}
	if !s.VerifyOK {
		problems = append(problems, "verify found problems")
	}
	if s.DownstreamDoubles != 0 {
		problems = append(problems, fmt.Sprintf("%d keys committed downstream twice", s.DownstreamDoubles))
	}
	if s.DrainedBy != access.DefaultPerson(access.RoleOperator) {
		problems = append(problems, fmt.Sprintf("the drain is recorded as started by %q, not the operator", s.DrainedBy))
	}
	if s.Corrected != api.OutcomeReplayed || s.Poisoned != api.OutcomePoisoned {
		problems = append(problems, "the correction or the poison step did not end as told")
	}
	if len(problems) > 0 {
		return fmt.Errorf("demo: %s", strings.Join(problems, "; "))
	}
	return nil
}

func printSummary(w io.Writer, s Summary) {
	line := strings.Repeat("─", 66)
	fmt.Fprintf(w, "\n%s\n", line)
	fmt.Fprintf(w, " deadletter demo summary                          (%.1f s)\n", s.Elapsed.Seconds())
	fmt.Fprintf(w, "%s\n", line)
	fmt.Fprintf(w, " published          %5d  (%d valid, %d malformed)\n", s.Published, s.Valid, s.Malformed)
	fmt.Fprintf(w, " quarantined        %5d  (%d validation, %d exhausted while down)\n", s.QuarantinedValidation+s.QuarantinedExhausted, s.QuarantinedValidation, s.QuarantinedExhausted)
	fmt.Fprintf(w, " drained            %5d  committed %d, skipped %d, failed %d, poisoned %d (%.0f/s), by %s\n",
		s.Drained.Done(), s.Drained.Committed, s.Drained.SkippedDuplicate, s.Drained.ReplayFailed, s.Drained.Poisoned, s.DrainRate, s.DrainedBy)
	fmt.Fprintf(w, " corrected redrive  %s\n", s.Corrected)
	fmt.Fprintf(w, " failing redrive    %s\n", s.Poisoned)
	fmt.Fprintf(w, " LEDGER             %5d  events committed\n", s.Committed)
	fmt.Fprintf(w, " downstream         %5d  distinct keys accepted, %d committed twice\n", s.DownstreamKeys, s.DownstreamDoubles)
	fmt.Fprintf(w, " unaccounted        %5d\n", s.Unaccounted)
	fmt.Fprintf(w, " verify             ok=%v over %d sealed records\n", s.VerifyOK, s.VerifyRecords)
	fmt.Fprintf(w, "%s\n", line)
}

// client calls the services' endpoints as one person (a role account's
// user: the server attaches its identity to every request).
type client struct{ nc *nats.Conn }

// call sends req as JSON to subject and decodes the reply; a service error
// comes back with its code.
// signApproval signs the approval of ap as person, with the key make run
// gave the person (stack.KeyFile), over the chain head the approval was
// asked on (decision.ForApproval).
func signApproval(st *stack.Stack, ap api.Approval, person, meaning string) (*api.SignedDecision, error) {
	kf, err := decision.ReadKeyFile(st.KeyFile(person))
	if err != nil {
		return nil, err
	}
	priv, err := kf.Open(nil)
	if err != nil {
		return nil, err
	}
	sd := decision.SignEd25519(priv, decision.ForApproval(ap, api.DecisionApprove, meaning, person, string(access.RoleApprover), time.Now()))
	return &sd, nil
}

func (c *client) call(subject string, req, reply any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := endpoint.CallRaw(ctx, c.nc, subject, b) // a service error is an *api.Error
	if err != nil {
		return fmt.Errorf("demo: %s: %w", subject, err)
	}
	return json.Unmarshal(data, reply)
}

// redrive redrives one event and waits for its outcome, read back by
// reader (audit.get without payloads).
func (c *client) redrive(ctx context.Context, reader *client, req api.RedriveRequest, rep *api.RedriveReply) error {
	if err := c.call(api.Redrive, req, rep); err != nil {
		return err
	}
	if rep.Outcome != api.OutcomePending {
		return nil
	}
	return awaitOutcome(ctx, reader, req.DLQID, rep)
}

// awaitOutcome waits for the outcome of the replay of dlqID, read back by
// reader (audit.get without payloads), into rep.
func awaitOutcome(ctx context.Context, reader *client, dlqID string, rep *api.RedriveReply) error {
	return waitFor(ctx, 30*time.Second, func() (bool, error) {
		var g api.GetReply
		if err := reader.call(api.AuditGet, api.GetRequest{DLQID: dlqID}, &g); err != nil {
			return false, err
		}
		switch g.State.LastKind {
		case record.KindReplayed, record.KindSkippedDuplicate:
			rep.Outcome = api.OutcomeReplayed
		case record.KindReplayFailed:
			rep.Outcome = api.OutcomeReplayFailed
		case record.KindPoisoned:
			rep.Outcome = api.OutcomePoisoned
		default:
			return false, nil
		}
		rep.Status, rep.RedriveCount = string(g.State.Status), g.State.RedriveCount
		return true, nil
	})
}

func waitFor(ctx context.Context, total time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(total)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ledgerCount counts LEDGER's events as the auditor (a service user that
// may read LEDGER's stream info).
func ledgerCount(ctx context.Context, st *stack.Stack) (uint64, error) {
	nc, err := st.ConnectAs(access.Auditor, nats.Name("deadletter-demo-ledger-count"), nats.Timeout(30*time.Second))
	if err != nil {
		return 0, fmt.Errorf("demo: connect as %s: %w", access.Auditor, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
