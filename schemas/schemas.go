// Package schemas embeds deadletter's JSON Schemas (draft 2020-12): one per
// event domain, and the quarantine record. The files in this directory are
// the published contract; the Go code only makes them available.
package schemas

import (
	"embed"
	"fmt"
	"io/fs"
)

// FS holds every schema file and the example events under testdata/.
//
//go:embed *.schema.json all:testdata
var FS embed.FS

// File returns the schema file name of a domain ("pharmacy", "dscsa",
// "fsma") or of "quarantine-record".
func File(name string) string { return name + ".schema.json" }

// Read returns the bytes of the named schema (see File).
func Read(name string) ([]byte, error) {
	b, err := fs.ReadFile(FS, File(name))
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", name, err)
	}
	return b, nil
}

// ID returns the canonical $id under which the named schema is published.
func ID(name string) string {
	return "https://schemas.deadletter.dev/" + File(name)
}
