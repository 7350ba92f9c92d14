// Package shipment generates DSCSA shipments as a manufacturer or a
// distributor sends them to a trading partner: an EPCIS 1.2 XML document
// with a Standard Business Document Header, or an EPCIS 2.0 JSON-LD
// document, written as GS1's published examples write them (gs1/EPCIS
// XML/ and JSON/), holding the commissioning of serialized items (several
// NDC-derived GTINs and lots, check digits computed), their packing into
// cases and the cases into pallets (SSCCs), and shipping events listing
// the pallets' SSCCs with their purchase order and despatch advice,
// owning parties and locations; the parties' names (Müller & Söhne GmbH,
// 陈伟药房, quotes and angle brackets) in the header's master data and in an
// extension of each shipping event.
//
// Among the correct events it plants mistakes of the kinds distributors
// really make (a GTIN's check digit, a serial too long, a misspelled
// bizStep, an SSCC commissioned, a lost expiry, a duplicate resent with
// another count...) and returns each with the position of its event in
// the document and the error code the gate must give it. Everything is
// derived from the seed: the same configuration gives the same bytes.
package shipment

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/gs1"
)

// Format is a document's binding.
type Format string

// The bindings Generate writes.
const (
	// XML12 is EPCIS 1.2 XML with a Standard Business Document Header and
	// the parties' master data, CBV 1.2 URNs, SGTIN and SSCC EPC URNs.
	XML12 Format = "xml"
	// JSONLD20 is EPCIS 2.0 JSON-LD: bare CBV words, GS1 Digital Link
	// URIs for items and pallets.
	JSONLD20 Format = "json"
)

// Config sizes a shipment. The zero value of a size takes its default.
type Config struct {
	// Seed derives every identifier, serial and planted position; two
	// shipments of distinct seeds share no serial, case or pallet.
	Seed uint64
	// ID is the document's instance identifier (SBDH InstanceIdentifier
	// in XML, the document's id in JSON).
	ID     string
	Format Format
	// Lots are the lots the cases are made of, in turn (a lot is one
	// product: lot i is of product i mod Products). Default: four lots
	// derived from the seed, the first written with & < > and quotes.
	Lots []string
	// Products is the number of GTINs (NDCs); default 3.
	Products int
	// Pallets, CasesPerPallet, ItemsPerCase size the hierarchy; defaults
	// 12, 8, 12. PalletsPerShipping pallets go in one shipping event
	// (default 3).
	Pallets, CasesPerPallet, ItemsPerCase, PalletsPerShipping int
	// Mistakes is the number of planted mistakes: Kinds in turn.
	Mistakes int
	// Start is the first event's time (default 2026-03-02 08:00 -05:00).
	Start time.Time
}

// Mistake is one planted mistake.
type Mistake struct {
	// Kind names the mistake (one of Kinds).
	Kind string
	// Index is the position of its event in the document (from 0).
	Index int
	// Code is the error code the gate must quarantine it with.
	Code codes.Code
	// Lot is the lot its payload holds ("" for none): a search by that
	// lot must find it.
	Lot string
	// SSCCs are the valid SSCC-18s its payload names (pallets of a
	// shipping event): a search by any of them must find it.
	SSCCs []string
}

// Shipment is a generated document and what it holds.
type Shipment struct {
	Data   []byte
	Format Format
	// Events is the number of events of the document; Mistakes those
	// planted, by position. Every other event must commit.
	Events   int
	Mistakes []Mistake
	// Lots are the lots of its items; Pallets the SSCC-18 of every pallet,
	// in shipping order.
	Lots    []string
	Pallets []string
}

// Kinds are the planted mistakes, in the order Generate plants them.
var Kinds = []string{
	"gtin-check-digit", "serial-too-long", "bizstep-misspelled", "sscc-commissioned",
	"expiry-forgotten", "duplicate-changed-count", "shipping-bizstep-misspelled",
	"readpoint-gln-check-digit", "gtin-lost-leading-zero", "pallet-sscc-check-digit",
	"child-packed-twice", "returnable-tote-in-shipment", "time-without-offset",
	"transformation-event", "lot-forgotten", "disposition-misspelled",
}

