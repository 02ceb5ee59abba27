// Package schemas embeds the JSON Schemas that are the contract between the Python exporter
// and the Go tool. The .json files here are the single source; Python reads them from disk.
package schemas

import _ "embed"

// DumpSchemaID is the $id of the module dump schema.
const DumpSchemaID = "https://mrep.dev/schemas/dump-1.schema.json"

// DumpSchemaVersion is the dump schema's major version (the schema_version const).
const DumpSchemaVersion = 1

// Dump is the module dump schema, draft 2020-12.
//
//go:embed dump.schema.json
var Dump []byte
