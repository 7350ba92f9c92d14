#!/usr/bin/env bash
# make export-check: an inspection export's XLSX read by a reader other than
# the one that wrote it. The XLSX of all three domains that
# shared/exportsheet's TestSheetsAreWellFormed writes (payloads with & < >,
# control characters, non-ASCII text, a value past the cell limit) is
# converted by LibreOffice headless, every sheet to CSV; the check fails on
# any complaint LibreOffice prints, a sheet missing or empty, a header row
# whose column names repeat, or a chain column (a DSCSA event's source
# document, a pharmacy event's correcting person) missing.
set -euo pipefail

GO=${GO:-go}
SHEETS=(records pharmacy dscsa fsma)

soffice=$(command -v soffice || command -v libreoffice || true)
if [[ -z $soffice ]]; then
	install=(apt-get install -y --no-install-recommends libreoffice-calc)
	if [[ $(id -u) == 0 ]]; then
		echo "export-check: installing LibreOffice Calc from the distribution's packages" >&2
		apt-get update -qq && "${install[@]}" >/dev/null
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		echo "export-check: installing LibreOffice Calc from the distribution's packages (sudo)" >&2
		sudo apt-get update -qq && sudo "${install[@]}" >/dev/null
	else
		echo "export-check: LibreOffice is not installed and this user cannot install it." >&2
		echo "  Install it (Debian/Ubuntu: sudo ${install[*]}), then run make export-check again." >&2
		exit 2
	fi
	soffice=$(command -v soffice || command -v libreoffice)
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
EXPORT_CHECK_OUT="$dir/export.xlsx" $GO test -count=1 -run '^TestSheetsAreWellFormed$' ./shared/exportsheet/ >/dev/null
[[ -s $dir/export.xlsx ]] || { echo "export-check: no XLSX was written" >&2; exit 1; }

# Every sheet to CSV (UTF-8, values as shown; the last token: all sheets).
filter='csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,false,false,false,-1'
if ! "$soffice" --headless --norestore "-env:UserInstallation=file://$dir/profile" \
	--convert-to "$filter" --outdir "$dir/out" "$dir/export.xlsx" >"$dir/log" 2>&1; then
	echo "export-check: LibreOffice failed:" >&2
	cat "$dir/log" >&2
	exit 1
fi
# What LibreOffice says beyond its progress lines is a complaint (the JRE
# helper's warning is about Java, not the file).
if complaints=$(grep -v -e '^convert ' -e '^Writing sheet ' -e 'failed to launch javaldx' "$dir/log"); then
	echo "export-check: LibreOffice complained about the XLSX:" >&2
	echo "$complaints" >&2
	exit 1
fi
for s in "${SHEETS[@]}"; do
	csv="$dir/out/export-$s.csv"
	if [[ ! -s $csv ]] || (($(wc -l <"$csv") < 2)); then
		echo "export-check: sheet $s: no rows in LibreOffice's reading" >&2
		exit 1
	fi
	if dup=$(head -n 1 "$csv" | tr ',' '\n' | tr '[:upper:]' '[:lower:]' | sort | uniq -d | grep .); then
		echo "export-check: sheet $s: column names repeat: $dup" >&2
		exit 1
	fi
done
grep -q 'Romaine & kale <fresh>' "$dir/out/export-fsma.csv" || {
	echo "export-check: the fsma sheet lost the text of its payload" >&2
	exit 1
}
# The columns taken from the chains' records: the DSCSA event's source
# document (its instance id, with the trade's text), the pharmacy event's
# correcting person.
for want in "dscsa:dscsa.source_document_id" "dscsa:dscsa.source_document_event" "pharmacy:pharmacy.corrected_by" "pharmacy:pharmacy.correction_approved_by"; do
	s=${want%%:*} col=${want#*:}
	head -n 1 "$dir/out/export-$s.csv" | tr ',' '\n' | grep -qx "$col" || {
		echo "export-check: sheet $s has no column $col" >&2
		exit 1
	}
done
grep -q 'RET-2025-0042 <Müller & Söhne> ""Nord"" 陈伟' "$dir/out/export-dscsa.csv" || {
	echo "export-check: the dscsa sheet lost its source document's instance id" >&2
	exit 1
}
echo "export-check: LibreOffice $("$soffice" --version | awk '{print $2}') read every sheet (${SHEETS[*]}) without complaint"