// The parties: the manufacturer (labeler 12345, GS1 company prefix
// 0312345), the distributor (GS1's example prefix 0614141) and the
// pharmacy. Their names are as the trade writes them.
const (
	mfrCP   = "0312345"
	distCP  = "0614141"
	shopCP  = "0867530"
	mfrName = "Müller & Söhne GmbH"
	// distName and shopName carry quotes, angle brackets and Chinese.
	distName = `O'Brien "Wholesale" <Drug> Distribution & Co.`
	shopName = "陈伟药房 (Chén Wěi Pharmacy) <Filiale 3>"
)

// Generate writes the shipment cfg describes.
func Generate(cfg Config) (*Shipment, error) {
	cfg = withDefaults(cfg)
	if cfg.Format != XML12 && cfg.Format != JSONLD20 {
		return nil, fmt.Errorf("shipment: unknown format %q", cfg.Format)
	}
	g := &gen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), tag: seedTag(cfg.Seed), at: cfg.Start}
	g.build()
	if err := g.plant(); err != nil {
		return nil, err
	}
	s := &Shipment{Format: cfg.Format, Events: len(g.events), Lots: cfg.Lots, Pallets: g.pallets}
	for i, ev := range g.events {
		if ev.mistake != nil {
			m := *ev.mistake
			m.Index = i
			s.Mistakes = append(s.Mistakes, m)
		}
	}
	var b bytes.Buffer
	if cfg.Format == XML12 {
		g.writeXML(&b)
	} else {
		g.writeJSON(&b)
	}
	s.Data = b.Bytes()
	return s, nil
}

func withDefaults(c Config) Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Products, 3)
	def(&c.Pallets, 12)
	def(&c.CasesPerPallet, 8)
	def(&c.ItemsPerCase, 12)
	def(&c.PalletsPerShipping, 3)
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 3, 2, 8, 0, 0, 0, time.FixedZone("", -5*3600))
	}
	if c.ID == "" {
		c.ID = fmt.Sprintf("DESADV-%d", c.Seed)
	}
	if len(c.Lots) == 0 {
		t := seedTag(c.Seed)
		c.Lots = []string{`L` + t + `&"B"<7>`, "L" + t + "-0517/A", "L" + t + "-0602", "L" + t + "-0611"}
	}
	return c
}

// seedTag is a short tag of the seed that serials, cases and pallets carry.
func seedTag(seed uint64) string { return strings.ToUpper(fmt.Sprintf("%03s", fmt.Sprint(seed%46656))) }

// epc is an SGTIN (cp, ref: indicator and item reference, serial) or an
// SSCC (cp, ref: extension digit and serial reference); raw, when set,
// is written as it is in both bindings (a planted mistake).
type epc struct {
	cp, ref, serial string
	sscc            bool
	raw             string
}

// key is the GTIN-14 or the SSCC-18.
func (e epc) key() string {
	body := e.ref[:1] + e.cp + e.ref[1:]
	return body + string(gs1.CheckDigit(body))
}

func (e epc) urn() string {
	switch {
	case e.raw != "":
		return e.raw
	case e.sscc:
		return "urn:epc:id:sscc:" + e.cp + "." + e.ref
	}
	return "urn:epc:id:sgtin:" + e.cp + "." + e.ref + "." + e.serial
}

func (e epc) dl() string {
	switch {
	case e.raw != "":
		return e.raw
	case e.sscc:
		return "https://id.gs1.org/00/" + e.key()
	}
	return "https://id.gs1.org/01/" + e.key() + "/21/" + e.serial
}

// gln is a location: its company prefix and location reference.
type gln struct{ cp, ref string }

func (l gln) sgln() string { return "urn:epc:id:sgln:" + l.cp + "." + l.ref + ".0" }
func (l gln) pgln() string { return "urn:epc:id:pgln:" + l.cp + "." + l.ref }
func (l gln) number() string {
	body := l.cp + l.ref
	return body + string(gs1.CheckDigit(body))
}

// The parties' places.
var (
	mfrPlant  = gln{mfrCP, "00001"}
	mfrDock   = gln{mfrCP, "00002"}
	distParty = gln{distCP, "00000"}
	distDC    = gln{distCP, "00777"}
	shopStore = gln{shopCP, "00003"}
)

