package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/services/dlqctl/internal/client"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/record"
)

// Progress modes of a followed drain.
const (
	progressAuto  = "auto"
	progressBar   = "bar"
	progressPlain = "plain"
	progressNone  = "none"
)

// followFlags control how a drain is followed.
type followFlags struct {
	progress string
	interval time.Duration
}

func (f *followFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.progress, "progress", progressAuto, "progress display: auto (a bar on a terminal, plain lines otherwise), bar, plain or none")
	cmd.Flags().DurationVar(&f.interval, "interval", time.Second, "how often the drain's status is polled while following")
	_ = cmd.RegisterFlagCompletionFunc("progress", fixedCompletion(progressAuto, progressBar, progressPlain, progressNone))
}

func (f *followFlags) validate() error {
	if err := oneOf("progress", f.progress, []string{progressAuto, progressBar, progressPlain, progressNone}); err != nil {
		return err
	}
	if f.interval < 10*time.Millisecond {
		return usageErrorf("--interval must be at least 10ms")
	}
	return nil
}

// drainFlags are the options of drain.
type drainFlags struct {
	req          api.DrainStartRequest
	since, until string
	rate         float64
	maxFailure   float64
	ramp         []float64
	rampHold     time.Duration
	detach       bool
	follow       followFlags
}

