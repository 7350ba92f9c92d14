package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/safetext"
)

// drainPages is the drains part: the Drains list, the plan wizard (dry
// run, plan token, start), a drain's page with its live progress
// (server-sent events, every sseEvery while the session lives) and chart,
// cancel and resume.
type drainPages struct {
	web
	sessions *sessions
	// history is the drains' sampled progress (their charts).
	history history
	// sseEvery is how often a drain's progress is pushed.
	sseEvery time.Duration
}

// drainForm is the wizard's filter and controls as posted.
type drainForm struct {
	Domain, Codes, Party, Reason string
	Exhausted, Validation        bool
	IncludeValidation            bool
	IgnoreOrder                  bool
	// NoGuard turns the failure guard off (no_guard): no canary, no
	// auto-pause.
	NoGuard                  bool
	Limit                    int
	Rate, Burst, Concurrency string
	// Canary, MaxFailureRate, PauseWindow, Ramp (comma separated) and
	// RampHold are the failure guard and the ramp, as typed.
	Canary, MaxFailureRate, PauseWindow string
	Ramp, RampHold                      string
	// DLQIDs are the records selected in the Records list (bulk drain).
	DLQIDs []string
	// PlanToken binds a Start drain to the plan shown (plans.go).
	PlanToken string
}

// parseDrainForm reads the wizard's form from a GET's query or a POST's
// body.
func parseDrainForm(r *http.Request) drainForm {
	v := func(name string) string { return strings.TrimSpace(r.FormValue(name)) }
	f := drainForm{
		Domain: v("domain"), Codes: v("codes"), Party: v("party"), Reason: v("reason"),
		Exhausted: v("exhausted") == "on", Validation: v("validation") == "on",
		IncludeValidation: v("include_validation") == "on", IgnoreOrder: v("ignore_order") == "on",
		NoGuard: v("no_guard") == "on",
		Rate:    v("rate"), Burst: v("burst"), Concurrency: v("concurrency"),
		Canary: v("canary"), MaxFailureRate: v("max_failure_rate"), PauseWindow: v("pause_window"),
		Ramp: v("ramp"), RampHold: v("ramp_hold"), PlanToken: v("plan_token"),
	}
	f.Limit, _ = strconv.Atoi(v("limit"))
	_ = r.ParseForm()
	for _, id := range r.Form["dlq_id"] {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(f.DLQIDs, id) {
			f.DLQIDs = append(f.DLQIDs, id)
		}
	}
	return f
}

// Query is query, encoded (the plan page's "change the filter" link).
func (f drainForm) Query() string { return f.query().Encode() }

// query is the form as the plan page's URL query (no token, no CSRF).
func (f drainForm) query() url.Values {
	q := url.Values{}
	set := func(name, value string) {
		if value != "" {
			q.Set(name, value)
		}
	}
	on := func(name string, b bool) {
		if b {
			q.Set(name, "on")
		}
	}
	set("domain", f.Domain)
	set("codes", f.Codes)
	set("party", f.Party)
	set("reason", f.Reason)
	on("exhausted", f.Exhausted)
	on("validation", f.Validation)
	on("include_validation", f.IncludeValidation)
	on("ignore_order", f.IgnoreOrder)
	on("no_guard", f.NoGuard)
	set("rate", f.Rate)
	set("burst", f.Burst)
	set("concurrency", f.Concurrency)
	set("canary", f.Canary)
	set("max_failure_rate", f.MaxFailureRate)
	set("pause_window", f.PauseWindow)
	set("ramp", f.Ramp)
	set("ramp_hold", f.RampHold)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	for _, id := range f.DLQIDs {
		q.Add("dlq_id", id)
	}
	return q
}

