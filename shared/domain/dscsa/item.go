package dscsa

import (
	"errors"
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/gs1"
)

// Errors of reading an identifier a person pasted.
var (
	// ErrNotItem: a text is not a serialized item's identifier (an SGTIN
	// EPC URN or a GS1 Digital Link URI with a GTIN and a serial).
	ErrNotItem = errors.New("not an SGTIN EPC URN or a GS1 Digital Link URI with /01/ and /21/")
	// ErrNotSSCC: a text is not a container's SSCC (18 digits, an SSCC
	// EPC URN or a GS1 Digital Link URI with /00/).
	ErrNotSSCC = errors.New("not an SSCC-18, an SSCC EPC URN or a GS1 Digital Link URI with /00/")
)

// ParseItem reads a serialized item's identifier as a person may paste it
// (an SGTIN EPC URN "urn:epc:id:sgtin:0614141.112345.400", or a GS1
// Digital Link URI ".../01/<GTIN-14>/21/<serial>[?...]") by the rules an
// event's epcList is read with, and returns its GTIN-14 and its serial
// (percent-escapes decoded): the two halves of an event's ordering key.
func ParseItem(s string) (gtin, serial string, err error) {
	e, err := parseEPC(where{"item", -1}, s, &gtinCache{})
	switch {
	case err != nil:
		return "", "", fmt.Errorf("%w: %s", ErrNotItem, strings.TrimPrefix(codes.DetailOf(err), "item: "))
	case e.sscc != "":
		return "", "", fmt.Errorf("%w: an SSCC names a logistic unit, not an item", ErrNotItem)
	}
	return e.gtin, e.serial, nil
}

// ParseSSCC reads a container's SSCC as a person may paste it (18 digits,
// an SSCC EPC URN "urn:epc:id:sscc:0614141.1234567890", or a GS1 Digital
// Link URI ".../00/<SSCC-18>") by the rules an aggregation's parentID is
// read with, and returns the SSCC-18: an aggregation's ordering key.
func ParseSSCC(s string) (string, error) {
	s = strings.TrimSpace(s)
	if gs1.Digits(s) {
		if err := gs1.Validate(s, 18); err != nil {
			return "", fmt.Errorf("%w: %w", ErrNotSSCC, err)
		}
		return s, nil
	}
	p, err := parseParent(s, &gtinCache{})
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: %s", ErrNotSSCC, strings.TrimPrefix(err.Error(), "parentID: "))
	case p.sscc == "":
		return "", ErrNotSSCC
	}
	return p.sscc, nil
}

// IsItemURI reports whether s looks like an item URI (an SGTIN EPC URN or
// a Digital Link URI) rather than a bare GTIN, so that a caller can tell
// which of the two a person pasted.
func IsItemURI(s string) bool {
	s = strings.TrimSpace(s)
	if hasPrefixFold(s, sgtinPrefix) {
		return true
	}
	_, ok := digitalLinkPath(s)
	return ok
}
