package gs1

import (
	"errors"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want error
	}{
		{"gtin14 ok", "00614141123452", 14, nil},
		{"gtin14 indicator 9", "90614141123455", 14, nil},
		{"gtin14 bad check", "00614141123453", 14, ErrCheckDigit},
		{"gtin lost leading zero", "0614141123452", 14, ErrLength},
		{"gln ok", "0614141000005", 13, nil},
		{"gln bad check", "0614141000006", 13, ErrCheckDigit},
		{"letters", "06141410000A5", 13, ErrNotDigits},
		{"empty", "", 13, ErrNotDigits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Validate(tt.in, tt.n); !errors.Is(got, tt.want) {
				t.Fatalf("Validate(%q, %d) = %v, want %v", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

func TestCheckDigit(t *testing.T) {
	for body, want := range map[string]byte{
		"0061414112345": '2', // GS1 General Specifications example
		"061414100000":  '5',
		"0000000000000": '0',
	} {
		if got := CheckDigit(body); got != want {
			t.Errorf("CheckDigit(%q) = %c, want %c", body, got, want)
		}
	}
}

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		get  func() (Key, bool)
		want string
	}{
		{"grai urn", func() (Key, bool) { return EPCScheme("grai") }, "a GRAI (a returnable asset)"},
		{"sgln urn", func() (Key, bool) { return EPCScheme("sgln") }, "an SGLN (a location)"},
		{"lgtin class", func() (Key, bool) { return EPCClass("lgtin") }, "an LGTIN (a lot of a trade item, a class: not one serialized item)"},
		{"giai digital link", func() (Key, bool) { return DigitalLinkKey("8004") }, "a GIAI (an individual asset)"},
		{"sscc digital link", func() (Key, bool) { return DigitalLinkKey("00") }, "an SSCC (a logistic unit)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, ok := tt.get()
			if !ok || k.String() != tt.want {
				t.Fatalf("got %q (%v), want %q", k, ok, tt.want)
			}
		})
	}
	for _, unknown := range []string{"", "sgtin-96", "SGTIN"} {
		if _, ok := EPCScheme(unknown); ok {
			t.Errorf("EPCScheme(%q) is known", unknown)
		}
	}
	if _, ok := DigitalLinkKey("21"); ok {
		t.Error("AI 21 (a serial) is not a primary key")
	}
}

func TestNDCOfGTIN(t *testing.T) {
	tests := []struct {
		name, gtin, want string
		ok               bool
	}{
		{"indicator 0", "00304094888202", "0409488820", true},
		{"indicator 5, a case", "50304094888207", "0409488820", true},
		{"wrong check digit still names its NDC", "00304094888209", "0409488820", true},
		{"not a US drug", "00614141123452", "", false},
		{"13 digits", "0304094888202", "", false},
		{"letters", "0030409488820X", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := NDCOfGTIN(tt.gtin)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("NDCOfGTIN(%q) = %q, %v; want %q, %v", tt.gtin, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestValidateSSCC(t *testing.T) {
	if err := ValidateSSCC("106141412345678908"); err != nil {
		t.Fatalf("valid SSCC: %v", err)
	}
	if err := ValidateSSCC("106141412345678901"); !errors.Is(err, ErrCheckDigit) {
		t.Fatalf("bad check digit: %v", err)
	}
}
