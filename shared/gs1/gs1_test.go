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