func (a *app) drainCommand() *cobra.Command {
	var f drainFlags
	cmd := &cobra.Command{
		Use:   "drain",
		Short: "Replay quarantined events through the validator, rate-limited, and follow the progress (drain.start)",
		Long: `Start a drain: the redriver replays the selected quarantined events back
through the full validator (never straight to the ledger), rate-limited and
bounded in concurrency, one at a time per business key in event-time order.
Only exhausted events replay by default; validation ones only when corrected
or with --include-validation; poison ones only after a release.

--dry-run prints the plan and changes nothing. Without --detach, dlqctl
follows the drain until it ends with a progress bar (plain progress lines
when stdout is not a terminal); Ctrl-C stops following, not the drain
('dlqctl drain cancel ID' does). Exit 0 when the drain completed (see the
counts for events that failed again), 1 when it was cancelled or failed.

Guards for a system just recovered: --canary N replays N events first
(heads of their keys, spread over the error codes and keys), waits for their
outcomes and pauses the drain if more than --max-failure-rate of them failed
again. --pause-window N (default 100 with a guard) pauses a running drain
when the re-failure rate over its last N outcomes crosses --max-failure-rate
(default 0.1 with a guard). A drain that sets none of the three gets the
default guard (a canary of 10 and --max-failure-rate 0.1); --no-guard turns
the guard off. A drain whose events another unfinished drain selects is
refused (DRAIN_OVERLAP, naming that drain); the dry run lists the overlaps.
--ramp 1,5,20,50 --ramp-hold 10s raises the rate in steps up to --rate.
A paused drain waits for 'dlqctl drain resume ID' or 'dlqctl drain cancel
ID'; following it ends at the pause (exit 1).`,
		Example: `  dlqctl drain --domain dscsa --dry-run
  dlqctl drain --domain dscsa --code DOWNSTREAM_UNAVAILABLE --since 2h --rate 50 --burst 5 --concurrency 8 --reason "downstream restored"
  id=$(dlqctl drain --domain fsma --detach -o json | jq -r .drain_id); dlqctl drain status "$id" --follow
  dlqctl drain --domain dscsa --canary 20 --max-failure-rate 0.05 --ramp 1,5,20,50 --ramp-hold 10s --rate 100
  dlqctl drain ls
  dlqctl drain resume drain-20250301T120000-1a2b3c4d --reason "downstream fixed"
  dlqctl drain cancel drain-20250301T120000-1a2b3c4d`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.drainStart(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.req.Filter.Domain, "domain", "", "domain: "+strings.Join(registry.Names(), ", "))
	fl.StringSliceVar(&f.req.Filter.Classes, "class", nil, "classes: exhausted (default) and/or validation (repeat or comma-separate)")
	fl.StringSliceVar(&f.req.Filter.ErrorCodes, "code", nil, "error codes of the latest failure (repeat or comma-separate)")
	fl.StringVar(&f.since, "since", "", "original first stored at or after: RFC 3339, a date, or a duration ago (2h, 7d)")
	fl.StringVar(&f.until, "until", "", "original first stored before (same forms)")
	fl.StringVar(&f.req.Filter.PartyID, "supplier", "", "one supplier or registrant")
	fl.StringSliceVar(&f.req.Filter.DLQIDs, "dlq-id", nil, "only these dlq ids (repeat or comma-separate)")
	fl.IntVar(&f.req.Filter.Limit, "limit", 0, "select at most this many events (0: no cap)")
	fl.BoolVar(&f.req.Filter.IncludeValidation, "include-validation", false, "replay validation-class events without a correction (after a schema fix)")
	fl.Float64Var(&f.rate, "rate", 0, "replays per second (default: the redriver's; 0: no ceiling)")
	fl.IntVar(&f.req.Burst, "burst", 0, "token bucket burst (default 1)")
	fl.IntVar(&f.req.MaxConcurrency, "concurrency", 0, "replays in flight at most (default: the redriver's)")
	fl.BoolVar(&f.req.IgnoreOrder, "ignore-order", false, "replay the selected events even when an earlier unresolved event of their ordering key is not selected (recorded in each chain)")
	fl.IntVar(&f.req.Canary, "canary", 0, "replay this many events first and continue only if at most --max-failure-rate of them fail again")
	fl.Float64Var(&f.maxFailure, "max-failure-rate", api.DefaultMaxFailureRate, "re-failure rate (0..1) above which the canary or the window pauses the drain")
	fl.IntVar(&f.req.PauseWindow, "pause-window", 0, fmt.Sprintf("pause when the re-failure rate over the last N outcomes crosses --max-failure-rate (default %d with a guard)", api.DefaultPauseWindow))
	fl.BoolVar(&f.req.NoGuard, "no-guard", false, "no canary and no max failure rate: the drain never pauses itself (not with --canary, --max-failure-rate or --pause-window)")
	fl.Float64SliceVar(&f.ramp, "ramp", nil, "raise the rate in these steps (replays per second, ascending), then --rate")
	fl.DurationVar(&f.rampHold, "ramp-hold", 0, "how long each --ramp step holds")
	fl.BoolVar(&f.req.DryRun, "dry-run", false, "print what the drain would do; change nothing")
	fl.BoolVar(&f.detach, "detach", false, "print the drain id and return at once")
	addActorFlag(cmd, &f.req.Actor)
	fl.StringVar(&f.req.Reason, "reason", "", "why (recorded with the drain)")
	f.follow.register(cmd)
	_ = cmd.RegisterFlagCompletionFunc("domain", fixedCompletion(registry.Names()...))
	_ = cmd.RegisterFlagCompletionFunc("class", fixedCompletion(string(record.ClassExhausted), string(record.ClassValidation)))
	_ = cmd.RegisterFlagCompletionFunc("code", fixedCompletion(codeNames()...))
	cmd.AddCommand(a.drainStatusCommand(), a.drainCancelCommand(), a.drainResumeCommand(), a.drainListCommand())
	return group(cmd)
}

func (a *app) drainStart(cmd *cobra.Command, f *drainFlags) error {
	if err := f.follow.validate(); err != nil {
		return err
	}
	if err := oneOf("domain", f.req.Filter.Domain, registry.Names()); err != nil {
		return err
	}
	for _, c := range f.req.Filter.Classes {
		if err := oneOf("class", c, []string{string(record.ClassExhausted), string(record.ClassValidation)}); err != nil {
			return err
		}
	}
	now := a.now()
	for _, t := range []struct {
		flag, v string
		dst     **time.Time
	}{{"since", f.since, &f.req.Filter.Since}, {"until", f.until, &f.req.Filter.Until}} {
		v, err := parseTime(t.v, now)
		if err != nil {
			return usageErrorf("--%s: %v", t.flag, err)
		}
		if !v.IsZero() {
			*t.dst = &v
		}
	}
	switch {
	case f.rate < 0:
		return usageErrorf("--rate must not be negative (0: no ceiling)")
	case f.req.Burst < 0:
		return usageErrorf("--burst must not be negative")
	case f.req.MaxConcurrency < 0:
		return usageErrorf("--concurrency must not be negative")
	case f.req.Filter.Limit < 0:
		return usageErrorf("--limit must not be negative")
	case f.detach && f.req.DryRun:
		return usageErrorf("--detach and --dry-run exclude each other")
	case f.req.Canary < 0:
		return usageErrorf("--canary must not be negative")
	case f.req.PauseWindow < 0:
		return usageErrorf("--pause-window must not be negative")
	case !(f.maxFailure >= 0 && f.maxFailure <= 1):
		return usageErrorf("--max-failure-rate must be in [0, 1]")
	case len(f.ramp) > 0 && f.rampHold <= 0:
		return usageErrorf("--ramp needs --ramp-hold")
	case len(f.ramp) == 0 && f.rampHold != 0:
		return usageErrorf("--ramp-hold is only for --ramp")
	case f.req.NoGuard && (f.req.Canary > 0 || f.req.PauseWindow > 0 || cmd.Flags().Changed("max-failure-rate")):
		return usageErrorf("--no-guard turns the guard off: not with --canary, --max-failure-rate or --pause-window")
	}
	if cmd.Flags().Changed("rate") {
		r := f.rate
		f.req.RatePerSecond = &r
	}
	if cmd.Flags().Changed("max-failure-rate") {
		r := f.maxFailure
		f.req.MaxFailureRate = &r
	}
	f.req.Ramp, f.req.RampHoldSeconds = f.ramp, f.rampHold.Seconds()
	c, err := a.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	var rep api.DrainStartReply
	if err := c.Request(cmd.Context(), api.DrainStart, f.req, &rep); err != nil {
		return err
	}
	if f.req.DryRun {
		if a.json() {
			return a.printJSON(rep)
		}
		a.printPlan(rep.Plan)
		return nil
	}
	if f.detach {
		if a.json() {
			return a.printJSON(rep)
		}
		fmt.Fprintln(a.io.Out, rep.DrainID)
		return nil
	}
	if !a.json() {
		textf(a.io.Out, "drain %s started; Ctrl-C stops following (the drain continues)\n", rep.DrainID)
	}
	return a.followDrain(cmd.Context(), c, rep.DrainID, f.follow)
}

func (a *app) printPlan(p *api.DrainPlan) {
	w := a.io.Out
	if p == nil {
		fmt.Fprintln(w, "no plan in the reply")
		return
	}
	t := newTable(w)
	t.row("WOULD REPLAY", strconv.Itoa(p.Selected))
	t.row("BY DOMAIN", fmtCounts(p.ByDomain))
	t.row("BY CLASS", fmtCounts(p.ByClass))
	t.row("BY CODE", fmtCounts(p.ByCode))
	t.row("ORDERING KEYS", strconv.Itoa(p.Keys))
	t.row("ALREADY COMMITTED", fmt.Sprintf("%d (of %d checked; resolved as duplicates without a replay)", p.WouldSkipDuplicate, p.Checked))
	t.row("HELD BY EARLIER", fmtHeldBy(p.HeldByEarlier, p.HeldBy))
	t.row("HELD BY A HOLD", fmtHolds(p.HeldByHold, p.Holds))
	t.row("EXCLUDED", fmtCounts(p.Excluded))
	if len(p.Canary) > 0 {
		t.row("CANARY", fmt.Sprintf("%d events first", len(p.Canary)))
	}
	if p.Guard != nil {
		t.row("GUARD", fmtGuard(*p.Guard))
	}
	if len(p.Overlaps) > 0 {
		t.row("OVERLAPS", fmtOverlaps(p.Overlaps)+" (drain.start refuses this drain: DRAIN_OVERLAP)")
	}
	t.flush()
	if len(p.Canary) > 0 {
		fmt.Fprintln(w, "\nCANARY")
		t = newTable(w, "DLQ ID", "CODE")
		for _, c := range p.Canary {
			t.row(c.DLQID, c.Code)
		}
		t.flush()
	}
	if len(p.TopKeys) > 0 {
		keys := slices.Clone(p.TopKeys)
		slices.SortStableFunc(keys, func(x, y api.KeyCount) int {
			return cmp.Or(cmp.Compare(y.Events, x.Events), cmp.Compare(x.OrderingKey, y.OrderingKey))
		})
		fmt.Fprintln(w, "\nBUSIEST KEYS")
		t = newTable(w, "EVENTS", "ORDERING KEY")
		for _, k := range keys {
			t.row(strconv.Itoa(k.Events), k.OrderingKey)
		}
		t.flush()
	}
	fmt.Fprintln(w, "dry run: nothing was published or written")
}

// terminal reports whether a drain status is final.
func terminal(status string) bool {
	return status == api.DrainCompleted || status == api.DrainCancelled || status == api.DrainFailed
}

// errStoppedFollowing: the user interrupted the follow; the drain runs on.
var errStoppedFollowing = errors.New("stopped following")

// followDrain polls a drain until it ends, rendering progress, then prints
// the final state.
func (a *app) followDrain(ctx context.Context, c *client.Client, id string, f followFlags) error {
	p := a.newProgress(f.progress, id)
	var st api.DrainState
	misses := 0
	for {
		// Each poll has its own deadline; an interrupt (ctx) stops following.
		err := c.Request(context.WithoutCancel(ctx), api.DrainStatus, api.DrainIDRequest{DrainID: id}, &st)
		switch {
		case err == nil:
			misses = 0
			p.update(st)
		case errors.Is(err, client.ErrTimeout) || errors.Is(err, client.ErrNoResponders):
			// A redriver restarting: its drains resume; keep polling a while.
			if misses++; misses > 30 {
				p.stop()
				return err
			}
		default:
			p.stop()
			return err
		}
		if err == nil && (terminal(st.Status) || st.Status == api.DrainPaused) {
			p.stop()
			break
		}
		select {
		case <-ctx.Done():
			p.stop()
			// One line, printed by report: the drain runs on.
			return &exitError{status: ExitFailed, code: "INTERRUPTED",
				err: fmt.Errorf("%w; drain %s continues: dlqctl drain status %s --follow", errStoppedFollowing, id, id)}
		case <-time.After(f.interval):
		}
	}
	if a.json() {
		if err := a.printJSON(st); err != nil {
			return err
		}
	} else {
		a.printDrainState(st)
	}
	if st.Status == api.DrainPaused {
		return failedf("drain %s paused: dlqctl drain resume %s (or cancel)", id, id)
	}
	if st.Status != api.DrainCompleted {
		return failedf("drain %s %s%s", id, st.Status, errSuffix(st.Error))
	}
	return nil
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + e
}

// newProgress picks the progress display. In JSON mode progress goes to
// stderr, so stdout holds only the JSON.
func (a *app) newProgress(mode, id string) progress {
	w, tty := a.io.Out, a.io.OutIsTTY
	if a.json() {
		w, tty = a.io.Err, a.io.ErrIsTTY
	}
	switch {
	case mode == progressNone:
		return nopProgress{}
	case mode == progressBar || (mode == progressAuto && tty):
		// The bar draws with control sequences of its own: the raw stream.
		bw := a.raw.Out
		if a.json() {
			bw = a.raw.Err
		}
		return newBarProgress(bw, id, a.io.TermWidth)
	}
	return &plainProgress{w: w, id: id}
}

func (a *app) drainStatusCommand() *cobra.Command {
	var (
		follow bool
		ff     followFlags
	)
	cmd := &cobra.Command{
		Use:   "status DRAIN-ID",
		Short: "A drain's progress (drain.status); --follow to watch it to the end",
		Args:  exactArgs(1, "DRAIN-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := ff.validate(); err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			if follow {
				return a.followDrain(cmd.Context(), c, args[0], ff)
			}
			var st api.DrainState
			if err := c.Request(cmd.Context(), api.DrainStatus, api.DrainIDRequest{DrainID: args[0]}, &st); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(st)
			}
			a.printDrainState(st)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the drain until it ends, with progress")
	ff.register(cmd)
	return cmd
}

func (a *app) drainCancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel DRAIN-ID",
		Short: "Cancel a drain (drain.cancel); replays in flight finish",
		Args:  exactArgs(1, "DRAIN-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var st api.DrainState
			if err := a.call(cmd.Context(), api.DrainCancel, api.DrainIDRequest{DrainID: args[0]}, &st); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(st)
			}
			a.printDrainState(st)
			return nil
		},
	}
}

