// Package fsma holds the rules of the fsma domain: FDA Food Traceability
// Rule records (FSMA section 204, 21 CFR part 1 subpart S) for foods on the
// Food Traceability List. Each event is one critical tracking event (CTE),
// published on "events.fsma.<cte_type>" and described by
// schemas/fsma.schema.json; the schema gives the generic shape (types, the
// CTE enum, the fields of a location and of a reference document) and this
// package checks every field that has a dedicated error code.
//
// # Critical tracking events and their key data elements
//
// cte_type is one of harvesting, cooling, initial_packing,
// first_land_based_receiving, shipping, receiving, transformation. Every
// event carries supplier_id (MISSING_SUPPLIER) and traceability_lot_code
// (MISSING_TLC). The key data elements (KDEs) each CTE requires beyond
// those are listed in one table in this package (requiredKDEs, exposed by
// [RequiredKDEs]); they map the KDEs of 21 CFR 1.1325-1.1350:
//
//	CTE (rule)                         required KDEs
//	harvesting (1.1325(a))             event_time, location, product_description, quantity,
//	                                   unit_of_measure, subsequent_recipient, reference_document
//	cooling (1.1325(b))                event_time, location, product_description, quantity,
//	                                   unit_of_measure, harvest_location, subsequent_recipient,
//	                                   reference_document
//	initial_packing (1.1330)           event_time, location, tlc_source, product_description,
//	                                   quantity, unit_of_measure, harvest_location,
//	                                   harvester_business_name, harvester_phone, harvest_date,
//	                                   reference_document
//	first_land_based_receiving         event_time, location, tlc_source, product_description,
//	(1.1335)                           quantity, unit_of_measure, harvest_area,
//	                                   harvest_date_start, harvest_date_end, reference_document
//	shipping (1.1340(a))               event_time, tlc_source or tlc_source_reference,
//	                                   product_description, quantity, unit_of_measure,
//	                                   ship_to, ship_from or location, reference_document
//	receiving (1.1345(a))              event_time, tlc_source or tlc_source_reference,
//	                                   product_description, quantity, unit_of_measure,
//	                                   ship_from, ship_to or location, reference_document
//	transformation (1.1350)            event_time, location, tlc_source, product_description,
//	                                   quantity, unit_of_measure, input_tlcs, reference_document
//
// location is always the location of the CTE itself (the farm harvested,
// the place cooled, packed, landed, shipped from, received at or
// transformed). The rule names one shipped-from and one shipped-to
// location for shipping (1.1340(a)(4), (5)) and for receiving (1.1345(a)(4),
// (5)), so there the CTE's own place may be given as location or as the
// field that names the same place (ship_from for shipping, ship_to for
// receiving), and either satisfies the KDE ("a or b" in the table); a
// location_gln identifier comes from location, else from that field.
// event_time is the date of the CTE; product_description is
// the commodity (and variety, when given), the species or market name, or
// the product description the rule asks for. For receiving, ship_from is
// the immediate previous source; previous_source_location may name it
// when it differs from ship_from. Optional KDEs: field_name, variety,
// cooling_location, cooling_date, tlc_source_reference,
// previous_source_location.
//
// A location object (location, tlc_source, ship_from, ship_to,
// subsequent_recipient, harvest_location, cooling_location,
// previous_source_location) counts as given when it has a gln, or both a
// name and an address. A reference_document needs both a type and a
// number. input_tlcs needs at least one element.
//
// Simplifications: the rule's quantities of food received by an initial
// packer and the sprout-specific KDEs are not modeled, and
// traceability_lot_code is required on every CTE, including harvesting and
// cooling (which precede TLC assignment under the rule: there it carries
// the harvest lot the farm links to the packer's TLC).
//
// # Checks, in order (the first failure is returned)
//
//  1. cte_type against the subject token, both trimmed and lower-cased:
//     SUBJECT_MISMATCH (a missing or unknown cte_type, possible only when
//     the schema was skipped, is SCHEMA_VALIDATION_ERROR).
//  2. supplier_id: MISSING_SUPPLIER.
//  3. traceability_lot_code, then each element of input_tlcs when present:
//     MISSING_TLC.
//  4. the CTE's required KDEs: MISSING_KDE, whose detail names every
//     missing field (e.g. "shipping requires ship_to"), never a value.
//  5. event_time, RFC 3339 with an offset, normalized to UTC:
//     UNPARSEABLE_EVENT_TIME.
//  6. every location object given, required or optional: incomplete is
//     MISSING_KDE; a gln that is not 13 digits with a valid GS1 check digit
//     is INVALID_GLN (a GLN that lost its leading zero is invalid, never
//     padded).
//  7. quantity, a JSON number or a string holding a plain decimal greater
//     than zero (at most 15 integer and 6 fractional digits, no sign or
//     exponent): INVALID_QUANTITY.
//  8. harvest_date, cooling_date, harvest_date_start, harvest_date_end,
//     when given, calendar dates "YYYY-MM-DD", and the harvest date range
//     not reversed: SCHEMA_VALIDATION_ERROR (there is no dedicated code).
//
// Strings are trimmed; an empty string means "not given". Error details
// name the field and the rule, never the value.
//
// # Envelope
//
//   - EventType: the normalized cte_type.
//   - IdempotencyKey: domain.Key("fsma", supplier_id, traceability_lot_code,
//     cte_type, event date, reference_document.type,
//     reference_document.number), the event date being the UTC calendar
//     date of event_time ("2006-01-02") and the reference document type
//     lower-cased; KeySource
//     "supplier_id+tlc+cte_type+event_date+reference_document". Supplier,
//     lot, CTE and date identify the record the rule asks for; the
//     reference document is part of the identity because one lot can be
//     shipped twice on one day (to two customers, under two bills of
//     lading), and those are two events that must not be de-duplicated
//     into one. A re-send of the same event, whatever its formatting,
//     field order or UTC offset, maps to the same key. (Every CTE requires
//     a reference document; were one absent, its parts would be empty.)
//   - OrderingKey: "<supplier_id>.<traceability_lot_code>": the events of
//     one supplier's lot replay in event-time order.
//   - EventTime: event_time in UTC.
//   - PartyID: supplier_id.
//   - Identifiers: "supplier_id", "tlc", "location_gln" when the CTE's
//     location has a GLN, and "input_tlc_count" for transformations.
package fsma