// request is the drain.start request of the form.
func (f drainForm) request(dryRun bool) (api.DrainStartRequest, error) {
	req := api.DrainStartRequest{
		Filter: api.DrainFilter{Domain: f.Domain, PartyID: f.Party, Limit: max(f.Limit, 0), IncludeValidation: f.IncludeValidation, DLQIDs: f.DLQIDs},
		DryRun: dryRun, Reason: f.Reason, IgnoreOrder: f.IgnoreOrder, NoGuard: f.NoGuard,
	}
	if f.Exhausted {
		req.Filter.Classes = append(req.Filter.Classes, "exhausted")
	}
	if f.Validation {
		req.Filter.Classes = append(req.Filter.Classes, "validation")
	}
	req.Filter.ErrorCodes = strings.FieldsFunc(f.Codes, func(r rune) bool { return r == ',' || r == ' ' })
	if f.Rate != "" {
		v, err := strconv.ParseFloat(f.Rate, 64)
		if err != nil {
			return req, api.BadField("rate_per_second", "not a number")
		}
		req.RatePerSecond = &v
	}
	var err error
	if f.Burst != "" {
		if req.Burst, err = strconv.Atoi(f.Burst); err != nil {
			return req, api.BadField("burst", "not an integer")
		}
	}
	if f.Concurrency != "" {
		if req.MaxConcurrency, err = strconv.Atoi(f.Concurrency); err != nil {
			return req, api.BadField("max_concurrency", "not an integer")
		}
	}
	if f.Canary != "" {
		if req.Canary, err = strconv.Atoi(f.Canary); err != nil {
			return req, api.BadField("canary", "not an integer")
		}
	}
	if f.MaxFailureRate != "" {
		v, err := strconv.ParseFloat(f.MaxFailureRate, 64)
		if err != nil {
			return req, api.BadField("max_failure_rate", "not a number (a fraction, 0 to 1)")
		}
		req.MaxFailureRate = &v
	}
	if f.PauseWindow != "" {
		if req.PauseWindow, err = strconv.Atoi(f.PauseWindow); err != nil {
			return req, api.BadField("pause_window", "not an integer")
		}
	}
	for i, step := range strings.FieldsFunc(f.Ramp, func(r rune) bool { return r == ',' || r == ' ' }) {
		v, err := strconv.ParseFloat(step, 64)
		if err != nil {
			return req, api.BadField(fmt.Sprintf("ramp[%d]", i), "not a number")
		}
		req.Ramp = append(req.Ramp, v)
	}
	if f.RampHold != "" {
		if req.RampHoldSeconds, err = strconv.ParseFloat(f.RampHold, 64); err != nil {
			return req, api.BadField("ramp_hold_seconds", "not a number")
		}
	}
	return req, nil
}

// drainsData is the Drains page: the list and the wizard's first step.
type drainsData struct {
	Drains []api.DrainState
	Form   drainForm
}

func (p *drainPages) handleDrains(w http.ResponseWriter, r *http.Request, s *session) {
	rep, err := call[struct{}, api.DrainListReply](r.Context(), p.rq, s, api.DrainList, struct{}{})
	form := drainForm{Exhausted: true}
	if len(r.URL.Query()) > 0 { // a plan's "change the filter"
		form = parseDrainForm(r)
	}
	v := newView(s, "Drains", "drains", &drainsData{Drains: rep.Drains, Form: form})
	v.setErr(err)
	p.render(w, r, statusOf(err), "drains", v)
}

// planData is the wizard's second step: the dry run's plan and the
// controls.
type planData struct {
	Form drainForm
	Plan *api.DrainPlan
	// At is when the plan was made; Until when its Start drain goes
	// stale (planTTL).
	At, Until time.Time
}

// dryRun plans f as the person and binds a fresh plan token to it.
func (p *drainPages) dryRun(r *http.Request, s *session, f drainForm) (*planData, error) {
	d := &planData{Form: f}
	d.Form.PlanToken = ""
	req, err := f.request(true)
	if err != nil {
		return d, err
	}
	rep, err := call[api.DrainStartRequest, api.DrainStartReply](r.Context(), p.rq, s, api.DrainStart, req)
	if err != nil {
		return d, err
	}
	d.Plan, d.At = rep.Plan, p.now()
	d.Until = d.At.Add(planTTL)
	d.Form.PlanToken = s.issuePlan(req.Filter, d.At)
	return d, nil
}

// handlePlan dry-runs the wizard's filter: a GET of the plan's URL (the
// wizard's first step, "drain this group", Back and reloads run the dry
// run again), or a POST of the controls' "dry run again", answered with
// a redirect to that URL (POST/redirect/GET).
func (p *drainPages) handlePlan(w http.ResponseWriter, r *http.Request, s *session) {
	f := parseDrainForm(r)
	if r.Method == http.MethodPost {
		http.Redirect(w, r, "/drains/plan?"+f.query().Encode(), http.StatusSeeOther)
		return
	}
	d, err := p.dryRun(r, s, f)
	v := newView(s, "Drain plan", "drains", d)
	v.setErr(err)
	p.render(w, r, statusOf(err), "plan", v)
}