func (a *app) drainResumeCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "resume DRAIN-ID",
		Short: "Resume a paused drain (drain.resume); it keeps its counts and replays each event at most once",
		Args:  exactArgs(1, "DRAIN-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var st api.DrainState
			if err := a.call(cmd.Context(), api.DrainResume, api.DrainResumeRequest{DrainID: args[0], Reason: reason}, &st); err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(st)
			}
			a.printDrainState(st)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the resume, in AUDIT)")
	return cmd
}

func (a *app) drainListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the drains, oldest first (drain.list)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep api.DrainListReply
			if err := a.call(cmd.Context(), api.DrainList, nil, &rep); err != nil {
				return err
			}
			if rep.Drains == nil {
				rep.Drains = []api.DrainState{}
			}
			if a.json() {
				return a.printJSON(rep)
			}
			t := newTable(a.io.Out, "DRAIN ID", "STATUS", "DONE", "SELECTED", "REPLAYED", "SKIPPED", "FAILED", "POISONED", "HELD", "STARTED", "STARTED BY")
			for _, d := range rep.Drains {
				t.row(d.DrainID, d.Status, strconv.Itoa(d.Done()), strconv.Itoa(d.Selected), strconv.Itoa(d.Committed),
					strconv.Itoa(d.SkippedDuplicate+d.Skipped), strconv.Itoa(d.ReplayFailed), strconv.Itoa(d.Poisoned),
					strconv.Itoa(d.Held), fmtTime(d.StartedAt), startedBy(d))
			}
			t.flush()
			fmt.Fprintf(a.io.Out, "%d drains\n", len(rep.Drains))
			return nil
		},
	}
}