// event is one event of the model, written in either binding.
type event struct {
	typ        string // ObjectEvent, AggregationEvent, TransformationEvent
	id         string // eventID, urn:uuid
	at         time.Time
	noOffset   bool   // eventTime without offset, no eventTimeZoneOffset
	action     string // ADD, OBSERVE, DELETE
	bizStep    string // bare CBV word
	rawStep    string // a bizStep written as it is (a mistake)
	disp       string
	epcs       []epc // epcList, or childEPCs
	parent     *epc
	read       gln
	readRaw    string // a readPoint written as it is (a mistake)
	biz        gln
	lot        string
	expiry     string
	shipping   bool // bizTransactionList, sources, destinations, consignee
	po, desadv string
	// inputs and outputs of a TransformationEvent.
	inputs, outputs []epc
	mistake         *Mistake
	// origin is the event a planted duplicate repeats.
	origin *event
}

// gen builds one shipment.
type gen struct {
	cfg     Config
	rng     *rand.Rand
	tag     string
	at      time.Time
	n       int // serial counter
	events  []*event
	pallets []string
	// commissioned are the commissioning events of items, shipped the
	// shipping events, casePacks and palletPacks the aggregations.
	commissioned, shipped, casePacks, palletPacks []*event
}

func (g *gen) next() time.Time {
	g.at = g.at.Add(time.Duration(3+g.rng.IntN(5)) * time.Second)
	return g.at
}

func (g *gen) uuid() string {
	a, b := g.rng.Uint64(), g.rng.Uint64()
	return fmt.Sprintf("urn:uuid:%08x-%04x-4%03x-%04x-%012x", a>>32, a>>16&0xffff, a&0xfff, 0x8000|b>>48&0x3fff, b&0xffffffffffff)
}

// serial is a serial of 12 GS1 characters, unique to the seed.
func (g *gen) serial() string {
	g.n++
	return fmt.Sprintf("%s%09d", g.tag, g.n)
}

// product i's item reference (indicator 0 for an item, 5 for a case).
func (g *gen) itemRef(product int, indicator byte) string {
	return string(indicator) + fmt.Sprintf("%03d%02d", (101+product*37)%1000, (10+product)%100)
}

func (g *gen) add(e *event) *event {
	e.id = g.uuid()
	e.at = g.next()
	g.events = append(g.events, e)
	return e
}

// build writes the correct shipment: per case, the commissioning of its
// items and of the case, the items packed into it; per pallet, its cases
// packed onto it; per PalletsPerShipping pallets, their shipping.
func (g *gen) build() {
	c := g.cfg
	expiry := c.Start.AddDate(2, 0, 0).Format("2006-01-02")
	var ship []epc
	caseN := 0
	for p := range c.Pallets {
		var cases []epc
		for range c.CasesPerPallet {
			li := caseN % len(c.Lots)
			caseN++
			product := li % c.Products
			lot := c.Lots[li]
			items := make([]epc, c.ItemsPerCase)
			for i := range items {
				items[i] = epc{cp: mfrCP, ref: g.itemRef(product, '0'), serial: g.serial()}
			}
			g.commissioned = append(g.commissioned, g.add(&event{typ: "ObjectEvent", action: "ADD", bizStep: "commissioning", disp: "active",
				epcs: items, read: mfrPlant, biz: mfrPlant, lot: lot, expiry: expiry}))
			cs := epc{cp: mfrCP, ref: g.itemRef(product, '5'), serial: g.serial()}
			g.add(&event{typ: "ObjectEvent", action: "ADD", bizStep: "commissioning", disp: "active",
				epcs: []epc{cs}, read: mfrPlant, biz: mfrPlant, lot: lot, expiry: expiry})
			g.casePacks = append(g.casePacks, g.add(&event{typ: "AggregationEvent", action: "ADD", bizStep: "packing", disp: "in_progress",
				parent: &cs, epcs: slices.Clone(items), read: mfrPlant, biz: mfrPlant}))
			cases = append(cases, cs)
		}
		pallet := epc{cp: mfrCP, ref: fmt.Sprintf("0%03d%06d", c.Seed%1000, p+1), sscc: true}
		g.pallets = append(g.pallets, pallet.key())
		g.palletPacks = append(g.palletPacks, g.add(&event{typ: "AggregationEvent", action: "ADD", bizStep: "packing", disp: "in_progress",
			parent: &pallet, epcs: cases, read: mfrDock, biz: mfrPlant}))
		ship = append(ship, pallet)
		if len(ship) == c.PalletsPerShipping || p == c.Pallets-1 {
			k := len(g.shipped) + 1
			g.shipped = append(g.shipped, g.add(&event{typ: "ObjectEvent", action: "OBSERVE", bizStep: "shipping", disp: "in_transit",
				epcs: ship, read: mfrDock, biz: mfrPlant, shipping: true,
				po: fmt.Sprintf("PO-%s-%04d", g.tag, k), desadv: fmt.Sprintf("DESADV-%s-%04d", g.tag, k)}))
			ship = nil
		}
	}
}

