package fsma

import "github.com/deadletter/deadletter/shared/codes"

// The FSMA 204 domain's own error codes (food traceability). The codes
// every domain shares are in package codes; these are registered there by
// package registry (Spec().Codes).
const (
	// MissingTLC: the traceability lot code is absent.
	MissingTLC codes.Code = "MISSING_TLC"
	// MissingKDE: a key data element the CTE requires is absent; the
	// detail names which.
	MissingKDE codes.Code = "MISSING_KDE"
	// InvalidGLN: a GLN is not 13 digits with a valid check digit.
	InvalidGLN codes.Code = "INVALID_GLN"
	// MissingSupplier: the supplier id, by which failures are grouped, is absent.
	MissingSupplier codes.Code = "MISSING_SUPPLIER"
)

// Codes lists the domain's own codes, in documentation order.
func Codes() []codes.Info {
	return []codes.Info{
		{Code: MissingTLC, Meaning: "the traceability lot code is absent"},
		{Code: MissingKDE, Meaning: "a key data element the CTE requires is absent (detail names it)"},
		{Code: InvalidGLN, Meaning: "a GLN is not 13 digits with a valid check digit"},
		{Code: MissingSupplier, Meaning: "the supplier id is absent"},
	}
}
