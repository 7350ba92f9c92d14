package gs1

// ValidateSSCC checks an 18-digit Serial Shipping Container Code.
func ValidateSSCC(s string) error { return Validate(s, 18) }

// Key names a GS1 identification key (or another EPC scheme) for people:
// its abbreviation and what it identifies, as error details say it ("a
// GRAI (a returnable asset)").
type Key struct {
	// Abbr is the key's abbreviation ("GRAI").
	Abbr string
	// What is what the key identifies ("a returnable asset").
	What string
}

// String returns "a GRAI (a returnable asset)".
func (k Key) String() string {
	article := "a"
	switch k.Abbr[0] {
	case 'A', 'E', 'F', 'H', 'I', 'L', 'M', 'N', 'O', 'R', 'S', 'X':
		article = "an" // read letter by letter: an SSCC, an LGTIN
	}
	return article + " " + k.Abbr + " (" + k.What + ")"
}

// epcSchemes are the EPC pure-identity URN schemes (EPC Tag Data Standard
// 2.x, urn:epc:id:<scheme>:...), by scheme name.
var epcSchemes = map[string]Key{
	"sgtin": {"SGTIN", "a serialized trade item"},
	"sscc":  {"SSCC", "a logistic unit"},
	"sgln":  {"SGLN", "a location"},
	"grai":  {"GRAI", "a returnable asset"},
	"giai":  {"GIAI", "an individual asset"},
	"gsrn":  {"GSRN", "a service relation recipient"},
	"gsrnp": {"GSRNP", "a service relation provider"},
	"gdti":  {"GDTI", "a document"},
	"cpi":   {"CPI", "a component or part"},
	"sgcn":  {"SGCN", "a coupon"},
	"ginc":  {"GINC", "a consignment"},
	"gsin":  {"GSIN", "a shipment"},
	"itip":  {"ITIP", "a piece of a trade item"},
	"upui":  {"UPUI", "a unit pack"},
	"pgln":  {"PGLN", "a party"},
	"gid":   {"GID", "a General Identifier, not a GS1 key"},
	"usdod": {"USDOD", "a US Department of Defense identifier, not a GS1 key"},
	"adi":   {"ADI", "an aerospace and defense identifier, not a GS1 key"},
	"bic":   {"BIC", "an intermodal container, not a GS1 key"},
	"imovn": {"IMOVN", "an IMO vessel number, not a GS1 key"},
}

// epcClasses are the EPC class URN schemes (urn:epc:class:<scheme>:...).
var epcClasses = map[string]Key{
	"lgtin": {"LGTIN", "a lot of a trade item, a class: not one serialized item"},
}

// digitalLinkKeys are the GS1 Digital Link primary keys, by application
// identifier.
var digitalLinkKeys = map[string]Key{
	"00":   {"SSCC", "a logistic unit"},
	"01":   {"GTIN", "a trade item"},
	"253":  {"GDTI", "a document"},
	"255":  {"GCN", "a coupon"},
	"401":  {"GINC", "a consignment"},
	"402":  {"GSIN", "a shipment"},
	"414":  {"GLN", "a location"},
	"417":  {"PGLN", "a party"},
	"8003": {"GRAI", "a returnable asset"},
	"8004": {"GIAI", "an individual asset"},
	"8006": {"ITIP", "a piece of a trade item"},
	"8010": {"CPI", "a component or part"},
	"8013": {"GMN", "a model"},
	"8017": {"GSRNP", "a service relation provider"},
	"8018": {"GSRN", "a service relation recipient"},
}

// EPCScheme returns the key of an EPC pure-identity URN scheme
// ("grai" of urn:epc:id:grai:...), given in lower case; ok is false for a
// scheme the EPC Tag Data Standard does not define.
func EPCScheme(scheme string) (k Key, ok bool) {
	k, ok = epcSchemes[scheme]
	return k, ok
}

// EPCClass returns the key of an EPC class URN scheme ("lgtin" of
// urn:epc:class:lgtin:...), given in lower case.
func EPCClass(scheme string) (k Key, ok bool) {
	k, ok = epcClasses[scheme]
	return k, ok
}

// DigitalLinkKey returns the primary key of a GS1 Digital Link
// application identifier ("8003": GRAI); ok is false when ai is not one.
func DigitalLinkKey(ai string) (k Key, ok bool) {
	k, ok = digitalLinkKeys[ai]
	return k, ok
}

// NDCOfGTIN returns the 10-digit National Drug Code a GTIN-14 carries
// (GS1 US: a US drug's GTIN is the indicator digit, "03", the NDC's 10
// digits without hyphens and the check digit); ok is false when gtin is
// not 14 digits with "03" after its indicator. The check digit is not
// checked: a GTIN written with a wrong one still names its NDC.
func NDCOfGTIN(gtin string) (ndc10 string, ok bool) {
	if len(gtin) != 14 || !Digits(gtin) || gtin[1:3] != "03" {
		return "", false
	}
	return gtin[3:13], true
}