// planter plants one kind of mistake: it picks an unused event of its
// pool (or makes one) and changes it.
type planter struct {
	code  codes.Code
	plant func(g *gen, m *Mistake) error
}

var planters = map[string]planter{
	"gtin-check-digit": {dscsa.GTINCheckDigitFailed, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) {
			e := ev.epcs[0]
			k := e.key()
			bad := k[:13] + string('0'+(k[13]-'0'+1)%10)
			ev.epcs[0].raw = "https://id.gs1.org/01/" + bad + "/21/" + e.serial
		})
	}},
	"serial-too-long": {dscsa.InvalidEPC, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) { ev.epcs[len(ev.epcs)-1].serial += "-2026-REWORK-X" })
	}},
	"bizstep-misspelled": {dscsa.InvalidBizStep, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) { ev.rawStep = "comissioning" })
	}},
	"sscc-commissioned": {dscsa.KeyNotForBizStep, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) {
			s := epc{cp: mfrCP, ref: fmt.Sprintf("9%03d%06d", g.cfg.Seed%1000, len(ev.epcs)+900000), sscc: true}
			ev.epcs = append(ev.epcs, s)
			m.SSCCs = append(m.SSCCs, s.key())
		})
	}},
	"expiry-forgotten": {dscsa.MissingExpiry, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) { ev.expiry = "" })
	}},
	"readpoint-gln-check-digit": {dscsa.InvalidLocation, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) {
			n := ev.read.number()
			ev.readRaw = "https://id.gs1.org/414/" + n[:12] + string('0'+(n[12]-'0'+3)%10)
		})
	}},
	"gtin-lost-leading-zero": {dscsa.InvalidGTIN, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) {
			e := ev.epcs[1%len(ev.epcs)]
			ev.epcs[1%len(ev.epcs)].raw = "https://id.gs1.org/01/" + e.key()[1:] + "/21/" + e.serial
		})
	}},
	"time-without-offset": {codes.UnparseableEventTime, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) { ev.noOffset = true })
	}},
	"disposition-misspelled": {dscsa.InvalidDisposition, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) { ev.disp = "activ" })
	}},
	"lot-forgotten": {codes.MissingLot, func(g *gen, m *Mistake) error {
		return g.item(m, func(ev *event) { ev.lot = ""; m.Lot = "" })
	}},
	"shipping-bizstep-misspelled": {dscsa.InvalidBizStep, func(g *gen, m *Mistake) error {
		return g.ship(m, func(ev *event) { ev.rawStep = "urn:epcglobal:cbv:bizstep:shiping" })
	}},
	"returnable-tote-in-shipment": {dscsa.UnsupportedGS1Key, func(g *gen, m *Mistake) error {
		return g.ship(m, func(ev *event) {
			ev.epcs = append(ev.epcs, epc{raw: "urn:epc:id:grai:" + distCP + ".12345." + g.tag + "TOTE7"})
		})
	}},
	"pallet-sscc-check-digit": {dscsa.InvalidParentID, func(g *gen, m *Mistake) error {
		ev := g.pick(g.palletPacks, m)
		if ev == nil {
			return errNoRoom
		}
		k := ev.parent.key()
		bad := *ev.parent
		bad.raw = "https://id.gs1.org/00/" + k[:17] + string('0'+(k[17]-'0'+1)%10)
		ev.parent = &bad
		return nil
	}},
	"child-packed-twice": {dscsa.InvalidAggregation, func(g *gen, m *Mistake) error {
		ev := g.pick(g.casePacks, m)
		if ev == nil {
			return errNoRoom
		}
		ev.epcs = append(slices.Clone(ev.epcs), ev.epcs[0])
		return nil
	}},
	"duplicate-changed-count": {codes.IdempotencyConflict, func(g *gen, m *Mistake) error {
		orig := g.pick(g.casePacks, nil)
		if orig == nil {
			return errNoRoom
		}
		dup := *orig
		dup.epcs = slices.Clone(orig.epcs[:len(orig.epcs)-1])
		dup.origin, dup.mistake = orig, m
		orig.mistake = &Mistake{Kind: "original"} // not to be picked again
		g.insertAfter(orig, &dup)
		return nil
	}},
	"transformation-event": {dscsa.UnsupportedEventType, func(g *gen, m *Mistake) error {
		orig := g.pick(g.commissioned, nil)
		if orig == nil {
			return errNoRoom
		}
		orig.mistake = &Mistake{Kind: "original"}
		out := epc{cp: mfrCP, ref: g.itemRef(0, '0'), serial: g.serial()}
		tr := &event{typ: "TransformationEvent", id: g.uuid(), at: orig.at.Add(time.Second), bizStep: "repackaging", disp: "active",
			inputs: orig.epcs[:1], outputs: []epc{out}, read: mfrPlant, biz: mfrPlant, lot: orig.lot, expiry: orig.expiry, mistake: m}
		m.Lot = orig.lot
		g.insertAfter(orig, tr)
		return nil
	}},
}