// startedBy is the authenticated user the redriver recorded as the
// drain's starter (StartedBy; a redriver older than the trust boundary
// stored it only in the request).
func startedBy(st api.DrainState) string {
	if st.StartedBy != "" {
		return st.StartedBy
	}
	return st.Request.Actor
}

// printDrainState prints a drain's state as a two-column table.
func (a *app) printDrainState(st api.DrainState) {
	t := newTable(a.io.Out)
	t.row("DRAIN ID", st.DrainID)
	t.row("STATUS", st.Status+errSuffix(st.Error))
	t.row("PROGRESS", fmt.Sprintf("%d/%d done, %d remaining", st.Done(), st.Selected, st.Remaining))
	t.row("REPLAYED", fmt.Sprintf("%d committed (%d published)", st.Committed, st.Replayed))
	t.row("SKIPPED", fmt.Sprintf("%d already committed, %d no longer redrivable", st.SkippedDuplicate, st.Skipped))
	t.row("FAILED AGAIN", strconv.Itoa(st.ReplayFailed))
	t.row("POISONED", strconv.Itoa(st.Poisoned))
	t.row("HELD", strconv.Itoa(st.Held))
	t.row("HELD BY EARLIER", fmtHeldBy(st.HeldByEarlier, st.HeldBy))
	t.row("HELD BY A HOLD", fmtHolds(st.HeldByHold, st.Holds))
	if st.Outcome != "" {
		t.row("OUTCOME", st.Outcome)
		if st.OutcomeReason != "" {
			t.row("WHY", st.OutcomeReason)
		}
	}
	t.row("RATE", rateText(st.CurrentRate))
	t.row("PENDING", strconv.Itoa(st.Pending))
	t.row("ERRORS", strconv.Itoa(st.Errors))
	t.row("MAX IN FLIGHT", strconv.Itoa(st.MaxInFlight))
	t.row("STARTED BY", startedBy(st))
	t.row("CANCELLED BY", st.CancelledBy)
	t.row("REASON", st.Request.Reason)
	t.row("STARTED", fmtTime(st.StartedAt))
	if st.FinishedAt != nil {
		t.row("FINISHED", fmtTime(*st.FinishedAt))
	}
	t.row("OWNER", st.Owner)
	for _, ev := range st.Events {
		t.row(strings.ToUpper(ev.Action), fmtEvent(ev))
	}
	t.flush()
}

