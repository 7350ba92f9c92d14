package console

import (
	"net/http"
	"strconv"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
)

// policyData is the Policy page: the approval policy in force
// (policy.get), each setting with what it means for a DEA registrant.
type policyData struct {
	Reply    api.PolicyReply
	Settings []policySetting
}

// policySetting is one setting of the policy: its name and value as
// policy.get gives them, what it does, and what it means for a DEA
// registrant (21 CFR 1304: the records of controlled substances).
type policySetting struct {
	Name, Value, Means, ForDEA string
}

// handlePolicy shows the approval policy in force, in words.
func (p *approvalPages) handlePolicy(w http.ResponseWriter, r *http.Request, s *session) {
	rep, err := call[struct{}, api.PolicyReply](r.Context(), p.rq, s, api.PolicyGet, struct{}{})
	d := &policyData{Reply: rep}
	if err == nil {
		d.Settings = policySettings(rep.Policy)
	}
	v := newView(s, "Approval policy", "approvals", d)
	v.setErr(err)
	p.render(w, r, statusOf(err), "policy", v)
}

// policySettings says what each setting of pol means, in the order of
// the policy's members.
func policySettings(pol api.Policy) []policySetting {
	onOff := func(on bool, what string) string {
		if on {
			return what + " needs a second person"
		}
		return what + " needs no second person"
	}
	var corr policySetting
	corr.Name, corr.Value = "corrections", pol.Corrections
	switch pol.Corrections {
	case approval.CorrectionsControlled:
		corr.Means = "A correction needs a second person when it changes the event's identity (its key, ordering key, domain or event type); " +
			"for a pharmacy event also when the record or the correction names a DEA schedule (II, IIN, III, IIIN, IV, V), " +
			"and when it changes the quantity, the NDC, the lot or the registrant. Other domains: identity changes only."
		corr.ForDEA = "Every correction of a controlled-substance record is checked by a second person before it reaches your inventory records. The default, and the setting a DEA registrant should keep."
	case approval.CorrectionsAll:
		corr.Means = "Every correction, of every domain, needs a second person."
		corr.ForDEA = "Stricter than the default: corrections of non-controlled and non-pharmacy events wait too."
	case approval.CorrectionsIdentity:
		corr.Means = "A correction needs a second person only when it changes the event's identity (its key, ordering key, domain or event type)."
		corr.ForDEA = "One person can change the quantity of a Schedule II–V dispense without anyone checking it. A DEA registrant should set corrections to controlled (dlqctl policy set, the policy role)."
	default:
		corr.Means = "A value this console does not know: a correction that changes the event's identity needs a second person."
		corr.ForDEA = "Ask the policy role what it means."
	}
	drainMax := "No drain needs a second person for its size."
	if pol.DrainMaxSelected > 0 {
		drainMax = "A drain selecting more than " + strconv.Itoa(pol.DrainMaxSelected) + " events needs a second person."
	}
	return []policySetting{
		corr,
		{"release_poison", strconv.FormatBool(pol.ReleasePoison), onOff(pol.ReleasePoison, "Releasing a poison event (one that failed its replays)") + ".",
			"A poison controlled-substance event is replayed into your records only after a second look."},
		{"drain_max_selected", strconv.Itoa(pol.DrainMaxSelected), drainMax,
			"A drain replays many events at once through the same validation: a large one may move many inventory lines."},
		{"drain_validation", strconv.FormatBool(pol.DrainValidation), onOff(pol.DrainValidation, "A drain including events that failed validation") + ".",
			"Events refused for a bad NDC, DEA number or schedule are replayed unchanged: they fail again unless corrected."},
		{"ignore_order", strconv.FormatBool(pol.IgnoreOrder), onOff(pol.IgnoreOrder, "A drain that waives per-key order") + ".",
			"Without order, a dispense may be replayed before the receive it depends on: the perpetual inventory may go negative in between."},
		{"hold_lift", strconv.FormatBool(pol.HoldLift), onOff(pol.HoldLift, "Lifting a legal hold") + ".",
			"A hold placed for an inspection or a diversion investigation is lifted only by two people."},
		{"dismiss_without_approval", strconv.FormatBool(pol.DismissWithoutApproval), onOff(!pol.DismissWithoutApproval, "Dismissing an event") + ".",
			"A dismissed controlled-substance event never reaches your records: the record of why stays in the audit trail."},
		{"pending_ttl", pol.PendingTTL, "A request waiting for a second person expires after " + pol.PendingTTL + " unless approved or rejected.",
			"An expired request is never executed: the requester asks again."},
	}
}
