package dscsa

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotItem: a text is not a serialized item's identifier (an SGTIN EPC
// URN or a GS1 Digital Link URI with a GTIN and a serial).
var ErrNotItem = errors.New("not an SGTIN EPC URN or a GS1 Digital Link URI with /01/ and /21/")

// ParseItem reads a serialized item's identifier as a person may paste it
// (an SGTIN EPC URN "urn:epc:id:sgtin:0614141.112345.400", or a GS1
// Digital Link URI ".../01/<GTIN-14>/21/<serial>[?...]") by the rules an
// event's epcList is read with, and returns its GTIN-14 and its serial
// (percent-escapes decoded): the two halves of an event's ordering key.
func ParseItem(s string) (gtin, serial string, err error) {
	e, err := parseEPC(0, s, &gtinCache{})
	if err != nil {
		return "", "", fmt.Errorf("%w: %s", ErrNotItem, strings.TrimPrefix(err.Error(), "epcList[0]: "))
	}
	return e.gtin, e.serial, nil
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