// fmtEvent renders a drain's pause, resume or cancellation: when, by whom,
// why, and the figures of a pause.
func fmtEvent(ev api.DrainEvent) string {
	s := fmtTime(ev.At) + " by " + ev.Actor
	if ev.Reason != "" {
		s += ": " + ev.Reason
	}
	if w := ev.Window; w != nil {
		s += fmt.Sprintf(" (%d of %d failed, %.0f%% > %.0f%%)", w.Failures, w.Outcomes, 100*w.Rate, 100*w.MaxRate)
	}
	if len(ev.Codes) > 0 {
		s += " " + fmtCounts(ev.Codes)
	}
	return s
}

// fmtHolds renders how many selected events legal holds hold, by hold
// and case.
func fmtHolds(n int, holds []api.HoldCount) string {
	s := strconv.Itoa(n)
	if len(holds) == 0 {
		return s
	}
	parts := make([]string, 0, len(holds))
	for _, h := range holds {
		parts = append(parts, fmt.Sprintf("%d by %s (case %s)", h.Records, h.HoldID, h.CaseID))
	}
	return s + ": " + strings.Join(parts, ", ")
}

// fmtGuard renders the failure guard a drain runs with.
func fmtGuard(g api.DrainGuard) string {
	if g.Off {
		return "off (--no-guard): the drain never pauses itself"
	}
	s := fmt.Sprintf("pause above %.0f%% re-failures over %d outcomes", 100*g.MaxFailureRate, g.PauseWindow)
	if g.Canary > 0 {
		s = fmt.Sprintf("canary of %d, ", g.Canary) + s
	}
	if g.Default {
		s += " (the default)"
	}
	return s
}

