// Package schemas embeds the JSON Schemas that are the contract between the Python exporter
// and the Go tool. The .json files here are the single source; Python reads them from disk.
package schemas

import (
	_ "embed"
	"strconv"
)

// DumpSchemaID is the $id of the module dump schema.
const DumpSchemaID = "https://mrep.dev/schemas/dump-1.schema.json"

// DumpSchemaVersion is the newest dump schema version this mrep reads and the exporter writes;
// every version from MinDumpSchemaVersion up is read (version 2 added stats.norm and
// stats.sketch, optional, so a version-1 dump is read as it always was).
const DumpSchemaVersion = 2

// MinDumpSchemaVersion is the oldest dump schema version this mrep reads.
const MinDumpSchemaVersion = 1

// DumpVersionKnown says whether a schema_version literal is one this mrep reads.
func DumpVersionKnown(v string) bool {
	for n := MinDumpSchemaVersion; n <= DumpSchemaVersion; n++ {
		if v == strconv.Itoa(n) {
			return true
		}
	}
	return false
}

// Dump is the module dump schema, draft 2020-12.
//
//go:embed dump.schema.json
var Dump []byte
