package schemas

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Example is one example event under testdata/<domain>/{valid,invalid}/.
// An invalid example's file name is "<CODE>--<description>.json": CODE is
// the exact error code the validation gate must return for it.
type Example struct {
	// Name is the file name.
	Name string
	// Valid is true for files under valid/.
	Valid bool
	// Code is the expected error code of an invalid example ("" when valid).
	Code string
	// Data is the file's bytes.
	Data []byte
}

// Examples returns every example event of a domain, valid ones first, each
// group in file-name order.
func Examples(domain string) ([]Example, error) {
	var out []Example
	for _, kind := range []string{"valid", "invalid"} {
		dir := path.Join("testdata", domain, kind)
		entries, err := fs.ReadDir(FS, dir)
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", dir, err)
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, name := range names {
			data, err := fs.ReadFile(FS, path.Join(dir, name))
			if err != nil {
				return nil, fmt.Errorf("schemas: %s: %w", name, err)
			}
			ex := Example{Name: name, Valid: kind == "valid", Data: data}
			if !ex.Valid {
				code, _, ok := strings.Cut(name, "--")
				if !ok {
					return nil, fmt.Errorf("schemas: %s/%s: an invalid example's name must be <CODE>--<description>.json", dir, name)
				}
				ex.Code = code
			}
			out = append(out, ex)
		}
	}
	return out, nil
}
