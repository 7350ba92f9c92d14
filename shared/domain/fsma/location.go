package fsma

import (
	"errors"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/gs1"
)

// placeGap returns "" when doc[field] is a location object with a gln, or
// with a name and an address; else the name of what is missing.
func placeGap(doc domain.Doc, field string) string {
	loc, ok := domain.Object(doc, field)
	if !ok {
		return field
	}
	if placeComplete(loc) {
		return ""
	}
	return field + " (gln, or name and address)"
}

// placeComplete reports whether a location object has a gln, or a name and
// an address.
func placeComplete(loc domain.Doc) bool {
	if _, ok := domain.String(loc, "gln"); ok {
		return true
	}
	_, hasName := domain.String(loc, "name")
	_, hasAddress := domain.String(loc, "address")
	return hasName && hasAddress
}

// checkLocations checks every location object doc gives: complete
// (MISSING_KDE), and its gln, if any, a valid GLN (INVALID_GLN).
func checkLocations(doc domain.Doc) error {
	for _, field := range locationFields {
		loc, ok := domain.Object(doc, field)
		if !ok {
			continue
		}
		if !placeComplete(loc) {
			return codes.Errorf(MissingKDE, "%s requires gln, or name and address", field)
		}
		gln, ok := domain.String(loc, "gln")
		if !ok {
			continue
		}
		if err := gs1.ValidateGLN(gln); err != nil {
			return codes.Errorf(InvalidGLN, "%s.gln: %s", field, glnRule(err))
		}
	}
	return nil
}

// glnRule names the GLN rule a gs1 error reports.
func glnRule(err error) string {
	switch {
	case errors.Is(err, gs1.ErrNotDigits):
		return "a GLN must be digits only"
	case errors.Is(err, gs1.ErrLength):
		return "a GLN must be exactly 13 digits (leading zeros included)"
	default:
		return "GS1 check digit mismatch"
	}
}

// locationGLN returns the gln of the CTE's own location, if any: location,
// else, for shipping, ship_from and, for receiving, ship_to (the same place
// under 21 CFR 1.1340(a)(5) and 1.1345(a)(5)).
func locationGLN(cte string, doc domain.Doc) (string, bool) {
	field := fieldLocation
	if _, ok := domain.Object(doc, fieldLocation); !ok {
		switch cte {
		case Shipping:
			field = "ship_from"
		case Receiving:
			field = "ship_to"
		}
	}
	loc, ok := domain.Object(doc, field)
	if !ok {
		return "", false
	}
	return domain.String(loc, "gln")
}
