package dscsa

import (
	"slices"
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
)

// ssccSteps are the CBV 2.0 business steps that take a logistic unit (an
// SSCC: a pallet, a tote, a mixed case) in an ObjectEvent's epcList and
// in an AggregationEvent, at any packing level: the steps that move,
// hand over, hold, count or check goods (CBV 2.0, 7.1). A shipment is
// usually sent at the pallet level: shipping and receiving name the
// pallets' SSCCs. The steps that make, change or end serialized items
// (commissioning, decommissioning, dispensing, destroying, encoding,
// repackaging, retail_selling...) take SGTINs only.
var ssccSteps = wordSet(
	"accepting", "arriving", "consigning", "cycle_counting", "departing",
	"entering_exiting", "holding", "inspecting", "loading", "receiving",
	"shipping", "staging_outbound", "stock_taking", "storing",
	"transporting", "unloading", "void_shipping",
)

// aggregationSSCCSteps are the business steps that take an SSCC in an
// AggregationEvent only (as its parentID or among its childEPCs): a
// container is packed and unpacked by aggregating its contents.
var aggregationSSCCSteps = wordSet("packing", "unpacking")

// takesSSCC reports whether an event of type typ and business step
// bizStep may name an SSCC.
func takesSSCC(typ, bizStep string) bool {
	if _, ok := ssccSteps[bizStep]; ok {
		return true
	}
	_, ok := aggregationSSCCSteps[bizStep]
	return ok && typ == typeAggregation
}

// checkKeys refuses an SSCC in an event whose business step takes
// serialized items only (KEY_NOT_FOR_BIZSTEP), naming the first one.
func (ev *event) checkKeys() error {
	if takesSSCC(ev.typ, ev.bizStep) {
		return nil
	}
	field := "epcList"
	if ev.typ == typeAggregation {
		field = "childEPCs"
		if ev.parent.sscc != "" {
			return ev.keyNotForBizStep(where{"parentID", -1})
		}
	}
	for i, e := range ev.epcs {
		if e.sscc != "" {
			return ev.keyNotForBizStep(where{field, i})
		}
	}
	return nil
}

func (ev *event) keyNotForBizStep(w where) error {
	steps := make([]string, 0, len(ssccSteps))
	for s := range ssccSteps {
		steps = append(steps, s)
	}
	slices.Sort(steps)
	return codes.Errorf(KeyNotForBizStep,
		"%s: an SSCC (a logistic unit) in a %s event: business step %s takes serialized items (SGTINs) only; an SSCC is taken by %s, and by packing and unpacking in an AggregationEvent",
		w, ev.typ, ev.bizStep, strings.Join(steps, ", "))
}

// orderingEPC returns the list entry that orders an ObjectEvent (and an
// AggregationEvent without parent): its container, the first SSCC in
// document order, else its first entry. An event of serialized items
// only keeps its first item as before SSCCs were taken.
func orderingEPC(epcs []epc) epc {
	for _, e := range epcs {
		if e.sscc != "" {
			return e
		}
	}
	return epcs[0]
}

// firstItem returns the first serialized item (SGTIN) of a list; ok is
// false when it names logistic units only.
func firstItem(epcs []epc) (epc, bool) {
	for _, e := range epcs {
		if e.sscc == "" {
			return e, true
		}
	}
	return epc{}, false
}

// firstSSCC returns the first SSCC of a list, "" when there is none.
func firstSSCC(epcs []epc) string {
	for _, e := range epcs {
		if e.sscc != "" {
			return e.sscc
		}
	}
	return ""
}
