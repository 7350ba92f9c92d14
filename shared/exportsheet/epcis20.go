package exportsheet

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
)

// epcis2Schema states the rules of GS1's EPCIS 2.0 JSON Schema an
// exported document meets (written for deadletter; see its description).
// It is the one owner of the CBV words EPCIS 2.0 JSON writes bare: the
// converter reads its word lists from it.
//
//go:embed epcis2.schema.json
var epcis2Schema []byte

// epcis2SchemaURL names the schema to the compiler.
const epcis2SchemaURL = "https://schemas.deadletter.dev/epcis2-export.schema.json"

// ErrNotEPCIS20 is wrapped by the error of an event that cannot be
// written as EPCIS 2.0 JSON (its code says what: INVALID_BIZSTEP,
// UNPARSEABLE_EVENT_TIME, SCHEMA_VALIDATION_ERROR...).
var ErrNotEPCIS20 = errors.New("exportsheet: the event cannot be written as EPCIS 2.0 JSON")

// vocabulary is one CBV or GS1 web vocabulary as EPCIS 2.0 JSON writes it:
// its terms as bare words, and the URI forms a term may come in (CBV 1.2
// URNs, CBV 2.0 web URIs and compact IRIs, GS1 web vocabulary URIs).
type vocabulary struct {
	words    map[string]bool
	prefixes []string
	// compact, for a GS1 web vocabulary, is the compact IRI prefix a term
	// that is not one of words is written with ("gs1:"): GS1's schema
	// refuses the full https://gs1.org/voc/ URI there.
	compact string
}

// cbvPrefixes are the URI forms of the terms of the CBV vocabulary whose
// CBV 1.2 URN segment is urn (bizstep) and CBV 2.0 web name is web
// (BizStep).
func cbvPrefixes(urn, web string) []string {
	return []string{
		"urn:epcglobal:cbv:" + urn + ":",
		"https://ref.gs1.org/cbv/" + web + "-", "http://ref.gs1.org/cbv/" + web + "-",
		"https://ns.gs1.org/cbv/" + web + "-", "http://ns.gs1.org/cbv/" + web + "-",
		"cbv:" + web + "-",
	}
}

// webVocPrefixes are the forms of a GS1 web vocabulary term.
var webVocPrefixes = []string{"gs1:", "https://gs1.org/voc/", "http://gs1.org/voc/", "https://www.gs1.org/voc/", "http://www.gs1.org/voc/"}

// bare returns the EPCIS 2.0 JSON form of term s.
func (v vocabulary) bare(s string) string {
	t := strings.TrimSpace(s)
	if v.words[t] {
		return t
	}
	for _, p := range v.prefixes {
		if len(t) <= len(p) || !strings.EqualFold(t[:len(p)], p) {
			continue
		}
		w := t[len(p):]
		if v.words[w] {
			return w
		}
		if v.compact != "" {
			return v.compact + w
		}
		return s
	}
	return s
}

// epcis20 converts events to the forms EPCIS 2.0 JSON requires and checks
// them against epcis2Schema.
type epcis20 struct {
	// event checks one event, document a whole document; common and
	// types check an event of an EPCIS event type without the schema's
	// dispatch on the type (its members every event has, then its type's).
	event, document, common *jsonschema.Schema
	types                   map[string]*jsonschema.Schema
	// The vocabularies whose terms EPCIS 2.0 JSON writes bare.
	bizStep, disposition, btt, sdt, reason, component vocabulary
	measurement, alert                                vocabulary
}

