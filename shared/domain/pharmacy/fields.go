package pharmacy

import (
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
)

// required returns doc[key] as a trimmed, non-empty string, or an error
// with code c naming the field and the rule.
func required(doc domain.Doc, key string, c codes.Code) (string, error) {
	v, present := doc[key]
	if !present || v == nil {
		return "", codes.Errorf(c, "%s: required", key)
	}
	if _, ok := v.(string); !ok {
		return "", codes.Errorf(c, "%s: must be a string", key)
	}
	s, ok := domain.String(doc, key)
	if !ok {
		return "", codes.Errorf(c, "%s: must not be empty", key)
	}
	return s, nil
}

// optional returns doc[key] trimmed; absent, null and "" all give "". A
// value that is not a string is an error with code c.
func optional(doc domain.Doc, key string, c codes.Code) (string, error) {
	v, present := doc[key]
	if !present || v == nil {
		return "", nil
	}
	if _, ok := v.(string); !ok {
		return "", codes.Errorf(c, "%s: must be a string", key)
	}
	s, _ := domain.String(doc, key)
	return s, nil
}

// checkRequired checks the fields the schema requires, for callers that
// run Check without the schema.
func checkRequired(e *event, doc domain.Doc) error {
	id, err := required(doc, "transaction_id", codes.SchemaValidation)
	if err != nil {
		return err
	}
	for _, key := range [...]string{"actor_id", "unit"} {
		if _, err := required(doc, key, codes.SchemaValidation); err != nil {
			return err
		}
	}
	e.txID = id
	return nil
}

// dea validates a DEA number field and returns it upper-cased.
func dea(key, s string) (string, error) {
	s = upperASCII(s)
	if err := ValidateDEA(s); err != nil {
		return "", codes.Errorf(InvalidDEANumber, "%s: %s", key, err)
	}
	return s, nil
}

func checkRegistrant(e *event, doc domain.Doc) error {
	s, err := required(doc, "registrant_dea", InvalidDEANumber)
	if err != nil {
		return err
	}
	e.registrant, err = dea("registrant_dea", s)
	return err
}

func checkNDC(e *event, doc domain.Doc) error {
	s, err := required(doc, "ndc", InvalidNDC)
	if err != nil {
		return err
	}
	n11, err := NormalizeNDC(s)
	if err != nil {
		return codes.Errorf(InvalidNDC, "ndc: %s", err)
	}
	e.ndc, e.ndc11 = s, n11
	return nil
}

func checkSchedule(e *event, doc domain.Doc) error {
	s, err := required(doc, "dea_schedule", InvalidDEASchedule)
	if err != nil {
		return err
	}
	s = upperASCII(s)
	if !schedules[s] {
		return codes.Errorf(InvalidDEASchedule,
			"dea_schedule: must be one of II, IIN, III, IIIN, IV, V")
	}
	e.schedule = s
	return nil
}

func checkQuantity(e *event, doc domain.Doc) error {
	s, err := required(doc, "quantity_delta", codes.InvalidQuantity)
	if err != nil {
		return err
	}
	sign, detail, ok := parseQuantity(s)
	if !ok {
		return codes.Errorf(codes.InvalidQuantity, "quantity_delta: %s", detail)
	}
	if rule := signRules[e.eventType]; !rule.allows(sign) {
		return codes.Errorf(QuantitySignMismatch,
			"quantity_delta: must be %s for event_type %s", rule, e.eventType)
	}
	return nil
}

func checkLot(e *event, doc domain.Doc) error {
	lot, err := optional(doc, "lot", codes.SchemaValidation)
	if err != nil {
		return err
	}
	if lot == "" && scheduleII(e.schedule) {
		return codes.Errorf(codes.MissingLot, "lot: required for Schedule II and IIN")
	}
	e.lot = lot
	return nil
}

func checkCounterparty(e *event, doc domain.Doc) error {
	s, err := optional(doc, "counterparty_dea", InvalidDEANumber)
	if err != nil {
		return err
	}
	if s == "" {
		if scheduleII(e.schedule) && (e.eventType == TransferIn || e.eventType == TransferOut) {
			return codes.Errorf(MissingCounterparty,
				"counterparty_dea: required for Schedule II and IIN transfers")
		}
		return nil
	}
	e.counterparty, err = dea("counterparty_dea", s)
	return err
}

func checkTime(e *event, doc domain.Doc) error {
	s, err := required(doc, "occurred_at", codes.UnparseableEventTime)
	if err != nil {
		return err
	}
	e.at, err = domain.ParseTime("occurred_at", s)
	return err
}

func checkExpiry(_ *event, doc domain.Doc) error {
	s, err := optional(doc, "expiry", codes.SchemaValidation)
	if err != nil || s == "" {
		return err
	}
	if len(s) != len(time.DateOnly) {
		return codes.Errorf(codes.SchemaValidation, "expiry: must be a calendar date YYYY-MM-DD")
	}
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return codes.Errorf(codes.SchemaValidation, "expiry: must be a calendar date YYYY-MM-DD")
	}
	return nil
}
