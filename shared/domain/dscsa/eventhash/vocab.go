package eventhash

// cbvWords are the bare words of the CBV 2.0 vocabularies the EPCIS 2.0
// JSON-LD context maps to CBV web URIs, by the prefix of their terms.
var cbvWords = map[string]map[string]struct{}{
	"BizStep-": words("accepting", "arriving", "assembling", "collecting", "commissioning",
		"consigning", "creating_class_instance", "cycle_counting", "decommissioning", "departing",
		"destroying", "disassembling", "dispensing", "encoding", "entering_exiting", "holding",
		"inspecting", "installing", "killing", "loading", "other", "packing", "picking", "receiving",
		"removing", "repackaging", "repairing", "replacing", "reserving", "retail_selling", "sampling",
		"sensor_reporting", "shipping", "staging_outbound", "stock_taking", "stocking", "storing",
		"transporting", "unloading", "unpacking", "void_shipping"),
	"Disp-": words("active", "available", "completeness_inferred", "completeness_verified",
		"conformant", "container_closed", "container_open", "damaged", "destroyed", "dispensed",
		"disposed", "encoded", "expired", "in_progress", "in_transit", "inactive", "mismatch_class",
		"mismatch_instance", "mismatch_quantity", "needs_replacement", "no_pedigree_match",
		"non_conformant", "non_sellable_other", "partially_dispensed", "recalled", "reserved",
		"retail_sold", "returned", "sellable_accessible", "sellable_not_accessible", "stolen",
		"unavailable", "unknown"),
	"BTT-": words("bol", "cert", "desadv", "inv", "pedigree", "po", "poc", "prodorder", "recadv",
		"rma", "testprd", "testres", "upevt"),
	"SDT-": words("location", "owning_party", "possessing_party"),
	// The GS1 Web Vocabulary terms of a sensorReport's type and exception
	// (https://gs1.org/voc/), and the CBV component and error-reason
	// terms.
	"gs1:": words("AbsoluteHumidity", "AbsorbedDose", "AbsorbedDoseRate", "Acceleration", "Altitude",
		"AmountOfSubstance", "AmountOfSubstancePerUnitVolume", "Angle", "AngularAcceleration",
		"AngularMomentum", "AngularVelocity", "Area", "Capacitance", "Conductance", "Conductivity",
		"Count", "Density", "Dimensionless", "DoseEquivalent", "DoseEquivalentRate",
		"DynamicViscosity", "ElectricCharge", "ElectricCurrent", "ElectricCurrentDensity",
		"ElectricFieldStrength", "Energy", "Exposure", "Force", "Frequency", "Illuminance",
		"Inductance", "Irradiance", "KinematicViscosity", "Length", "LinearMomentum", "Luminance",
		"LuminousFlux", "LuminousIntensity", "MagneticFlux", "MagneticFluxDensity",
		"MagneticVectorPotential", "Mass", "MassConcentration", "MassFlowRate", "MassPerAreaTime",
		"MemoryCapacity", "MolalityOfSolute", "MolarEnergy", "MolarMass", "MolarVolume", "Power",
		"Pressure", "RadiantFlux", "RadiantIntensity", "Radioactivity", "RelativeHumidity",
		"Resistance", "Resistivity", "SolidAngle", "SpecificVolume", "Speed", "SurfaceDensity",
		"SurfaceTension", "Temperature", "Time", "Torque", "Voltage", "Volume", "VolumeFlowRate",
		"VolumeFraction", "VolumetricFlux", "Wavenumber"),
	"gs1:exception": words("ALARM_CONDITION", "ERROR_CONDITION"),
	"Comp-": words("altitude", "axial_distance", "azimuth", "easting", "elevation_angle", "height",
		"latitude", "longitude", "northing", "polar_angle", "spherical_radius", "x", "y", "z"),
	"ER-": words("did_not_occur", "incorrect_data"),
}

func words(ws ...string) map[string]struct{} {
	m := make(map[string]struct{}, len(ws))
	for _, w := range ws {
		m[w] = struct{}{}
	}
	return m
}
