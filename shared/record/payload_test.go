package record

import (
	"bytes"
	"errors"
	"testing"
)

func TestNewPayload(t *testing.T) {
	tests := []struct {
		name     string
		in       []byte
		encoding string
	}{
		{"json object", []byte(`{"a":"é","b":[1,2]}`), EncodingText},
		{"json array", []byte(`[1, "two", null]`), EncodingText},
		{"json with surrounding whitespace", []byte("\n {\"a\":1}\r\n"), EncodingText},
		{"json with escapes", []byte(`{"a":"\u00e9\"\\<"}`), EncodingText},
		{"invalid utf-8 inside json string", []byte("{\"a\":\"\xff\"}"), EncodingBase64},
		{"binary", []byte{0x00, 0x01, 0xfe, 0xff, 0x80}, EncodingBase64},
		{"non-json text", []byte("hello, world"), EncodingBase64},
		{"truncated json", []byte(`{"a":`), EncodingBase64},
		{"json with a duplicate member, kept verbatim", []byte(`{"a":1,"a":2}`), EncodingText},
		{"empty", []byte{}, EncodingBase64},
		{"nil", nil, EncodingBase64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPayload(tt.in)
			if p.Encoding != tt.encoding {
				t.Errorf("Encoding = %q, want %q", p.Encoding, tt.encoding)
			}
			if p.Size != len(tt.in) {
				t.Errorf("Size = %d, want %d", p.Size, len(tt.in))
			}
			if p.Encoding == EncodingText && p.Data != string(tt.in) {
				t.Errorf("text Data = %q, want the bytes themselves", p.Data)
			}
			got, err := p.Bytes()
			if err != nil {
				t.Fatalf("Bytes: %v", err)
			}
			if !bytes.Equal(got, tt.in) {
				t.Errorf("Bytes = %q, want %q", got, tt.in)
			}
			// The payload survives a record's seal and stored form.
			r := FromFailure(testFailure(), t0)
			r.Payload = p
			_, raw := mustSeal(t, r)
			back, err := Parse(raw)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got, err := back.Payload.Bytes(); err != nil || !bytes.Equal(got, tt.in) {
				t.Errorf("stored payload = %q, %v; want %q", got, err, tt.in)
			}
		})
	}
}

func TestPayloadBytesDetectsTampering(t *testing.T) {
	good := NewPayload([]byte(`{"lot":"L01"}`))
	bin := NewPayload([]byte{0, 1, 2, 3})
	tests := []struct {
		name string
		p    *Payload
		want error
	}{
		{"sha256 changed", &Payload{Encoding: good.Encoding, Data: good.Data, SHA256: bin.SHA256, Size: good.Size}, ErrPayloadDigest},
		{"data changed", &Payload{Encoding: good.Encoding, Data: `{"lot":"L02"}`, SHA256: good.SHA256, Size: good.Size}, ErrPayloadDigest},
		{"size changed", &Payload{Encoding: good.Encoding, Data: good.Data, SHA256: good.SHA256, Size: good.Size + 1}, ErrPayloadDigest},
		{"base64 data changed", &Payload{Encoding: bin.Encoding, Data: "AAECBA==", SHA256: bin.SHA256, Size: bin.Size}, ErrPayloadDigest},
		{"bad base64", &Payload{Encoding: EncodingBase64, Data: "!!!", SHA256: bin.SHA256, Size: bin.Size}, ErrPayloadEncoding},
		{"unknown encoding", &Payload{Encoding: "hex", Data: "00", SHA256: bin.SHA256, Size: 1}, ErrPayloadEncoding},
		{"nil payload", nil, ErrPayloadEncoding},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if b, err := tt.p.Bytes(); !errors.Is(err, tt.want) {
				t.Errorf("Bytes = %q, %v; want %v", b, err, tt.want)
			}
		})
	}
}
