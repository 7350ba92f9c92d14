package fsma

// Field names of an FSMA event (see schemas/fsma.schema.json).
const (
	fieldSupplier          = "supplier_id"
	fieldCTEType           = "cte_type"
	fieldTLC               = "traceability_lot_code"
	fieldInputTLCs         = "input_tlcs"
	fieldEventTime         = "event_time"
	fieldLocation          = "location"
	fieldQuantity          = "quantity"
	fieldTLCSource         = "tlc_source"
	fieldTLCSourceRef      = "tlc_source_reference"
	fieldReferenceDocument = "reference_document"
	fieldHarvestDateStart  = "harvest_date_start"
	fieldHarvestDateEnd    = "harvest_date_end"
)

// locationFields lists every field that holds a location object, in the
// order they are checked.
var locationFields = []string{
	fieldLocation,
	fieldTLCSource,
	"ship_from",
	"ship_to",
	"previous_source_location",
	"subsequent_recipient",
	"harvest_location",
	"cooling_location",
}

// dateFields lists every field that holds a calendar date "YYYY-MM-DD".
var dateFields = []string{
	"harvest_date",
	"cooling_date",
	fieldHarvestDateStart,
	fieldHarvestDateEnd,
}
