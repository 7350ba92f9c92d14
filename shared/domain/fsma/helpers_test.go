package fsma_test

import (
	"encoding/json"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/subjects"
)

// fallbackToken is the subject token used when a document's CTE type
// cannot be derived (malformed JSON, missing or unknown cte_type).
const fallbackToken = fsma.Shipping

const testdataDir = "testdata/fsma"

// checker is the checker under test.
var checker = fsma.Checker{}

// testFile is one example event under schemas/testdata/fsma.
type testFile struct {
	name  string // file name
	valid bool
	code  codes.Code // expected code of an invalid file
	data  []byte
}

// loadTestdata reads every example event of the fsma domain.
func loadTestdata(tb testing.TB) []testFile {
	tb.Helper()
	examples, err := schemas.Examples("fsma")
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]testFile, 0, len(examples))
	for _, ex := range examples {
		out = append(out, testFile{name: ex.Name, valid: ex.Valid, code: codes.Code(ex.Code), data: ex.Data})
	}
	return out
}

// readTestdata returns the bytes of one example event, e.g. "valid/shipping-gln.json".
func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := fs.ReadFile(schemas.FS, path.Join(testdataDir, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// newGate returns a gate with the built-in checkers.
func newGate(tb testing.TB) *gate.Gate {
	tb.Helper()
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// subjectFor returns the subject a publisher would use for data.
func subjectFor(data []byte) string {
	token := fallbackToken
	if doc, err := gate.Decode(data); err == nil {
		if t, err := (fsma.Checker{}).EventType(doc); err == nil {
			token = t
		}
	}
	return subjects.Event(fsma.Name, token)
}

// decodeMap decodes JSON test input into a map, numbers kept as json.Number.
func decodeMap(tb testing.TB, data []byte) map[string]any {
	tb.Helper()
	doc, err := gate.Decode(data)
	if err != nil {
		tb.Fatal(err)
	}
	return doc
}

// encode marshals a document back to JSON.
func encode(tb testing.TB, doc map[string]any) []byte {
	tb.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// mutate returns the example event name with fn applied to it.
func mutate(tb testing.TB, name string, fn func(doc map[string]any)) []byte {
	tb.Helper()
	doc := decodeMap(tb, readTestdata(tb, name))
	fn(doc)
	return encode(tb, doc)
}

// knownCodes are the codes the gate may return for an fsma event.
var knownCodes = map[codes.Code]bool{
	codes.MalformedJSON:        true,
	codes.NotAnObject:          true,
	codes.DuplicateKey:         true,
	codes.InvalidUTF8:          true,
	codes.PayloadTooLarge:      true,
	codes.UnknownSubject:       true,
	codes.SchemaValidation:     true,
	codes.SubjectMismatch:      true,
	codes.UnparseableEventTime: true,
	fsma.MissingTLC:            true,
	fsma.MissingKDE:            true,
	fsma.InvalidGLN:            true,
	fsma.MissingSupplier:       true,
	codes.InvalidQuantity:      true,
}

// checkEnvelope reports what is incomplete in the envelope of a valid event.
func checkEnvelope(t testing.TB, env envelope.Envelope) {
	t.Helper()
	if env.Domain != fsma.Name {
		t.Errorf("Domain = %q, want %q", env.Domain, fsma.Name)
	}
	if fsma.RequiredKDEs(env.EventType) == nil {
		t.Errorf("EventType = %q, not a CTE type", env.EventType)
	}
	if !strings.HasPrefix(env.IdempotencyKey, "fsma_") || len(env.IdempotencyKey) != len("fsma_")+32 {
		t.Errorf("IdempotencyKey = %q, want fsma_<32 hex>", env.IdempotencyKey)
	}
	if env.KeySource != fsma.KeySource {
		t.Errorf("KeySource = %q", env.KeySource)
	}
	if env.EventTime.IsZero() || env.EventTime.Location().String() != "UTC" {
		t.Errorf("EventTime = %v, want a UTC time", env.EventTime)
	}
	if env.OrderingKey == "" || env.PartyID == "" {
		t.Errorf("OrderingKey = %q, PartyID = %q, want both set", env.OrderingKey, env.PartyID)
	}
	if env.OrderingKey != env.PartyID+"."+env.Identifiers["tlc"] {
		t.Errorf("OrderingKey = %q, want <supplier_id>.<tlc>", env.OrderingKey)
	}
	if env.Identifiers["supplier_id"] != env.PartyID || env.Identifiers["tlc"] == "" {
		t.Errorf("Identifiers = %v, want supplier_id and tlc", env.Identifiers)
	}
}
