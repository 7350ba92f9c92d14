package record

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

func TestCanonicalRFC8785(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{
			name: "rfc 3.2.2 example",
			in: `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			name: "rfc 3.2.3 sorting by utf-16 code units",
			in: `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{
			name: "nested objects sorted, arrays kept in order",
			in:   ` { "b" : [ {"z":1,"a":2}, 3 ] , "a" : { "y" : null , "x" : true } } `,
			want: `{"a":{"x":true,"y":null},"b":[{"a":2,"z":1},3]}`,
		},
		{
			name: "key order is by code unit, not by locale",
			in:   `{"b":1,"B":2,"a":3,"A":4,"_":5,"aa":6,"":7}`,
			want: `{"":7,"A":4,"B":2,"_":5,"a":3,"aa":6,"b":1}`,
		},
		{
			name: "control characters: short escapes and lowercase \\u00xx",
			in:   `"\u0000\u0001\b\t\n\u000b\f\r\u001f\u001F"`,
			want: `"\u0000\u0001\b\t\n\u000b\f\r\u001f\u001f"`,
		},
		{
			name: "non-ascii and DEL are written raw",
			in:   `"\u00e9\u007f\u2028\u2029\ud83d\ude00"`,
			want: "\"é\u007f\u2028\u2029😀\"",
		},
		{
			name: "html characters and solidus are not escaped",
			in:   `"\u003c\u003e\u0026\/"`,
			want: `"<>&/"`,
		},
		{
			name: "integers",
			in:   `[0, -0, 1, -1, 10, 1E2, 100e-2, 9007199254740991, -9007199254740991, 9007199254740992]`,
			want: `[0,0,1,-1,10,100,1,9007199254740991,-9007199254740991,9007199254740992]`,
		},
		{
			name: "number forms",
			in:   `[1e21, 1e20, 1e-6, 1e-7, 0.1, 123456789012345680000, 1.5E+300, -2.5e-10]`,
			want: `[1e+21,100000000000000000000,0.000001,1e-7,0.1,123456789012345680000,1.5e+300,-2.5e-10]`,
		},
		{name: "top-level string", in: ` "a" `, want: `"a"`},
		{name: "top-level literal", in: "true\n", want: `true`},
		{name: "empty containers", in: `{ "a" : [ ] , "b" : { } }`, want: `{"a":[],"b":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonical: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonical\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestCanonicalRFC8785Numbers checks the IEEE-754 → ES6 number examples of
// RFC 8785 appendix B, each given as the exact double in JSON.
func TestCanonicalRFC8785Numbers(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		in := strconv.FormatFloat(math.Float64frombits(tt.bits), 'e', 16, 64)
		t.Run(tt.want, func(t *testing.T) {
			got, err := Canonical([]byte(in))
			if err != nil {
				t.Fatalf("Canonical(%s): %v", in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonical(%s) = %s, want %s", in, got, tt.want)
			}
		})
	}
}

func TestCanonicalRejects(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"duplicate member", `{"a":1,"a":2}`},
		{"nested duplicate member", `{"x":{"a":1,"a":1}}`},
		{"duplicate after unescaping", `{"a":1,"\u0061":2}`},
		{"lone high surrogate", `"\ud800"`},
		{"lone low surrogate", `"\udc00"`},
		{"invalid utf-8", "\"\xff\""},
		{"number out of range", `1e400`},
		{"leading zero", `01`},
		{"hex number", `0x10`},
		{"trailing data", `{} {}`},
		{"unterminated", `{"a":1`},
		{"raw control character", "\"a\nb\""},
		{"bad escape", `"\x41"`},
		{"single quotes", `{'a':1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical([]byte(tt.in))
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("Canonical(%q) = %q, %v; want ErrInvalidJSON", tt.in, got, err)
			}
		})
	}
}

func TestCheckNumbers(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		ok   bool
	}{
		{"small integers", `{"a":0,"b":-1,"c":[1,2,3]}`, true},
		{"max safe", `{"a":9007199254740991,"b":-9007199254740991}`, true},
		{"digits inside strings are not numbers", `{"a":"99999999999999999999","b":"\"1.5\""}`, true},
		{"escaped quote does not end the string", `{"a":"x\"1e400"}`, true},
		{"above max safe", `{"a":9007199254740992}`, false},
		{"below min safe", `{"a":-9007199254740992}`, false},
		{"fraction", `{"a":1.5}`, false},
		{"exponent", `{"a":1e2}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkNumbers([]byte(tt.doc))
			if (err == nil) != tt.ok {
				t.Errorf("checkNumbers(%s) = %v, want ok=%v", tt.doc, err, tt.ok)
			}
		})
	}
}