// handleDrainStart starts the planned drain and shows its progress. The
// plan's token must be fresh and of this filter: a stale plan (Back, a
// restored tab, a second click) starts nothing and is planned again.
func (p *drainPages) handleDrainStart(w http.ResponseWriter, r *http.Request, s *session) {
	f := parseDrainForm(r)
	req, err := f.request(false)
	if err == nil {
		if perr := s.redeemPlan(f.PlanToken, req.Filter, p.now()); perr != nil {
			p.log.Info("stale drain plan refused", "user", s.user)
			d, derr := p.dryRun(r, s, f)
			v := newView(s, "Drain plan", "drains", d)
			v.APIError = &api.Error{Code: api.ErrExpired, Message: "that plan was stale (already used, older than " + planTTL.String() + ", or of another filter): nothing was started. Here is a fresh dry run: check it and start again."}
			if derr != nil {
				v.setErr(derr)
			}
			p.render(w, r, http.StatusConflict, "plan", v)
			return
		}
	}
	var rep api.DrainStartReply
	if err == nil {
		rep, err = call[api.DrainStartRequest, api.DrainStartReply](r.Context(), p.rq, s, api.DrainStart, req)
	}
	if ap := approvalOf(err); ap != nil {
		p.log.Info("drain sent for approval", "user", s.user, "approval_id", ap.ID)
		s.setFlash(approvalNotice(ap))
		http.Redirect(w, r, "/drains", http.StatusSeeOther)
		return
	}
	if err != nil {
		d, derr := p.dryRun(r, s, f)
		if derr != nil {
			d = &planData{Form: f}
		}
		v := newView(s, "Drain plan", "drains", d)
		v.setErr(err)
		p.render(w, r, statusOf(err), "plan", v)
		return
	}
	p.log.Info("drain started", "user", s.user, "drain_id", rep.DrainID)
	http.Redirect(w, r, "/drains/"+url.PathEscape(rep.DrainID), http.StatusSeeOther)
}

// sentForApproval begins the notice of an action sent for approval.
const sentForApproval = "Sent for approval "

// approvalNotice is the notice of an action sent for approval
// (noticeApproval reads its id back for the notice's link).
func approvalNotice(ap *api.Approval) string {
	n := sentForApproval + ap.ID
	if len(ap.Reasons) > 0 {
		n += " (" + strings.Join(ap.Reasons, "; ") + ")"
	}
	return n + ": a second person must approve it before it runs."
}

// noticeApproval is the approval id an approvalNotice names, or "".
func noticeApproval(notice string) string {
	rest, ok := strings.CutPrefix(notice, sentForApproval)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, " ")
	id = strings.TrimSuffix(id, ":")
	if !api.ValidHoldID(id) { // the same token rule as an approval id
		return ""
	}
	return id
}

// drainData is a drain's page and its live fragment.
type drainData struct {
	ID     string
	State  api.DrainState
	Done   bool
	CSRF   string
	Cancel bool
	// Resume: the drain is paused and the role may resume it.
	Resume bool
	// Pause is the latest pause, when the drain is paused.
	Pause *api.DrainEvent
	// Chart is the rate and outcomes over time, as the console sampled
	// them.
	Chart chart
}

// ControlsKey is controlsKey, for the page's event stream URL.
func (d *drainData) ControlsKey() string { return d.controlsKey() }

// controlsKey says which controls the page shows: the controls are sent
// again only when it changes (a reason being typed is not wiped).
func (d *drainData) controlsKey() string {
	return fmt.Sprintf("%s/%t/%t", d.State.Status, d.Cancel, d.Resume)
}

