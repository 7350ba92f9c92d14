package fsma

import (
	"strconv"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Name is the domain name: the subject token and the schema name.
const Name = "fsma"

// KeySource names what the idempotency key is derived from.
const KeySource = "supplier_id+tlc+cte_type+event_date+reference_document"

// Checker implements the FSMA 204 rules for the validation gate. The zero
// value is ready to use and safe for concurrent use.
type Checker struct{}

// Domain returns "fsma".
func (Checker) Domain() string { return Name }

// EventType returns the normalized cte_type of a document, the token to
// publish it under; a missing or unknown cte_type is a
// SCHEMA_VALIDATION_ERROR.
func (Checker) EventType(doc domain.Doc) (string, error) {
	s, ok := domain.String(doc, fieldCTEType)
	if !ok {
		return "", codes.Errorf(codes.SchemaValidation, "cte_type: required, must be a string")
	}
	cte := normalizeToken(s)
	if _, ok := requiredKDEs[cte]; !ok {
		return "", codes.Errorf(codes.SchemaValidation, "cte_type: must be one of the FSMA 204 CTE types")
	}
	return cte, nil
}

// normalizeToken trims and lower-cases a CTE type token.
func normalizeToken(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// event is the normalized identity of one CTE.
type event struct {
	cte      string
	supplier string
	tlc      string
	at       time.Time
}

// Check validates a schema-valid document published with the subject token
// eventType and returns its envelope, or a *codes.Error (see the package
// comment for the order of the checks).
func (c Checker) Check(eventType string, doc domain.Doc) (envelope.Envelope, error) {
	e, err := c.check(eventType, doc)
	if err != nil {
		return envelope.Envelope{}, err
	}
	return e.envelope(doc), nil
}

func (c Checker) check(eventType string, doc domain.Doc) (event, error) {
	var e event
	var err error
	if e.cte, err = c.EventType(doc); err != nil {
		return e, err
	}
	if normalizeToken(eventType) != e.cte {
		return e, codes.Errorf(codes.SubjectMismatch,
			"subject event-type token disagrees with cte_type %s", e.cte)
	}
	var ok bool
	if e.supplier, ok = domain.String(doc, fieldSupplier); !ok {
		return e, codes.Errorf(MissingSupplier, "supplier_id: required, must be a non-empty string")
	}
	if e.tlc, err = checkTLCs(doc); err != nil {
		return e, err
	}
	if err := checkKDEs(e.cte, doc); err != nil {
		return e, err
	}
	raw, _ := domain.String(doc, fieldEventTime)
	if e.at, err = domain.ParseTime(fieldEventTime, raw); err != nil {
		return e, err
	}
	if err := checkLocations(doc); err != nil {
		return e, err
	}
	if err := checkQuantity(doc); err != nil {
		return e, err
	}
	return e, checkDates(doc)
}

// checkTLCs returns the traceability lot code, and checks that every
// element of input_tlcs, when given, is a non-empty lot code: MISSING_TLC.
func checkTLCs(doc domain.Doc) (string, error) {
	tlc, ok := domain.String(doc, fieldTLC)
	if !ok {
		return "", codes.Errorf(MissingTLC, "traceability_lot_code: required, must be a non-empty string")
	}
	inputs, _ := domain.Array(doc, fieldInputTLCs)
	for i, v := range inputs {
		if s, ok := v.(string); !ok || strings.TrimSpace(s) == "" {
			return "", codes.Errorf(MissingTLC,
				"input_tlcs[%d]: must be a non-empty traceability lot code", i)
		}
	}
	return tlc, nil
}

// envelope builds the envelope of a checked event.
func (e *event) envelope(doc domain.Doc) envelope.Envelope {
	ids := make(map[string]string, 4)
	ids["supplier_id"] = e.supplier
	ids["tlc"] = e.tlc
	if gln, ok := locationGLN(e.cte, doc); ok {
		ids["location_gln"] = gln
	}
	if e.cte == Transformation {
		inputs, _ := domain.Array(doc, fieldInputTLCs)
		ids["input_tlc_count"] = strconv.Itoa(len(inputs))
	}
	return envelope.Envelope{
		Domain:         Name,
		EventType:      e.cte,
		IdempotencyKey: e.key(doc),
		KeySource:      KeySource,
		OrderingKey:    e.supplier + "." + e.tlc,
		EventTime:      e.at,
		PartyID:        e.supplier,
		Identifiers:    ids,
	}
}

// key derives the idempotency key (see KeySource) of an event whose
// supplier, TLC, CTE type and event time are known.
func (e *event) key(doc domain.Doc) string {
	ref, _ := domain.Object(doc, fieldReferenceDocument)
	refType, _ := domain.String(ref, "type")
	refNumber, _ := domain.String(ref, "number")
	return domain.Key(Name, e.supplier, e.tlc, e.cte, e.at.Format(dateLayout),
		strings.ToLower(refType), refNumber)
}