// fmtOverlaps renders the unfinished drains that select some of a plan's
// events.
func fmtOverlaps(ov []api.DrainOverlap) string {
	parts := make([]string, 0, len(ov))
	for _, o := range ov {
		parts = append(parts, fmt.Sprintf("%s (%s) selects %d", o.DrainID, o.Status, o.Records))
	}
	return strings.Join(parts, ", ")
}

// fmtHeldBy renders how many selected events unselected earlier events
// hold, and names those blockers (dlq id, why not selected, how many held).
func fmtHeldBy(n int, by []api.Blocker) string {
	s := strconv.Itoa(n)
	if len(by) == 0 {
		return s
	}
	parts := make([]string, 0, len(by))
	for _, b := range by {
		parts = append(parts, fmt.Sprintf("%s (%s) holds %d", b.DLQID, b.Reason, b.Holds))
	}
	return s + ": " + strings.Join(parts, ", ") + " (--ignore-order replays them anyway)"
}

// progress renders a followed drain.
type progress interface {
	update(st api.DrainState)
	stop()
}

type nopProgress struct{}

func (nopProgress) update(api.DrainState) {}
func (nopProgress) stop()                 {}

// plainProgress prints one line per change of the drain's counts.
type plainProgress struct {
	w    io.Writer
	id   string
	last string
}

func (p *plainProgress) update(st api.DrainState) {
	line := progressLine(st)
	if line == p.last {
		return
	}
	p.last = line
	fmt.Fprintln(p.w, line)
}

func (p *plainProgress) stop() {}

// progressLine is one plain progress line:
//
//	<id> <status> <done>/<total> <pct>% <rate>/s replayed=N skipped=N failed=N poisoned=N [held=N pending=N errors=N] eta <d>
func progressLine(st api.DrainState) string {
	pct := 0
	if st.Selected > 0 {
		pct = st.Done() * 100 / st.Selected
	}
	extra := ""
	for _, c := range []struct {
		name string
		n    int
	}{{"held", st.Held}, {"pending", st.Pending}, {"errors", st.Errors}} {
		if c.n > 0 {
			extra += fmt.Sprintf(" %s=%d", c.name, c.n)
		}
	}
	return fmt.Sprintf("%s %s %d/%d %d%% %.1f/s replayed=%d skipped=%d failed=%d poisoned=%d%s eta %s",
		st.DrainID, st.Status, st.Done(), st.Selected, pct, st.CurrentRate, st.Committed, st.SkippedDuplicate+st.Skipped,
		st.ReplayFailed, st.Poisoned, extra, eta(st))
}

// eta estimates the time left from the current rate.
func eta(st api.DrainState) string {
	if terminal(st.Status) {
		return "0s"
	}
	if st.CurrentRate <= 0 || st.Remaining <= 0 {
		return "-"
	}
	return fmtETA(time.Duration(float64(st.Remaining) / st.CurrentRate * float64(time.Second)))
}