// guardText describes the drain's failure guard and ramp ("" without).
func guardText(r api.DrainStartRequest) string {
	var parts []string
	if on, maxRate, window := r.Guarded(); on {
		parts = append(parts, fmt.Sprintf("auto-pause above %.0f%% re-failures over the last %d outcomes", maxRate*100, window))
	}
	if r.Canary > 0 {
		parts = append(parts, fmt.Sprintf("canary of %d", r.Canary))
	}
	if len(r.Ramp) > 0 {
		steps := make([]string, len(r.Ramp))
		for i, v := range r.Ramp {
			steps[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		parts = append(parts, fmt.Sprintf("ramp %s/s, %gs each", strings.Join(steps, ", "), r.RampHoldSeconds))
	}
	return strings.Join(parts, "; ")
}

// terminal reports whether a drain status is final.
func terminal(status string) bool {
	return status == api.DrainCompleted || status == api.DrainCancelled || status == api.DrainFailed
}

func (p *drainPages) drainData(r *http.Request, s *session, id string) (*drainData, error) {
	st, err := call[api.DrainIDRequest, api.DrainState](r.Context(), p.rq, s, api.DrainStatus, api.DrainIDRequest{DrainID: id})
	d := &drainData{ID: id, State: st, Done: terminal(st.Status), CSRF: s.csrf}
	v := newView(s, "", "", nil)
	d.Cancel = v.Allowed[api.DrainCancel] && err == nil && !d.Done
	if err == nil && st.Status == api.DrainPaused {
		d.Resume = v.Allowed[api.DrainResume]
		for i := len(st.Events) - 1; i >= 0; i-- {
			if st.Events[i].Action == api.ActionPaused {
				d.Pause = &st.Events[i]
				break
			}
		}
	}
	if err == nil {
		d.Chart = p.history.sample(st, p.now())
	}
	return d, err
}

func (p *drainPages) handleDrain(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := p.drainData(r, s, r.PathValue("id"))
	v := newView(s, "Drain "+d.ID, "drains", d)
	v.setErr(err)
	p.render(w, r, statusOf(err), "drain", v)
}

// sseInterval is how often a drain's progress is pushed.
const sseInterval = time.Second

// handleDrainEvents streams a drain's progress fragment as server-sent
// events ("progress"), until the drain is final ("done") or the page
// goes away.
func (p *drainPages) handleDrainEvents(w http.ResponseWriter, r *http.Request, s *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	id := r.PathValue("id")
	t := time.NewTicker(p.sseEvery)
	defer t.Stop()
	sentControls := r.URL.Query().Get("controls") // what the page shows
	for {
		if !p.sessions.alive(s.id, p.now()) {
			return // logged out or expired: the stream does not renew it
		}
		d, err := p.drainData(r, s, id)
		html, ferr := p.fragment("drain", "progress", d)
		if ferr != nil {
			p.log.Error("render progress", "err", ferr)
			return
		}
		if err != nil {
			html = "<p role=\"alert\">" + template.HTMLEscapeString(errText(err)) + "</p>"
		}
		writeEvent(w, "progress", html)
		if key := d.controlsKey(); err == nil && key != sentControls {
			controls, cerr := p.fragment("drain", "controls", d)
			if cerr != nil {
				p.log.Error("render controls", "err", cerr)
				return
			}
			writeEvent(w, "controls", controls)
			sentControls = key
		}
		if d.Done {
			writeEvent(w, "done", "")
		}
		fl.Flush()
		if d.Done {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

// writeEvent writes one server-sent event, each line of data its own
// data: line.
func writeEvent(w http.ResponseWriter, event, data string) {
	fmt.Fprintf(w, "event: %s\n", event)
	for line := range strings.SplitSeq(data, "\n") {
		fmt.Fprintf(w, "data: %s\n", line)
	}
	fmt.Fprint(w, "\n")
}

func (p *drainPages) handleDrainCancel(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	_, err := call[api.DrainIDRequest, api.DrainState](r.Context(), p.rq, s, api.DrainCancel, api.DrainIDRequest{DrainID: id})
	if err != nil {
		d, _ := p.drainData(r, s, id)
		v := newView(s, "Drain "+id, "drains", d)
		v.setErr(err)
		p.render(w, r, statusOf(err), "drain", v)
		return
	}
	p.log.Info("drain cancelled", "user", s.user, "drain_id", safetext.LogID(id))
	http.Redirect(w, r, "/drains/"+url.PathEscape(id), http.StatusSeeOther)
}

// handleDrainResume continues a paused drain, with the person's reason.
func (p *drainPages) handleDrainResume(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	var err error
	if reason == "" {
		err = api.BadField("reason", "a reason is required to resume a drain")
	} else {
		_, err = call[api.DrainResumeRequest, api.DrainState](r.Context(), p.rq, s, api.DrainResume, api.DrainResumeRequest{DrainID: id, Reason: reason})
	}
	if err != nil {
		d, _ := p.drainData(r, s, id)
		v := newView(s, "Drain "+id, "drains", d)
		v.setErr(err)
		p.render(w, r, statusOf(err), "drain", v)
		return
	}
	p.log.Info("drain resumed", "user", s.user, "drain_id", safetext.LogID(id))
	http.Redirect(w, r, "/drains/"+url.PathEscape(id), http.StatusSeeOther)
}

// drainURL is the drain plan of one failure group (the Groups page's
// "drain this group"): its domain, code, class and party prefilled, dry
// run at once. "" for a class no drain takes (poison).
func drainURL(domain, code, class, party string) string {
	q := url.Values{}
	switch class {
	case "exhausted":
		q.Set("exhausted", "on")
	case "validation":
		q.Set("validation", "on")
	default:
		return ""
	}
	for name, v := range map[string]string{"domain": domain, "codes": code, "party": party} {
		if v != "" {
			q.Set(name, v)
		}
	}
	return "/drains/plan?" + q.Encode()
}

// inFlight is how many of a drain's replays are published and wait for
// their outcome.
func inFlight(c api.DrainCounts) int {
	return max(0, c.Replayed-(c.Committed+c.SkippedDuplicate+c.ReplayFailed+c.Poisoned+c.Pending))
}

// drainStatus is a drain's status in words: a finished drain says what it
// committed and why the rest was not ("completed: nothing committed — 3
// held by a legal hold, 2 skipped"), never a bare "completed" over
// nothing.
func drainStatus(st api.DrainState) string {
	if !terminal(st.Status) {
		if n := inFlight(st.DrainCounts); n > 0 {
			return fmt.Sprintf("%s, %d in flight", st.Status, n)
		}
		return st.Status
	}
	var why []string
	add := func(n int, what string) {
		if n > 0 {
			why = append(why, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(st.SkippedDuplicate, "already committed (duplicates)")
	add(st.ReplayFailed, "failed again")
	add(st.Poisoned, "poisoned")
	add(st.HeldByHold, "held by a legal hold")
	add(st.Held-st.HeldByHold, "held behind an earlier event of their key")
	add(st.Pending, "without an outcome yet")
	add(st.Skipped, "skipped (no longer redrivable)")
	add(st.Errors, "store errors")
	if st.Status == api.DrainCompleted && st.Outcome != "" { // the redriver's own account
		words := outcomeWords(st.Outcome)
		switch {
		case st.Outcome == api.DrainOutcomeNothingCommitted && st.OutcomeReason != "":
			return st.Status + ": " + words + " — " + st.OutcomeReason
		case st.Outcome == api.DrainOutcomeNothingCommitted:
			return st.Status + ": " + words
		case st.OutcomeReason != "":
			return fmt.Sprintf("%s: %s — %d committed; %s", st.Status, words, st.Committed, st.OutcomeReason)
		}
		return fmt.Sprintf("%s: %s — %d committed%s", st.Status, words, st.Committed, dupWords(st.SkippedDuplicate))
	}
	switch {
	case st.Committed == 0 && st.Selected == 0:
		return st.Status + ": nothing was selected"
	case st.Committed == 0:
		return st.Status + ": nothing committed — " + strings.Join(why, ", ")
	case len(why) == 0:
		return fmt.Sprintf("%s: %d committed", st.Status, st.Committed)
	}
	return fmt.Sprintf("%s: %d committed; %s", st.Status, st.Committed, strings.Join(why, ", "))
}

// outcomeWords is a drain's outcome (api.DrainOutcome*) in words.
func outcomeWords(outcome string) string {
	switch outcome {
	case api.DrainOutcomeAllResolved:
		return "all resolved"
	case api.DrainOutcomePartial:
		return "partly resolved"
	case api.DrainOutcomeNothingCommitted:
		return "nothing committed"
	}
	return outcome
}

// dupWords is ", N already committed (duplicates)", or "" for none.
func dupWords(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d already committed (duplicates)", n)
}

// guardWords is a plan's failure guard in words: what pauses the drain,
// or that nothing will.
func guardWords(g *api.DrainGuard) string {
	switch {
	case g == nil:
		return "not stated by the redriver"
	case g.Off:
		return "off: the drain never pauses itself"
	}
	var parts []string
	if g.Canary > 0 {
		parts = append(parts, fmt.Sprintf("a canary of %d replayed first", g.Canary))
	}
	parts = append(parts, fmt.Sprintf("auto-pause above %s re-failures over the last %d outcomes", pctWords(g.MaxFailureRate), g.PauseWindow))
	s := strings.Join(parts, "; ")
	if g.Default {
		s += " (the default guard)"
	}
	return s
}

// pctWords is a rate in [0, 1] as a percentage ("10%", "2.5%").
func pctWords(rate float64) string {
	return strconv.FormatFloat(rate*100, 'f', -1, 64) + "%"
}
