package cli

import (
	"strings"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/spf13/cobra"
)

// idFlags are the identifier filters find, hold place and export share
// (api.ListRequest's identifier filters: the auditor reads them the same
// way for a search, a hold and an export, in every domain).
type idFlags struct {
	ndc, lot, registrant, transactionID, gtin, serial, sscc, tlc string
	ids                                                          []string
}

// add registers the flags on cmd.
func (f *idFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.ndc, "ndc", "", "NDC in any layout (0409-4888-20, 00409-4888-20, 00409488820)")
	fl.StringVar(&f.lot, "lot", "", "lot number (pharmacy, DSCSA) or traceability lot code (FSMA)")
	fl.StringVar(&f.registrant, "registrant", "", "registrant DEA number (pharmacy)")
	fl.StringVar(&f.transactionID, "transaction-id", "", "transaction id (pharmacy; with --registrant, older records too)")
	fl.StringVar(&f.gtin, "gtin", "", "GTIN, SGTIN EPC URN or GS1 Digital Link URI (DSCSA)")
	fl.StringVar(&f.serial, "serial", "", "serial number (DSCSA)")
	fl.StringVar(&f.sscc, "sscc", "", "container: SSCC-18, SSCC EPC URN or Digital Link /00/ (DSCSA)")
	fl.StringVar(&f.tlc, "tlc", "", "traceability lot code (FSMA)")
	fl.StringArrayVar(&f.ids, "id", nil, "name=value: a domain's search field without a flag of its own (repeatable)")
}

// identifiers returns the --id filters by name (nil for none); a filter
// that is not name=value is a usage error.
func (f *idFlags) identifiers() (map[string]string, error) {
	var m map[string]string
	for _, id := range f.ids {
		name, v, ok := strings.Cut(id, "=")
		if !ok || name == "" {
			return nil, usageErrorf("--id takes name=value (a domain's search field and its value)")
		}
		if m == nil {
			m = map[string]string{}
		}
		m[name] = v
	}
	return m, nil
}

// request returns the filters as a list request's.
func (f *idFlags) request() (api.ListRequest, error) {
	ids, err := f.identifiers()
	return api.ListRequest{NDC: strings.TrimSpace(f.ndc), Lot: f.lot, Registrant: f.registrant, TransactionID: f.transactionID,
		GTIN: f.gtin, Serial: f.serial, SSCC: f.sscc, TLC: f.tlc, Identifiers: ids}, err
}
