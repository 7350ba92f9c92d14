package record

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// checkFastAgainstLibrary requires the fast canonicalizer, when it accepts
// doc, to produce exactly the library's bytes (and the library to accept
// doc), and Canonical to agree with the library either way.
func checkFastAgainstLibrary(t testing.TB, doc []byte) (fast bool) {
	t.Helper()
	want, libErr := jcs.Transform(doc)
	got, ok := canonicalFast(doc)
	if ok {
		if libErr != nil {
			t.Fatalf("fast path accepted %q, the library rejects it: %v", doc, libErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("fast path differs from the library on %q\n fast %q\n lib  %q", doc, got, want)
		}
	}
	c, err := Canonical(doc)
	if (err != nil) != (libErr != nil) || (err == nil && !bytes.Equal(c, want)) {
		t.Fatalf("Canonical(%q) = %q, %v; library %q, %v", doc, c, err, want, libErr)
	}
	return ok
}

func TestCanonicalFastMatchesLibrary(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		fast bool // whether the fast path must take it
	}{
		{"empty object", `{}`, true},
		{"empty array with spaces", ` [ ] `, true},
		{"nested sort", `{"b":{"d":1,"c":[true,false,null]},"a":"x"}`, true},
		{"escapes decoded and re-escaped", `{"s":"\u0041\/\"\\\b\f\n\r\t\u001f\u00e9\u2028"}`, true},
		{"escaped member names sort decoded", `{"\u0062":1,"a":2,"\n":3}`, true},
		{"raw non-ascii kept", "{\"é\":\"ü😀\"}", true},
		{"negative zero", `[-0,0,-1,9007199254740991,-9007199254740991]`, true},
		{"top-level scalars", `"a"`, true},
		{"whitespace everywhere", "\t{ \"a\" :\n[ 1 , 2 ]\r}\n", true},
		{"fraction goes to the library", `{"a":1.5}`, false},
		{"exponent goes to the library", `[1e2]`, false},
		{"above 2^53 goes to the library", `[9007199254740992]`, false},
		{"surrogate escape goes to the library", `"\ud83d\ude00"`, false},
		{"name above U+E000 goes to the library", "{\"\ufb33\":1,\"😀\":2}", false},
		{"duplicate member goes to the library", `{"a":1,"a":2}`, false},
		{"duplicate after unescaping goes to the library", `{"a":1,"\u0061":2}`, false},
		{"invalid utf-8 goes to the library", "\"\xff\"", false},
		{"raw control goes to the library", "\"a\nb\"", false},
		{"trailing comma goes to the library", `[1,]`, false},
		{"trailing data goes to the library", `{} {}`, false},
		{"leading zero goes to the library", `[01]`, false},
		{"literal glued to a string goes to the library", `[true"a"]`, false},
		{"empty input goes to the library", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if fast := checkFastAgainstLibrary(t, []byte(tt.doc)); fast != tt.fast {
				t.Errorf("fast path taken = %v, want %v", fast, tt.fast)
			}
		})
	}
}

// TestCanonicalFastRecords requires every stored record the package writes
// to take the fast path and match the library.
func TestCanonicalFastRecords(t *testing.T) {
	_, raws := chain(t, ClassExhausted, plain(KindCorrected, KindRedriveRequested, KindReplayFailed,
		KindRedriveRequested, KindPoisoned, KindReleased, KindResolved)...)
	f := testFailure()
	f.Payload = []byte{0xff, 0x00, '"', '\\'} // base64 payload
	f.Headers["X-Odd"] = []string{"tab\there", "quote\"", "ünï", "\u2028"}
	_, more := chainFor(t, f)
	for i, raw := range append(raws, more...) {
		if !checkFastAgainstLibrary(t, raw) {
			t.Errorf("record %d did not take the fast path", i)
		}
	}
}

// TestCanonicalFastRandom compares the two canonicalizers on many random
// documents built from the shapes records use and the ones the fast path
// must decline.
func TestCanonicalFastRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fast := 0
	const n = 20000
	for range n {
		var b strings.Builder
		randomValue(rng, &b, 0)
		if checkFastAgainstLibrary(t, []byte(b.String())) {
			fast++
		}
	}
	if fast < n/4 {
		t.Errorf("only %d of %d random documents took the fast path", fast, n)
	}
}

// randomPieces are string fragments: escapes, unicode, control characters.
var randomPieces = []string{
	"a", "Z", "0", " ", "é", "€", "😀", "\ufb33", "\u2028", "\x7f",
	`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0000`, `\u001F`, `\u0041`, `\u00e9`, `\uFFFF`,
	`\ud83d\ude00`, `\ud800`, "<", "&",
}

func randomString(rng *rand.Rand, b *strings.Builder) {
	b.WriteByte('"')
	for range rng.IntN(6) {
		b.WriteString(randomPieces[rng.IntN(len(randomPieces))])
	}
	if rng.IntN(200) == 0 {
		b.WriteByte(0x01) // raw control character: invalid
	}
	b.WriteByte('"')
}

var randomNumbers = []string{"0", "-0", "7", "-12", "9007199254740991", "-9007199254740991",
	"9007199254740992", "12345678901234567", "1.5", "1e2", "-0.0", "1E-7", "01", "-"}

func randomSpace(rng *rand.Rand, b *strings.Builder) {
	if rng.IntN(4) == 0 {
		b.WriteString([]string{" ", "\n", "\t", "\r\n  "}[rng.IntN(4)])
	}
}

func randomValue(rng *rand.Rand, b *strings.Builder, depth int) {
	randomSpace(rng, b)
	k := rng.IntN(10)
	if depth > 4 && k >= 7 {
		k = 0
	}
	switch k {
	case 0, 1:
		randomString(rng, b)
	case 2:
		b.WriteString(randomNumbers[rng.IntN(len(randomNumbers))])
	case 3:
		b.WriteString([]string{"true", "false", "null"}[rng.IntN(3)])
	case 4, 5, 6:
		b.WriteByte('{')
		for i := range rng.IntN(6) {
			if i > 0 {
				b.WriteByte(',')
			}
			randomSpace(rng, b)
			if rng.IntN(3) == 0 {
				fmt.Fprintf(b, `"%c"`, 'a'+rune(rng.IntN(4))) // collisions: duplicates
			} else {
				randomString(rng, b)
			}
			randomSpace(rng, b)
			b.WriteByte(':')
			randomValue(rng, b, depth+1)
		}
		b.WriteByte('}')
	default:
		b.WriteByte('[')
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			randomValue(rng, b, depth+1)
		}
		b.WriteByte(']')
	}
	randomSpace(rng, b)
}

// FuzzCanonicalFast: whenever the fast path accepts an input, its output is
// the library's. Run with `go test -fuzz FuzzCanonicalFast ./shared/record`.
func FuzzCanonicalFast(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":[true,null,"x\n"]}`, `"\u00e9\ud83d\ude00"`, `[-0,1.5]`,
		`{"a":{"c":1,"b":2},"\u0061b":3}`, "{\"é\":\"ü\"}"} {
		f.Add([]byte(s))
	}
	_, raws := chain(f, ClassValidation, plain(KindCorrected)...)
	for _, raw := range raws {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkFastAgainstLibrary(t, doc)
	})
}

func BenchmarkCanonical(b *testing.B) {
	r := benchRecord()
	if err := Seal(&r); err != nil {
		b.Fatal(err)
	}
	raw, err := Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		fn   func([]byte) ([]byte, error)
	}{
		{"fast", Canonical},
		{"library", canonicalLibrary},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.fn(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