var errNoRoom = fmt.Errorf("shipment: too few events for the planted mistakes")

// item plants a mistake in a commissioning event of items: one of the
// first lot's for every other mistake (a recall finds several), else any.
func (g *gen) item(m *Mistake, change func(*event)) error {
	pool := g.commissioned
	if len(g.planted())%2 == 0 {
		pool = slices.DeleteFunc(slices.Clone(pool), func(e *event) bool { return e.lot != g.cfg.Lots[0] })
	}
	ev := g.pick(pool, m)
	if ev == nil {
		return errNoRoom
	}
	m.Lot = ev.lot
	change(ev)
	return nil
}

// ship plants a mistake in a shipping event; its pallets are found by it.
func (g *gen) ship(m *Mistake, change func(*event)) error {
	ev := g.pick(g.shipped, m)
	if ev == nil {
		return errNoRoom
	}
	for _, e := range ev.epcs {
		m.SSCCs = append(m.SSCCs, e.key())
	}
	change(ev)
	return nil
}

// pick returns a random event of pool that holds no mistake and marks it
// with m (when m is set); nil when none is left.
func (g *gen) pick(pool []*event, m *Mistake) *event {
	var free []*event
	for _, e := range pool {
		if e.mistake == nil && e.origin == nil {
			free = append(free, e)
		}
	}
	if len(free) == 0 {
		return nil
	}
	e := free[g.rng.IntN(len(free))]
	if m != nil {
		e.mistake = m
	}
	return e
}

func (g *gen) insertAfter(orig, e *event) {
	i := slices.Index(g.events, orig)
	// Resent a little later in the document, not at once.
	j := min(len(g.events), i+1+g.rng.IntN(5))
	g.events = slices.Insert(g.events, j, e)
}

func (g *gen) planted() []*Mistake {
	var out []*Mistake
	for _, e := range g.events {
		if e.mistake != nil && e.mistake.Kind != "original" {
			out = append(out, e.mistake)
		}
	}
	return out
}

// plant plants cfg.Mistakes mistakes, Kinds in turn; then the markers of
// the originals of planted duplicates are taken off.
func (g *gen) plant() error {
	for i := range g.cfg.Mistakes {
		kind := Kinds[i%len(Kinds)]
		p := planters[kind]
		m := &Mistake{Kind: kind, Code: p.code}
		if err := p.plant(g, m); err != nil {
			return fmt.Errorf("%w (%d planted, %d asked)", err, i, g.cfg.Mistakes)
		}
	}
	for _, e := range g.events {
		if e.mistake != nil && e.mistake.Kind == "original" {
			e.mistake = nil
		}
	}
	return nil
}