// newEPCIS20 compiles the schema and reads its vocabularies.
func newEPCIS20() (*epcis20, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft7
	if err := c.AddResource(epcis2SchemaURL, bytes.NewReader(epcis2Schema)); err != nil {
		return nil, err
	}
	doc, err := c.Compile(epcis2SchemaURL)
	if err != nil {
		return nil, err
	}
	ev, err := c.Compile(epcis2SchemaURL + "#/definitions/event")
	if err != nil {
		return nil, err
	}
	common, err := c.Compile(epcis2SchemaURL + "#/definitions/common")
	if err != nil {
		return nil, err
	}
	types := map[string]*jsonschema.Schema{}
	for _, t := range []string{"ObjectEvent", "AggregationEvent", "TransactionEvent", "TransformationEvent", "AssociationEvent"} {
		if types[t], err = c.Compile(epcis2SchemaURL + "#/definitions/" + t); err != nil {
			return nil, err
		}
	}
	var s struct {
		Definitions map[string]struct {
			AnyOf []struct {
				Enum []string `json:"enum"`
			} `json:"anyOf"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(epcis2Schema, &s); err != nil {
		return nil, err
	}
	words := func(def string) map[string]bool {
		m := map[string]bool{}
		for _, a := range s.Definitions[def].AnyOf {
			for _, w := range a.Enum {
				m[w] = true
			}
		}
		return m
	}
	x := &epcis20{event: ev, document: doc, common: common, types: types,
		bizStep:     vocabulary{words: words("bizStep"), prefixes: cbvPrefixes("bizstep", "BizStep")},
		disposition: vocabulary{words: words("disposition"), prefixes: cbvPrefixes("disp", "Disp")},
		btt:         vocabulary{words: words("bizTransactionType"), prefixes: cbvPrefixes("btt", "BTT")},
		sdt:         vocabulary{words: words("sourceDestType"), prefixes: cbvPrefixes("sdt", "SDT")},
		reason:      vocabulary{words: words("errorReason"), prefixes: cbvPrefixes("er", "ER")},
		component:   vocabulary{words: words("component"), prefixes: cbvPrefixes("comp", "Comp")},
		measurement: vocabulary{words: words("measurementType"), prefixes: webVocPrefixes, compact: "gs1:"},
		alert:       vocabulary{words: words("sensorAlertType"), prefixes: webVocPrefixes, compact: "gs1:"},
	}
	for _, b := range dscsa.BizSteps() { // the domain's business steps are all EPCIS 2.0 words
		if !x.bizStep.words[b] {
			return nil, fmt.Errorf("exportsheet: the EPCIS 2.0 schema lacks the business step %q", b)
		}
	}
	return x, nil
}

// convert returns event data (one JSON object) in the forms EPCIS 2.0
// JSON requires, checked against the schema's event rules: CBV terms
// (bizStep, disposition, persistentDisposition, business transaction,
// source and destination types, error reason, sensor component) as bare
// words, sensor measurement and alert types as GS1 web vocabulary words,
// sensor values and quantities as numbers and booleans, an eventTime
// without an offset given eventTimeZoneOffset's, and a missing
// eventTimeZoneOffset taken from eventTime's offset. Nothing else changes,
// and data is returned as it is (byte for byte) when nothing had to. An
// event that still breaks a rule is an error wrapping ErrNotEPCIS20 with
// the code of what fails, naming the member, never its value.
func (x *epcis20) convert(data []byte) ([]byte, error) {
	v, err := decodeOrdered(data)
	if err != nil {
		return nil, codes.Wrap(codes.MalformedJSON, errors.Join(ErrNotEPCIS20, err), "the event is not one JSON object")
	}
	ev, ok := v.(*object)
	if !ok {
		return nil, codes.Wrap(codes.NotAnObject, ErrNotEPCIS20, "the event is not a JSON object")
	}
	changed := x.rewrite(ev)
	if err := x.check(ev); err != nil {
		return nil, err
	}
	if !changed {
		return bytes.TrimSpace(data), nil
	}
	var b bytes.Buffer
	if err := encodeOrdered(&b, ev); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// check checks one event against the schema's event rules: an event of
// an EPCIS event type against the common rules and its type's, any other
// against the whole event schema (an extension event).
func (x *epcis20) check(ev *object) error {
	v := ev.plain()
	typ, _ := ev.get("type").(string)
	ts, ok := x.types[typ]
	if !ok {
		ts = x.event
	} else if err := x.common.Validate(v); err != nil {
		return schemaFailure(err)
	}
	if err := ts.Validate(v); err != nil {
		return schemaFailure(err)
	}
	return nil
}

// rewrite converts ev's members in place; it reports whether any changed.
func (x *epcis20) rewrite(ev *object) bool {
	changed := false
	term := func(o *object, key string, v vocabulary) {
		if s, ok := o.get(key).(string); ok {
			if w := v.bare(s); w != s {
				o.set(key, w)
				changed = true
			}
		}
	}
	each := func(o *object, key string, fn func(*object)) {
		list, _ := o.get(key).([]any)
		for _, it := range list {
			if m, ok := it.(*object); ok {
				fn(m)
			}
		}
	}
	term(ev, "bizStep", x.bizStep)
	term(ev, "disposition", x.disposition)
	if pd, ok := ev.get("persistentDisposition").(*object); ok {
		for _, k := range []string{"set", "unset"} {
			list, _ := pd.get(k).([]any)
			for i, it := range list {
				if s, ok := it.(string); ok {
					if w := x.disposition.bare(s); w != s {
						list[i], changed = w, true
					}
				}
			}
		}
	}
	each(ev, "bizTransactionList", func(o *object) { term(o, "type", x.btt) })
	each(ev, "sourceList", func(o *object) { term(o, "type", x.sdt) })
	each(ev, "destinationList", func(o *object) { term(o, "type", x.sdt) })
	if ed, ok := ev.get("errorDeclaration").(*object); ok {
		term(ed, "reason", x.reason)
	}
	for _, k := range []string{"quantityList", "childQuantityList", "inputQuantityList", "outputQuantityList"} {
		each(ev, k, func(o *object) { changed = toNumber(o, "quantity") || changed })
	}
	each(ev, "sensorElementList", func(se *object) {
		each(se, "sensorReport", func(r *object) {
			term(r, "type", x.measurement)
			term(r, "exception", x.alert)
			term(r, "component", x.component)
			for _, k := range []string{"value", "minValue", "maxValue", "meanValue", "sDev", "percRank", "percValue"} {
				changed = toNumber(r, k) || changed
			}
			if s, ok := r.get("booleanValue").(string); ok {
				switch strings.TrimSpace(s) {
				case "true", "1":
					r.set("booleanValue", true)
					changed = true
				case "false", "0":
					r.set("booleanValue", false)
					changed = true
				}
			}
		})
	})
	changed = x.identifiers(ev) || changed
	return eventTimes(ev) || changed
}

// identifiers writes the event's identifiers (the members EPCIS 2.0 JSON
// holds as URIs: EPCs, classes, locations, parties, transactions, event
// IDs, sensor devices and references) in URI form: a character a URI
// cannot hold ('<', '>', '"', a space, '%' that starts no escape,
// non-ASCII text) percent-encoded, as an EPC URN escapes a serial's
// characters (R&D<1> is R&D%3C1%3E); it reports whether any changed.
func (x *epcis20) identifiers(ev *object) bool {
	changed := false
	one := func(o *object, key string) {
		if s, ok := o.get(key).(string); ok {
			if u := uriForm(s); u != s {
				o.set(key, u)
				changed = true
			}
		}
	}
	list := func(o *object, key string) {
		l, _ := o.get(key).([]any)
		for i, it := range l {
			if s, ok := it.(string); ok {
				if u := uriForm(s); u != s {
					l[i], changed = u, true
				}
			}
		}
	}
	objects := func(o *object, key string, fn func(*object)) {
		l, _ := o.get(key).([]any)
		for _, it := range l {
			if m, ok := it.(*object); ok {
				fn(m)
			}
		}
	}
	for _, k := range []string{"eventID", "parentID", "transformationID", "certificationInfo"} {
		one(ev, k)
	}
	for _, k := range []string{"epcList", "childEPCs", "inputEPCList", "outputEPCList", "certificationInfo"} {
		list(ev, k)
	}
	for _, k := range []string{"readPoint", "bizLocation"} {
		if o, ok := ev.get(k).(*object); ok {
			one(o, "id")
		}
	}
	objects(ev, "bizTransactionList", func(o *object) { one(o, "bizTransaction") })
	objects(ev, "sourceList", func(o *object) { one(o, "source") })
	objects(ev, "destinationList", func(o *object) { one(o, "destination") })
	for _, k := range []string{"quantityList", "childQuantityList", "inputQuantityList", "outputQuantityList"} {
		objects(ev, k, func(o *object) { one(o, "epcClass") })
	}
	if ed, ok := ev.get("errorDeclaration").(*object); ok {
		list(ed, "correctiveEventIDs")
	}
	refs := []string{"deviceID", "deviceMetadata", "rawData", "dataProcessingMethod", "bizRules"}
	objects(ev, "sensorElementList", func(se *object) {
		if m, ok := se.get("sensorMetadata").(*object); ok {
			for _, k := range refs {
				one(m, k)
			}
		}
		objects(se, "sensorReport", func(r *object) {
			for _, k := range append(refs, "microorganism", "chemicalSubstance", "coordinateReferenceSystem", "uriValue") {
				one(r, k)
			}
		})
	})
	return changed
}

// uriForm percent-encodes the bytes of s a URI (RFC 3986) cannot hold as
// they are: everything but its unreserved and reserved characters and
// '%' starting an escape.
func uriForm(s string) string {
	ok := func(i int) bool {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			return true
		case strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
			return true
		case c == '%':
			return i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])
		}
		return false
	}
	i := 0
	for i < len(s) && ok(i) {
		i++
	}
	if i == len(s) {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if ok(i) {
			b.WriteByte(s[i])
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[s[i]>>4])
		b.WriteByte(hex[s[i]&15])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// toNumber makes member key of o a JSON number when it is a string that
// reads as a finite decimal (an XML element's or attribute's text), and
// removes it when it is empty (an XML xsi:nil quantity: no value); it
// reports whether it changed o.
func toNumber(o *object, key string) bool {
	s, ok := o.get(key).(string)
	if !ok {
		return false
	}
	t := strings.TrimSpace(s)
	if t == "" {
		o.del(key)
		return true
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return false
	}
	if !jsonNumber(t) { // "+5", ".5", "5.": the same value, as JSON writes it
		t = strconv.FormatFloat(f, 'g', -1, 64)
	}
	o.set(key, json.Number(t))
	return true
}

// jsonNumber reports whether s is a JSON number literal.
func jsonNumber(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// localDateTime is an RFC 3339 date-time without an offset.
const localDateTime = "2006-01-02T15:04:05.999999999"

// eventTimes gives an eventTime without an offset the event's
// eventTimeZoneOffset (the instant the DSCSA rules read), and an event
// without eventTimeZoneOffset the offset of its eventTime (EPCIS 2.0 JSON
// requires both); it reports whether it changed either.
func eventTimes(ev *object) bool {
	et, _ := ev.get("eventTime").(string)
	off, hasOff := ev.get("eventTimeZoneOffset").(string)
	if et == "" {
		return false
	}
	if _, err := time.Parse(localDateTime, et); err == nil && hasOff && validOffset(off) {
		ev.set("eventTime", et+off)
		return true
	}
	if hasOff || ev.get("eventTimeZoneOffset") != nil {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, et)
	if err != nil {
		return false
	}
	ev.set("eventTimeZoneOffset", t.Format("-07:00"))
	return true
}

// validOffset reports whether s is an EPCIS eventTimeZoneOffset.
func validOffset(s string) bool {
	t, err := time.Parse("-07:00", s)
	if err != nil || len(s) != 6 {
		return false
	}
	_, sec := t.Zone()
	return sec >= -14*3600 && sec <= 14*3600
}

// schemaFailure names the first rule an event breaks: the member (a JSON
// pointer of member names and indexes) and the schema keyword, or the
// members missing, never a value, with the code of the member (the
// domain's where it has one).
func schemaFailure(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return codes.Wrap(codes.SchemaValidation, errors.Join(ErrNotEPCIS20, err), "the event cannot be checked against the EPCIS 2.0 rules")
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		next := leaf.Causes[0]
		for _, c := range leaf.Causes { // the most specific member
			if len(c.InstanceLocation) > len(next.InstanceLocation) {
				next = c
			}
		}
		leaf = next
	}
	at := leaf.InstanceLocation
	if at == "" {
		at = "/"
	}
	kw := leaf.KeywordLocation[strings.LastIndexByte(leaf.KeywordLocation, '/')+1:]
	rel := at // the location in the event, in a document too
	if r, ok := strings.CutPrefix(at, "/epcisBody/eventList/"); ok {
		_, rel, _ = strings.Cut(r, "/")
		rel = "/" + rel
	}
	member, _, _ := strings.Cut(strings.TrimPrefix(rel, "/"), "/")
	detail := fmt.Sprintf("EPCIS 2.0 JSON: %s breaks the rule %q", at, kw)
	switch {
	case strings.Contains(leaf.KeywordLocation, "/propertyNames"):
		// The member's name is the payload's: named by its location.
		return codes.Wrap(codes.SchemaValidation, ErrNotEPCIS20,
			fmt.Sprintf("EPCIS 2.0 JSON: the member %s is not one this event type has, nor a URI naming an extension", at))
	case kw == "required":
		// The message names the schema's members, never the payload's values.
		detail = fmt.Sprintf("EPCIS 2.0 JSON: %s lacks a member it requires (%s)", at, leaf.Message)
		if m := strings.TrimPrefix(leaf.Message, "missing properties: "); m != leaf.Message {
			member, _, _ = strings.Cut(strings.Trim(m, "'"), "'")
		}
	}
	code := codes.SchemaValidation
	switch member {
	case "bizStep":
		code = dscsa.InvalidBizStep
	case "eventTime", "eventTimeZoneOffset", "recordTime", "declarationTime":
		code = codes.UnparseableEventTime
	case "epcList", "childEPCs", "inputEPCList", "outputEPCList":
		code = dscsa.InvalidEPC
	case "parentID":
		code = dscsa.InvalidParentID
	case "readPoint", "bizLocation":
		code = dscsa.InvalidLocation
	case "errorDeclaration":
		if strings.HasPrefix(rel, "/errorDeclaration/declarationTime") {
			code = codes.UnparseableEventTime
		}
	}
	return codes.Wrap(code, ErrNotEPCIS20, detail)
}

// object is a JSON object that keeps its members' order.
type object struct {
	keys []string
	vals []any
}

func (o *object) get(k string) any {
	for i, key := range o.keys {
		if key == k {
			return o.vals[i]
		}
	}
	return nil
}

func (o *object) set(k string, v any) {
	for i, key := range o.keys {
		if key == k {
			o.vals[i] = v
			return
		}
	}
	o.keys, o.vals = append(o.keys, k), append(o.vals, v)
}

func (o *object) del(k string) {
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			o.vals = append(o.vals[:i], o.vals[i+1:]...)
			return
		}
	}
}

// plain returns the object as the schema validator takes it (maps).
func (o *object) plain() map[string]any {
	m := make(map[string]any, len(o.keys))
	for i, k := range o.keys {
		m[k] = plainValue(o.vals[i])
	}
	return m
}

func plainValue(v any) any {
	switch x := v.(type) {
	case *object:
		return x.plain()
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainValue(e)
		}
		return out
	}
	return v
}

// decodeOrdered decodes one JSON value, objects as *object, numbers as
// json.Number; a repeated member name is an error.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if seen[k] {
					return nil, errors.New("a member name repeats")
				}
				seen[k] = true
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.keys, o.vals = append(o.keys, k), append(o.vals, v)
			}
			_, err := dec.Token() // '}'
			return o, err
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token() // ']'
			return list, err
		}
		return nil, errors.New("unexpected delimiter")
	}
	return tok, nil
}

// encodeOrdered writes v as compact JSON in its members' order, with
// '&', '<' and '>' as themselves (as the stored events are).
func encodeOrdered(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeString(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := encodeOrdered(b, x.vals[i]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeOrdered(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case string:
		return encodeString(b, x)
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	default:
		return fmt.Errorf("exportsheet: cannot encode %T", v)
	}
	return nil
}

// encodeString writes s as a JSON string without HTML escaping.
func encodeString(b *bytes.Buffer, s string) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// CheckEPCIS checks an EPCIS JSON document against the rules of GS1's
// EPCIS 2.0 JSON Schema that WriteEPCIS meets (epcis2.schema.json): nil
// when it passes, else an error wrapping ErrNotEPCIS20 whose code and
// detail name the first rule broken (a member and a keyword, never a
// value). A reader of an export (a test, a partner's side) uses it.
func CheckEPCIS(doc []byte) error {
	x, err := newEPCIS20()
	if err != nil {
		return codes.Wrap(codes.Internal, err, "the EPCIS 2.0 rules cannot be read")
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return codes.Wrap(codes.MalformedJSON, errors.Join(ErrNotEPCIS20, err), "the document is not JSON")
	}
	if err := x.document.Validate(v); err != nil {
		return schemaFailure(err)
	}
	return nil
}
