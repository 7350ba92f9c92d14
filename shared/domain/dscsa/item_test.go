package dscsa

import (
	"errors"
	"testing"
)

// TestParseItem: an item identifier pasted as an SGTIN EPC URN (any case
// of the prefix, percent-escaped serial) or a GS1 Digital Link URI (with
// a query string holding &) gives the GTIN-14 and serial of the ordering
// key; anything else is ErrNotItem.
func TestParseItem(t *testing.T) {
	for _, tc := range []struct {
		name, in, gtin, serial string
		uri, ok                bool
	}{
		{"sgtin", "urn:epc:id:sgtin:0614141.012345.400", "00614141123452", "400", true, true},
		{"sgtin upper-case, escaped serial", " URN:EPC:ID:SGTIN:0614141.107346.SN%2F0042%3FA ", "10614141073464", "SN/0042?A", true, true},
		{"digital link with a query", "https://id.gs1.org/01/10614141073464/21/SN%2F0043?17=270101&10=A1&B", "10614141073464", "SN/0043", true, true},
		{"digital link with a lot before the serial", "https://example.com/dl/01/00614141123452/10/L%C3%9C1/21/400", "00614141123452", "400", true, true},
		{"digital link without serial", "https://id.gs1.org/01/10614141073464", "", "", true, false},
		{"sgtin without serial", "urn:epc:id:sgtin:0614141.112345", "", "", true, false},
		{"bare gtin", "10614141073464", "", "", false, false},
		{"an SSCC URN is a logistic unit, not an item", "urn:epc:id:sscc:0304094.0000001234", "", "", false, false},
		{"an SSCC Digital Link", "https://id.gs1.org/00/003040940000012346", "", "", true, false},
		{"a GRAI", "urn:epc:id:grai:0304094.00001.TOTE-7", "", "", false, false},
		{"lot text", "Müller & Söhne <Großhandel>", "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsItemURI(tc.in); got != tc.uri {
				t.Errorf("IsItemURI = %v, want %v", got, tc.uri)
			}
			gtin, serial, err := ParseItem(tc.in)
			if tc.ok != (err == nil) || gtin != tc.gtin || serial != tc.serial {
				t.Fatalf("ParseItem = %q, %q, %v; want %q, %q (ok %v)", gtin, serial, err, tc.gtin, tc.serial, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrNotItem) {
				t.Errorf("error %v is not ErrNotItem", err)
			}
		})
	}
}

// TestParseSSCC: a container's SSCC pasted as 18 digits, an SSCC EPC URN
// or a Digital Link /00/ URI gives the SSCC-18; a wrong check digit, an
// SGTIN parent or a text is ErrNotSSCC.
func TestParseSSCC(t *testing.T) {
	const sscc = "106141412345678908"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"18 digits", " " + sscc + " ", sscc},
		{"urn", "urn:epc:id:sscc:0614141.1234567890", sscc},
		{"digital link with a query", "https://id.gs1.org/00/" + sscc + "?a=1&b=<2>", sscc},
		{"check digit", "106141412345678901", ""},
		{"17 digits", "10614141234567890", ""},
		{"sgtin", "urn:epc:id:sgtin:0614141.012345.400", ""},
		{"text", "Müller & Söhne <Großhandel>", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSSCC(tc.in)
			if got != tc.want || (tc.want == "") != errors.Is(err, ErrNotSSCC) {
				t.Fatalf("ParseSSCC = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
